# The remote tier through the CLI against real redis-server processes:
# read-through and write-back, bad URLs and key files, tampered, oversize and
# missing chunks, a read-only consumer, a wrong password, a server that dies,
# restarts empty, freezes or is not Redis at all.  A build never fails for the
# remote and is never served a value that did not pass its MAC.
source "$SRC/tests/remote/redis.sh"
redis_start
P=$REDIS_PORT
KEY=$WORK/team.key
new_key "$KEY"
export MILC_REMOTE_CHUNK=65536   # the tiny model's 0.5 MB in 9 chunks
R=(--remote "redis://127.0.0.1:$P" --remote-key-file "$KEY")
B=(build --model tiny --json)

# ---- bad input: a clear message and exit 2 or 1, no cache made ----
for url in http://127.0.0.1:$P redis://127.0.0.1 redis://127.0.0.1:0 redis://127.0.0.1:99999 \
           "redis://127.0.0.1:$P/" "redis://127.0.0.1:$P/x" "redis://127.0.0.1:$P/1/2" "redis://a@b@127.0.0.1:$P" \
           "redis://user@127.0.0.1:$P" "redis://h_st:$P" "redis://:%zz@127.0.0.1:$P" "redis://127.0.0.1:$P?x=1"; do
  expect_rc 2 "$MILC" --cache-dir "$(fresh bad)" --remote "$url" --remote-key-file "$KEY" "${B[@]}"
  expect_in "$ERR" "malformed remote URL"
  if [ -e "$WORK/bad" ]; then fail "a bad URL made a cache"; else ok; fi
done
expect_rc 2 "$MILC" --remote "redis://127.0.0.1:$P" "${B[@]}"
expect_in "$ERR" "needs --remote-key-file"
expect_rc 2 "$MILC" --remote-readonly "${B[@]}"
chmod 644 "$KEY"; expect_rc 1 "$MILC" "${R[@]}" "${B[@]}"; expect_in "$ERR" "too open"; chmod 600 "$KEY"
ln -s "$KEY" "$WORK/link.key"
expect_rc 1 "$MILC" --remote "redis://127.0.0.1:$P" --remote-key-file "$WORK/link.key" "${B[@]}"
expect_in "$ERR" "symbolic link"
head -c 8 /dev/urandom > "$WORK/short.key"; chmod 600 "$WORK/short.key"
expect_rc 1 "$MILC" --remote "redis://127.0.0.1:$P" --remote-key-file "$WORK/short.key" "${B[@]}"
expect_in "$ERR" "32 bytes"
expect_rc 2 "$MILC" --remote "redis://127.0.0.1:$P" cache push
expect_rc 2 "$MILC" cache pull

# ---- write-back, then read-through into an empty cache ----
expect_rc 0 "$MILC" --cache-dir "$(fresh a)" "${R[@]}" "${B[@]}"
K=$(field "$OUT" key); expect_eq "$(field "$OUT" outcome)" miss
expect_eq "$(rcli exists "milc:e:$K")" 1
expect_rc 0 "$MILC" "${R[@]}" --json cache stat --remote
expect_json "$OUT" "j['remote']['entries'] == 1 and j['remote']['direct_keys'] == 1 and j['remote']['chunks'] == 9"
expect_rc 0 "$MILC" --cache-dir "$(fresh b)" "${R[@]}" "${B[@]}"
expect_eq "$(field "$OUT" outcome)" direct_hit
expect_eq "$(field "$OUT" remote)" True
expect_eq "$(field "$OUT" key)" "$K"
expect_rc 0 "$MILC" --cache-dir "$WORK/b" cache verify
expect_in "$OUT" "0 bad entries"
# the pulled entry is the built one, byte for byte (export both, compare)
"$MILC" --cache-dir "$WORK/a" cache export "$WORK/a.bundle" "$K" 2>/dev/null
"$MILC" --cache-dir "$WORK/b" cache export "$WORK/b.bundle" "$K" 2>/dev/null
"$PY" - "$WORK/a.bundle" "$WORK/b.bundle" <<'PYEOF' && ok || fail "pulled sections differ from the built ones"
import sys
a, b = (open(f, 'rb').read() for f in sys.argv[1:3])
# after the 16-byte header: key 16, created 8 (a pull is a new local entry), the rest;
# the trailer's last 16 bytes hash the whole file (created included)
sys.exit(0 if a[16:32] == b[16:32] and a[40:-16] == b[40:-16] else 1)
PYEOF

# ---- push and pull on request ----
expect_rc 0 "$MILC" --cache-dir "$(fresh c)" "${R[@]}" cache pull
expect_in "$OUT" "pulled 1"
expect_rc 0 "$MILC" --cache-dir "$WORK/c" "${R[@]}" cache pull "$K"
expect_in "$OUT" "already there 1"
expect_rc 1 "$MILC" --cache-dir "$WORK/c" "${R[@]}" cache pull 0123456789abcdef0123456789abcdef
expect_rc 2 "$MILC" --cache-dir "$WORK/c" "${R[@]}" cache pull nothex
expect_rc 0 "$MILC" --cache-dir "$WORK/c" build --model tiny --seq 8 --json
K8=$(field "$OUT" key)
expect_rc 0 "$MILC" --cache-dir "$WORK/c" "${R[@]}" cache push
expect_in "$OUT" "pushed 1, already there 1"
expect_eq "$(rcli exists "milc:e:$K8")" 1

# ---- prewarm: the workers read through and write back ----
printf -- '--model tiny --seq 16,32,48\n' > "$WORK/m"
expect_rc 0 "$MILC" --cache-dir "$(fresh pw1)" "${R[@]}" --json prewarm "$WORK/m" -j 2
expect_json "$OUT" "j['built'] + j['hits'] == 3 and j['failed'] == 0"
expect_rc 0 "$MILC" --cache-dir "$(fresh pw2)" "${R[@]}" --json prewarm "$WORK/m" -j 2
expect_json "$OUT" "j['built'] == 0 and j['hits'] == 3"
expect_rc 0 "$MILC" --cache-dir "$WORK/pw2" cache verify
expect_in "$OUT" "0 bad entries"

# ---- a read-only consumer never writes ----
before=$(rcli dbsize)
expect_rc 0 "$MILC" --cache-dir "$(fresh ro)" "${R[@]}" --remote-readonly "${B[@]}" --seq 80
expect_eq "$(field "$OUT" outcome)" miss
expect_eq "$(rcli dbsize)" "$before"
expect_rc 2 "$MILC" --cache-dir "$WORK/ro" "${R[@]}" --remote-readonly cache push

# ---- tampered values are refused, rebuilt, and the rebuild heals the remote ----
up=$(rcli --scan --pattern "milc:c:$K:*:4" | head -1)
rcli setrange "$up" 100 X > /dev/null
expect_rc 0 "$MILC" --cache-dir "$(fresh t1)" "${R[@]}" "${B[@]}"
expect_eq "$(field "$OUT" outcome)" miss
expect_in "$ERR" "fails its MAC"
expect_rc 0 "$MILC" --cache-dir "$(fresh t2)" "${R[@]}" "${B[@]}"
expect_eq "$(field "$OUT" remote)" True
# the manifest itself
rcli setrange "milc:e:$K" 60 Y > /dev/null
expect_rc 0 "$MILC" --cache-dir "$(fresh t3)" "${R[@]}" "${B[@]}"
expect_eq "$(field "$OUT" outcome)" miss
expect_in "$ERR" "fails its MAC"
# read under another team's key: refused the same way
new_key "$WORK/other.key"
expect_rc 0 "$MILC" --cache-dir "$(fresh t4)" --remote "redis://127.0.0.1:$P" --remote-key-file "$WORK/other.key" --remote-readonly "${B[@]}"
expect_eq "$(field "$OUT" outcome)" miss
expect_in "$ERR" "fails its MAC"
expect_rc 1 "$MILC" --cache-dir "$(fresh t5)" --remote "redis://127.0.0.1:$P" --remote-key-file "$WORK/other.key" cache pull "$K8"
expect_in "$ERR" "fails its MAC"
expect_rc 0 "$MILC" --cache-dir "$WORK/t5" cache ls --json
expect_eq "$OUT" "[]"
# an oversize chunk (one byte appended) and a missing one
up=$(rcli --scan --pattern "milc:c:$K8:*:2" | head -1)
rcli append "$up" Z > /dev/null
expect_rc 1 "$MILC" --cache-dir "$(fresh o1)" "${R[@]}" cache pull "$K8"
expect_in "$ERR" "wrong size"
rcli del "$(rcli --scan --pattern "milc:c:$K8:*:5" | head -1)" > /dev/null
expect_rc 0 "$MILC" --cache-dir "$(fresh o2)" "${R[@]}" "${B[@]}" --seq 8
expect_eq "$(field "$OUT" outcome)" miss
expect_rc 0 "$MILC" --cache-dir "$(fresh o3)" "${R[@]}" "${B[@]}" --seq 8
expect_eq "$(field "$OUT" remote)" True

# ---- restarted empty: a miss, rebuilt, pushed again ----
redis_stop "$REDIS_PID"
redis_start "$P"
expect_rc 0 "$MILC" --cache-dir "$(fresh e1)" "${R[@]}" "${B[@]}"
expect_eq "$(field "$OUT" outcome)" miss
expect_eq "$(rcli exists "milc:e:$K")" 1

# ---- a dead server: local-only, one warning, exit 0 ----
redis_stop "$REDIS_PID"
expect_rc 0 "$MILC" --cache-dir "$(fresh d1)" "${R[@]}" "${B[@]}" --seq 4,8
expect_eq "$(nwarn "$ERR")" 1
expect_in "$ERR" "continuing with the local cache only"
expect_rc 3 "$MILC" --cache-dir "$WORK/d1" "${R[@]}" cache pull
expect_eq "$(nwarn "$ERR")" 0
expect_rc 0 "$MILC" --cache-dir "$(fresh d2)" "${R[@]}" prewarm "$WORK/m" -j 2
expect_eq "$(nwarn "$ERR")" 1

# ---- a frozen server (SIGSTOP): timeouts hold ----
redis_start "$P"
"$MILC" --cache-dir "$(fresh f0)" "${R[@]}" "${B[@]}" > /dev/null 2>&1
frozen_server_check f1 "${R[@]}" "${B[@]}" --seq 4,8

# ---- a wrong password ----
REDIS_AUTH=s3cret redis_start "" --requirepass s3cret
AP=$REDIS_PORT
expect_rc 0 "$MILC" --cache-dir "$(fresh p1)" --remote "redis://:wrong@127.0.0.1:$AP" --remote-key-file "$KEY" "${B[@]}"
expect_eq "$(nwarn "$ERR")" 1
expect_in "$ERR" "authentication"
expect_rc 3 "$MILC" --remote "redis://:wrong@127.0.0.1:$AP" cache stat --remote
expect_not_in "$ERR" "wrong@"   # the password is never echoed
expect_rc 0 "$MILC" --cache-dir "$(fresh p2)" --remote "redis://default:s3cret@127.0.0.1:$AP" --remote-key-file "$KEY" "${B[@]}"
expect_eq "$(nwarn "$ERR")" 0
expect_eq "$(REDIS_PORT=$AP REDIS_AUTH=s3cret rcli exists "milc:e:$K")" 1

# ---- not Redis: a server that answers garbage, one that sends an endless reply ----
GP=$(free_port)
"$PY" - "$GP" <<'PYEOF' &
import socket, sys, threading
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(16)
def serve(c, n):
    try:
        c.recv(65536)
        if n % 2 == 0:
            c.sendall(b"HTTP/1.0 400 Bad Request\r\n\r\n")
        else:  # a bulk reply that never ends
            c.sendall(b"$99999999999\r\n")
            while True: c.sendall(b"\0" * 65536)
    except OSError:
        pass
    finally:
        c.close()
n = 0
while True:
    c, _ = s.accept(); threading.Thread(target=serve, args=(c, n), daemon=True).start(); n += 1
PYEOF
GPID=$!; REDIS_PIDS+=("$GPID")
for i in $(seq 50); do (exec 3<>/dev/tcp/127.0.0.1/$GP) 2>/dev/null && break; sleep 0.05; done
t0=$(date +%s%N)
expect_rc 0 "$MILC" --cache-dir "$(fresh g1)" --remote "redis://127.0.0.1:$GP" --remote-key-file "$KEY" "${B[@]}"
expect_eq "$(nwarn "$ERR")" 1
# connection 1 (0 was the probe): the endless reply, cut at its size bound
# or at the reply timeout, whichever comes first (a slow, sanitized build)
if [[ "$ERR" == *"an answer larger than"* || "$ERR" == *"answer not complete within"* ]]; then ok
else fail "an endless reply was not cut: $ERR"; fi
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
if [ "$ms" -lt 5000 ]; then ok; else fail "an endless reply held the build $ms ms"; fi
expect_rc 3 "$MILC" --cache-dir "$WORK/g1" --remote "redis://127.0.0.1:$GP" --remote-key-file "$KEY" cache pull
expect_in "$ERR" "protocol error"
expect_rc 0 "$MILC" --cache-dir "$WORK/g1" cache verify

# ---- a server that drops the connection while a push is sending: the push ----
# fails as a remote failure, never by SIGPIPE (exit 141, which killed a build
# whose server died mid-push).  Over a Unix socket a write after the peer
# closed is EPIPE at once; the local cache is untouched.
DS=$WORK/drop.sock
"$PY" - "$DS" <<'PYEOF' &
import socket, sys, threading
s = socket.socket(socket.AF_UNIX); s.bind(sys.argv[1]); s.listen(16)
def serve(c):
    buf, total = b"", 0
    try:
        while True:
            d = c.recv(65536)
            if not d:
                return
            buf += d
            total += len(d)
            while True:  # answer every whole command: PONG, else nil
                if not buf.startswith(b"*") or b"\r\n" not in buf:
                    break
                n, at, args, whole = int(buf[1:buf.index(b"\r\n")]), buf.index(b"\r\n") + 2, [], True
                for _ in range(n):
                    if b"\r\n" not in buf[at:]:
                        whole = False; break
                    e = buf.index(b"\r\n", at); ln = int(buf[at + 1:e]); at = e + 2
                    if len(buf) < at + ln + 2:
                        whole = False; break
                    args.append(buf[at:at + ln]); at += ln + 2
                if not whole:
                    break
                buf = buf[at:]
                c.sendall(b"+PONG\r\n" if args[0].upper() == b"PING" else b"$-1\r\n")
            if total > 300000:  # in the middle of the chunks: gone
                return
    except OSError:
        pass
    finally:
        c.close()
while True:
    c, _ = s.accept(); threading.Thread(target=serve, args=(c,), daemon=True).start()
PYEOF
DPID=$!; REDIS_PIDS+=("$DPID")
for i in $(seq 50); do [ -S "$DS" ] && break; sleep 0.05; done
expect_rc 0 "$MILC" --cache-dir "$(fresh dp)" build --layers 2 --json
expect_rc 3 "$MILC" --cache-dir "$WORK/dp" --remote "unix://$DS" --remote-key-file "$KEY" cache push
expect_in "$ERR" "error: remote cache:"
expect_rc 0 "$MILC" --cache-dir "$WORK/dp" cache verify
