# milc bench: the --quick preset end to end (every figure of the schema in
# cli/BENCH.md present and sane, fits that agree with an independent
# least-squares fit, CSV rows matching the JSON), the output forms, and
# usage errors.

# The fresh-process child checks hits as build does: the second run on a
# cache trusts what the first one stored; --verify checksums every hit.
C=("$MILC" --cache-dir "$WORK/childcache" bench --child ttft --model tiny --mode 2 --chunk 1)
expect_rc 0 "${C[@]}"
expect_json "$OUT" "j['misses'] == 2 and j['hits'] == 0 and j['finite']"
expect_rc 0 "${C[@]}"
expect_json "$OUT" "j['hits'] == 2 and j['checksummed'] == 0"
expect_rc 0 "${C[@]}" --verify
expect_json "$OUT" "j['hits'] == 2 and j['checksummed'] == 2"

# Every mode, sweeps on, JSON on stdout, CSV to a file.
expect_rc 0 "$MILC" bench --quick --json --csv "$WORK/b.csv"
J=$OUT
expect_in "$ERR" "bench: mode 2: cold run 1/1"
expect_json "$J" "j['schema'] == 'milc-bench/2' and j['config'] == 'tiny' and j['layers'] == 2 and j['chunks'] == 2"
expect_json "$J" "[m['mode'] for m in j['modes']] == [0, 1, 2]"
# Every headline figure is there and positive.
expect_json "$J" "all(isinstance(m[k], (int, float)) and m[k] > 0 for m in j['modes'] for k in
  ['layers_per_chunk', 'chunks', 'compile_ms', 'artifact_bytes', 'load_ms', 'ttft_cold_ms', 'ttft_cached_ms',
   'prefill_ms', 'prefill_tok_s', 'decode_ms_per_token', 'dispatches_per_token', 'prefill_dispatches',
   'peak_rss_bytes', 'peak_rss_cold_bytes', 'build_warm_ms', 'ttft_cold_tok_s', 'ttft_cached_tok_s'])"
expect_json "$J" "all(m['ttft_cached_breakdown'][k] >= 0 for m in j['modes'] for k in ['start_ms', 'open_ms', 'lookup_ms', 'load_ms', 'run_ms'])"
# The cold build's parts add up to it (within the lookups between them), each
# beside the disk's own write of the same bytes.
expect_json "$J" "all(m['cold_path'][k] > 0 for m in j['modes'] for k in ['generate_ms', 'check_ms', 'lower_pack_ms', 'store_ms', 'disk_write_ms'])"
expect_json "$J" "all(sum(m['cold_path'][k] for k in ['generate_ms', 'check_ms', 'lower_pack_ms', 'store_ms']) <= m['compile_ms'] * 1.01 for m in j['modes'])"
expect_json "$J" "all(abs(m['cold_path']['compile_over_disk'] - m['compile_ms'] / m['cold_path']['disk_write_ms']) < 1e-3 * m['cold_path']['compile_over_disk'] for m in j['modes'])"
# Peak RSS is the child's own: a tiny model's process stays small.
expect_json "$J" "all(m['peak_rss_bytes'] < 256 << 20 and m['peak_rss_cold_bytes'] < 256 << 20 for m in j['modes'])"
# A spread per figure: min <= median <= max.
expect_json "$J" "all(s['min'] <= m[k] <= s['max'] and s['n'] == 1 for m in j['modes'] for k, s in m['spread'].items())"
# Tokens/s is tokens over time; the first prefill also pays process start.
expect_json "$J" "all(abs(m['prefill_tok_s'] - j['seq'] * 1000 / m['prefill_ms']) < 1e-3 * m['prefill_tok_s'] for m in j['modes'])"
expect_json "$J" "all(m['ttft_cached_ms'] > m['ttft_cached_breakdown']['start_ms'] for m in j['modes'])"
# Bonded modes dispatch once per chunk; non-bonded once per op group.
expect_json "$J" "all(m['dispatches_per_token'] == j['chunks'] and m['prefill_dispatches'] == j['chunks'] for m in j['modes'] if m['mode'] != 1)"
expect_json "$J" "[m for m in j['modes'] if m['mode'] == 1][0]['dispatches_per_token'] > 10 * j['chunks']"
# Mode 0 holds both variants, so its artifact is the larger.
expect_json "$J" "j['modes'][0]['artifact_bytes'] > j['modes'][2]['artifact_bytes']"
# The per-dispatch overhead is measured directly: the decode chunks bonded
# (one dispatch each) against one dispatch per op, in alternated pairs.
expect_json "$J" "j['dispatch']['bonded_dispatches'] == j['chunks'] and j['dispatch']['per_op_dispatches'] > 10 * j['chunks']
  and j['dispatch']['n'] == 5 and j['dispatch']['min'] <= j['dispatch']['us'] <= j['dispatch']['max']"
expect_json "$J" "abs(j['summary']['dispatch_overhead_ms'] * 1000 - j['dispatch']['us']) < 1e-6"
expect_in "$ERR" "per-dispatch overhead: decode chunks bonded vs one dispatch per op"
# Decode's plan: ops, weights and their read bandwidth.
expect_json "$J" "all(m['decode_ops'] >= m['dispatches_per_token'] and m['decode_weight_bytes'] > 0 and m['decode_read_gbs'] > 0 for m in j['modes'])"
# Each sweep point: its weights and the time to stream them once; the
# intercept says what it is, and its flags follow from the fit.
expect_json "$J" "all(p['weight_bytes'] > 0 and p['stream_ms'] > 0 for m in j['modes'] for s in m['sweeps'].values() for p in s['points'])"
expect_json "$J" "all(s['a_means'] == 'time independent of work' and
  (('negative_intercept' in s['flags']) == (s['a_ms'] < 0)) and (('poor_fit' in s['flags']) == (s['r2'] < 0.98)) and
  (s['hinge'] is None) == ('bends' not in s['flags']) for m in j['modes'] for s in m['sweeps'].values())"
expect_json "$J" "j['summary']['tokens_intercept_ms'] == [m for m in j['modes'] if m['mode'] == 2][0]['sweeps']['tokens']['a_ms']
  and isinstance(j['summary']['depth_flags'], list) and 'depth_overhead_ms' not in j['summary']"
# Sweeps: the quick lists, and fits equal to numpy's least squares over the points.
expect_json "$J" "all([p['work'] for p in m['sweeps']['depth']['points']] == [1, 2] and
  [p['work'] for p in m['sweeps']['tokens']['points']] == [1, 8] for m in j['modes'])"
expect_json "$J" "all(p['ms'] > 0 and p['dispatches'] >= 1 for m in j['modes'] for s in m['sweeps'].values() for p in s['points'])"
cat > "$WORK/fit.py" <<'EOF'
import json, sys
import numpy as np
j = json.load(open(sys.argv[1]))
for m in j['modes']:
    for s in m['sweeps'].values():
        x = np.array([p['work'] for p in s['points']], float)
        y = np.array([p['ms'] for p in s['points']], float)
        b, a = np.polyfit(x, y, 1)
        ss = ((y - y.mean()) ** 2).sum()
        r2 = 1 - ((y - (a + b * x)) ** 2).sum() / ss if ss > 0 else 1.0
        tol = 1e-4 * max(1.0, abs(y).max())
        assert abs(s['a_ms'] - a) < tol and abs(s['b_ms'] - b) < tol and abs(s['r2'] - r2) < 1e-3, (s, a, b, r2)
print('fits ok')
EOF
printf '%s' "$J" > "$WORK/b.json"
run "$PY" "$WORK/fit.py" "$WORK/b.json"
expect_eq "$OUT" "fits ok"
expect_json "$J" "j['summary']['mode'] == 2 and j['summary']['ttft_cached_over_steady'] > 0 and j['summary']['ttft_cold_over_cached'] > 0"
# The CSV carries the same figures, one tidy row each.
if [ -s "$WORK/b.csv" ]; then ok; else fail "no CSV written"; fi
expect_eq "$(head -1 "$WORK/b.csv")" "mode,section,metric,work,median,min,max,n"
run "$PY" -c "
import csv, json
rows = list(csv.DictReader(open('$WORK/b.csv')))
j = json.load(open('$WORK/b.json'))
for m in j['modes']:
    get = lambda sec, met, work='': [r for r in rows if r['mode'] == str(m['mode']) and r['section'] == sec and r['metric'] == met and r['work'] == work]
    for k in ['compile_ms', 'ttft_cold_ms', 'ttft_cached_ms', 'decode_ms_per_token', 'build_warm_ms']:
        (r,) = get('headline', k)
        assert abs(float(r['median']) - m[k]) <= 1e-4 * m[k], (k, r, m[k])
    (r,) = get('tokens_fit', 'a_ms')
    assert abs(float(r['median']) - m['sweeps']['tokens']['a_ms']) <= 1e-4 * max(1, abs(m['sweeps']['tokens']['a_ms']))
    assert len(get('depth', 'ms', '2')) == 1 and len(get('tokens', 'ms', '8')) == 1
    (r,) = get('tokens', 'stream_ms', '8')
    assert abs(float(r['median']) - m['sweeps']['tokens']['points'][1]['stream_ms']) <= 1e-4 * float(r['median'])
    (r,) = get('depth_fit', 'negative_intercept')
    assert float(r['median']) == (1 if m['sweeps']['depth']['a_ms'] < 0 else 0)
(r,) = [r for r in rows if r['mode'] == '-1' and r['section'] == 'dispatch' and r['metric'] == 'us']
assert abs(float(r['median']) - j['dispatch']['us']) <= 1e-4 * max(1, abs(j['dispatch']['us'])) and r['n'] == '5'
print('csv ok')"
expect_eq "$OUT" "csv ok"

# The plot draws what the JSON says (when matplotlib is there).
if "$PY" -c "import matplotlib" 2>/dev/null; then
  expect_rc 0 "$PY" "$SRC/examples/plot_bench.py" "$WORK/b.json" -o "$WORK/b.png"
  if [ -s "$WORK/b.png" ]; then ok; else fail "no plot written"; fi
fi

# The table on stdout, JSON to a file (both spellings), no sweeps.
expect_rc 0 "$MILC" bench --quick --modes 2 --no-sweeps --json "$WORK/one.json"
expect_in "$OUT" "ttft cached / steady prefill"
expect_in "$OUT" "mode 2"
expect_in "$OUT" "per-dispatch overhead"
expect_not_in "$OUT" "fixed cost per dispatch"
expect_not_in "$OUT" "depth sweep"
expect_json "$(cat "$WORK/one.json")" "len(j['modes']) == 1 and j['modes'][0]['sweeps'] is None and j['summary']['tokens_intercept_ms'] is None and j['dispatch']['n'] == 5"
expect_rc 0 "$MILC" bench --quick --modes 1 --no-sweeps -q --json="$WORK/two.json"
expect_eq "$OUT" ""
expect_json "$(cat "$WORK/two.json")" "j['modes'][0]['mode'] == 1 and j['summary']['mode'] == 1"

# Usage errors: exit 2 before any work.
expect_rc 2 "$MILC" bench --quick --modes 3
expect_in "$ERR" "modes"
expect_rc 2 "$MILC" bench --quick --modes 2,2
expect_rc 2 "$MILC" bench --quick --repeat 0
expect_rc 2 "$MILC" bench --quick --depths 1,x
expect_rc 2 "$MILC" bench --quick --seqs ""
expect_rc 2 "$MILC" bench --quick --chunk
expect_rc 2 "$MILC" bench --quick --seq 1,8
expect_in "$ERR" "--seqs"
expect_rc 2 "$MILC" bench --quick stray
expect_rc 2 "$MILC" bench --child nope
# A parameter the template does not have is invalid input.
expect_rc 1 "$MILC" bench --quick --no-such-param 3
expect_in "$ERR" "no-such-param"
expect_rc 0 "$MILC" bench --help
expect_in "$OUT" "--no-sweeps"
expect_in "$OUT" "min_seq"
