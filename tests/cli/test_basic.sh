# The command line itself: help, version, exit codes for usage errors.
expect_rc 0 "$MILC" --help
expect_in "$OUT" "usage: milc"
expect_in "$OUT" "exit codes"
expect_rc 0 "$MILC" --version
expect_in "$OUT" "milc "
expect_rc 2 "$MILC"
expect_rc 2 "$MILC" frobnicate
expect_in "$ERR" "no command 'frobnicate'"
for c in build emit check fmt compile run cache templates; do
  expect_rc 0 "$MILC" help $c
  expect_in "$OUT" "usage: milc $c"
  expect_rc 0 "$MILC" $c --help
  expect_in "$OUT" "usage: milc $c"
done
expect_rc 2 "$MILC" check --no-such-flag x.mil
expect_in "$ERR" "milc check: unknown option '--no-such-flag'"
expect_rc 2 "$MILC" check
expect_rc 2 "$MILC" check --target gpu x.mil
expect_in "$ERR" "--target must be cpu or ane"
expect_rc 3 "$MILC" check /nonexistent/x.mil
expect_in "$ERR" "cannot open '/nonexistent/x.mil'"
expect_rc 2 "$MILC" build --mode 7
expect_in "$ERR" "--mode: '7' is not a list of compile modes (2=bonded 1=non-bonded 0=both)"
