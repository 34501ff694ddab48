# The remote tier over a Unix-domain socket (unix:///path, redis-server's
# unixsocket): malformed socket URLs refused (exit 2, no cache made), write-
# back and read-through, the same entries seen over TCP, a password, a
# tampered chunk, a socket that is not there, and a frozen server.
source "$SRC/tests/remote/redis.sh"
S=$WORK/redis.sock
export REDIS_AUTH=pw
redis_start "" --unixsocket "$S" --unixsocketperm 700 --requirepass pw
for _ in $(seq 100); do [ -S "$S" ] && break; sleep 0.05; done
P=$REDIS_PORT
KEY=$WORK/team.key
new_key "$KEY"
export MILC_REMOTE_CHUNK=65536   # the tiny model's 0.5 MB in 9 chunks
U=(--remote "unix://:pw@$S" --remote-key-file "$KEY")
B=(build --model tiny --json)

# ---- bad input: a clear message, exit 2, no cache made ----
for url in "unix://" "unix:///" "unix://relative.sock" "unix:$S" "unix://$S?db=x" "unix://$S?db=70000" \
           "unix://$S?db=1&x=2" "unix://$S?password=pw" "unix://pw@$S" "unix://:pw@relative.sock" \
           "unix://$S%zz" "unix://$S%01" "unix:///$(printf 'a%.0s' $(seq 120))"; do
  expect_rc 2 "$MILC" --cache-dir "$(fresh bad)" --remote "$url" --remote-key-file "$KEY" "${B[@]}"
  expect_in "$ERR" "malformed remote URL"
  expect_not_in "$ERR" "pw@"
  if [ -e "$WORK/bad" ]; then fail "a bad URL made a cache"; else ok; fi
done

# ---- write-back over the socket, read-through over it and over TCP ----
expect_rc 0 "$MILC" --cache-dir "$(fresh a)" "${U[@]}" "${B[@]}"
K=$(field "$OUT" key); expect_eq "$(field "$OUT" outcome)" miss
expect_eq "$(nwarn "$ERR")" 0
expect_eq "$(rcli exists "milc:e:$K")" 1
expect_rc 0 "$MILC" --cache-dir "$(fresh b)" "${U[@]}" "${B[@]}"
expect_eq "$(field "$OUT" outcome)" direct_hit
expect_eq "$(field "$OUT" remote)" True
expect_rc 0 "$MILC" --cache-dir "$WORK/b" cache verify
expect_in "$OUT" "0 bad entries"
expect_rc 0 "$MILC" --cache-dir "$(fresh c)" --remote "redis://:pw@127.0.0.1:$P" --remote-key-file "$KEY" "${B[@]}"
expect_eq "$(field "$OUT" remote)" True
expect_rc 0 "$MILC" --cache-dir "$(fresh d)" "${U[@]}" cache pull "$K"
expect_in "$OUT" "pulled 1"
expect_rc 0 "$MILC" "${U[@]}" --json cache stat --remote
expect_json "$OUT" "j['remote']['entries'] == 1 and j['remote']['chunks'] == 9"
# a database other than 0: empty, so a miss that writes back there
expect_rc 0 "$MILC" --cache-dir "$(fresh db)" --remote "unix://:pw@$S?db=3" --remote-key-file "$KEY" "${B[@]}"
expect_eq "$(field "$OUT" outcome)" miss
expect_eq "$(rcli -n 3 exists "milc:e:$K")" 1

# ---- a tampered chunk is refused over the socket too, and rebuilt ----
up=$(rcli --scan --pattern "milc:c:$K:*:4" | head -1)
rcli setrange "$up" 100 X > /dev/null
expect_rc 0 "$MILC" --cache-dir "$(fresh t1)" "${U[@]}" "${B[@]}"
expect_eq "$(field "$OUT" outcome)" miss
expect_in "$ERR" "fails its MAC"
expect_rc 0 "$MILC" --cache-dir "$WORK/t1" cache verify
expect_in "$OUT" "0 bad entries"

# ---- a wrong password, a socket that is not there: one warning, a local build ----
expect_rc 0 "$MILC" --cache-dir "$(fresh p1)" --remote "unix://:wrong@$S" --remote-key-file "$KEY" "${B[@]}"
expect_eq "$(nwarn "$ERR")" 1
expect_in "$ERR" "authentication"
expect_not_in "$ERR" "wrong@"
expect_rc 0 "$MILC" --cache-dir "$(fresh n1)" --remote "unix://$WORK/none.sock" --remote-key-file "$KEY" "${B[@]}"
expect_eq "$(field "$OUT" outcome)" miss
expect_eq "$(nwarn "$ERR")" 1
expect_in "$ERR" "remote cache unix://$WORK/none.sock?db=0 is unusable"
expect_rc 3 "$MILC" --remote "unix://$WORK/none.sock" cache stat --remote

# ---- a frozen server (SIGSTOP): timeouts hold over the socket ----
frozen_server_check f1 "${U[@]}" "${B[@]}" --seq 4,8
