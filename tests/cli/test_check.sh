# milc check and milc fmt on the front end's golden and error files.
cd "$SRC/tests/mil"
for f in golden/*.mil; do
  grep -q BLOBFILE "$f" && continue   # their weight files are made by test_mil_files
  expect_rc 0 "$MILC" check "$f"
  # fmt gives the golden canonical text, and formatting that again changes nothing.
  expect_rc 0 "$MILC" fmt "$f" -o "$WORK/fmt1.mil"
  if cmp -s "$WORK/fmt1.mil" "${f%.mil}.expected"; then ok; else fail "fmt $f differs from ${f%.mil}.expected"; fi
  expect_rc 0 "$MILC" fmt "$WORK/fmt1.mil" --check --model-path "$(dirname "$f")"
done
# Every error file: exit 1 and exactly the expected diagnostics on stderr.
for f in errors/*.mil; do
  # Skipped here: files whose weight files test_mil_files writes, and the
  # error-cap case (it sets a cap of 3; the CLI's is 100).
  grep -q BLOBFILE "$f" && continue
  case $f in *cap_many*) continue ;; esac
  case $f in *ane_*) args=(--target ane) ;; *) args=() ;; esac
  run "$MILC" check "${args[@]}" "$f"
  expect_eq "$RC" 1
  if [ "$ERR" = "$(cat "${f%.mil}.expected")" ]; then ok; else
    fail "diagnostics of $f differ:"; diff <(printf '%s\n' "$ERR") "${f%.mil}.expected" | head -20 >&2; fi
done
# --json: diagnostics as data.
run "$MILC" check --json errors/shapes.mil
expect_eq "$RC" 1
expect_json "$OUT" "j['diagnostics'][0]['line'] == 4 and j['diagnostics'][0]['level'] == 'error'"
cd "$WORK"
