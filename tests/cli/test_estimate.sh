# milc estimate and milc bench --project ane: the ANE projection is labelled
# an estimate wherever it appears, agrees with its own plan (dispatches,
# depths, modes, paths), picks the depth with the least time per token, and
# refuses bad chip files and options with the documented exit codes.

expect_rc 0 "$MILC" estimate --model gpt2 --modes 1,2
expect_in "$OUT" "ANE ESTIMATE (projected from published figures, NOT measured)"
expect_in "$OUT" "docs/ANE-ESTIMATE.md"
expect_in "$OUT" "coreml path"
expect_in "$OUT" "mode 2: least time per token at depth 12"

expect_rc 0 "$MILC" --json estimate --model gpt2 --depths 1,4,12 --prompt 64 --ctx 256
J=$OUT
expect_json "$J" "j['estimate'] is True and 'not measured' in j['note'] and j['chip'].startswith('Apple M4 Max') and j['layers'] == 12"
expect_json "$J" "j['prompt'] == 64 and j['ctx'] == 256 and j['min_seq'] == 16"
# GPT-2: a layer holds ~14 MB of fp16 weights and a few dozen MIL ops.
expect_json "$J" "13e6 < j['layer_weight_bytes'] < 15e6 and 20 <= j['layer_ops'] <= 80"
# Every mode x depth x path; bonded modes dispatch once per chunk, mode 1 once per op.
expect_json "$J" "sorted({(r['mode'], r['depth'], r['path']) for r in j['rows']}) ==
  sorted({(m, d, p) for m in (0, 1, 2) for d in (1, 4, 12) for p in ('direct', 'coreml')})"
expect_json "$J" "all(r['dispatches_per_token'] == r['programs'] == 12 // r['depth'] for r in j['rows'] if r['mode'] != 1)"
expect_json "$J" "all(r['dispatches_per_token'] == 12 * j['layer_ops'] and r['ops_per_dispatch'] == 1 for r in j['rows'] if r['mode'] == 1)"
# The parts add up; Core ML triples the fixed part; mode 0 compiles twice what mode 2 does.
expect_json "$J" "all(abs(r['decode_ms'] - r['decode_fixed_ms'] - max(r['decode_compute_ms'], r['decode_stream_ms'])) < 1e-5 * r['decode_ms'] for r in j['rows'])"
expect_json "$J" "all(abs(c['decode_fixed_ms'] - 3 * d['decode_fixed_ms']) < 1e-5 * c['decode_fixed_ms'] for d in j['rows'] for c in j['rows']
  if d['path'] == 'direct' and c['path'] == 'coreml' and (c['mode'], c['depth']) == (d['mode'], d['depth']))"
expect_json "$J" "all(abs(z['compile_ms'] - 2 * t['compile_ms']) < 1e-9 for z in j['rows'] for t in j['rows']
  if z['mode'] == 0 and t['mode'] == 2 and (z['depth'], z['path']) == (t['depth'], t['path']))"
expect_json "$J" "all(abs(r['cold_ms'] - r['compile_ms'] - r['prefill_ms']) < 1e-5 * r['cold_ms'] and
  abs(r['prefill_tok_s'] - 64e3 / r['prefill_ms']) < 1e-3 * r['prefill_tok_s'] for r in j['rows'])"
# The best depth is the one with the least decode time among stable programs.
expect_json "$J" "all(b['decode_ms'] == min(r['decode_ms'] for r in j['rows'] if r['mode'] == b['mode'] and r['path'] == b['path']
  and not r['over_max_program']) for b in j['best']) and len(j['best']) == 6"

# A chip file of one's own; bad ones refused, naming the field.
sed 's/"dispatch_ms": 0.2,/"dispatch_ms": 0.4,/' "$SRC/data/ane/m4-max.json" > "$WORK/slow.json"
expect_rc 0 "$MILC" --json estimate --model gpt2 --depths 4 --modes 2 --chip "$WORK/slow.json"
expect_json "$OUT" "[r['decode_fixed_ms'] for r in j['rows'] if r['path'] == 'direct'] == [1.2]"
sed 's/"fp16_tflops": 19.0,/"fp16_tflops": "fast",/' "$SRC/data/ane/m4-max.json" > "$WORK/bad.json"
expect_rc 1 "$MILC" estimate --chip "$WORK/bad.json"
expect_in "$ERR" "bad.json: field 'fp16_tflops' must be a number"
expect_rc 1 "$MILC" estimate --chip nosuchchip
expect_in "$ERR" "nosuchchip.json"
printf '{"schema": "milc-ane-chip/1", "chip": "x", "extra": 1}' > "$WORK/unknown.json"
expect_rc 1 "$MILC" estimate --chip "$WORK/unknown.json"
expect_in "$ERR" "unknown field 'extra'"
expect_rc 2 "$MILC" estimate --modes 3
expect_rc 2 "$MILC" estimate --modes 2,2
expect_rc 2 "$MILC" estimate --prompt 0
expect_rc 2 "$MILC" estimate stray
expect_rc 1 "$MILC" estimate --no-such-param 3
expect_rc 0 "$MILC" estimate --help
expect_in "$OUT" "ESTIMATE"

# milc bench --project ane: the same projection after the measurements.
expect_rc 0 "$MILC" bench --quick --modes 2 --no-sweeps --project ane --json "$WORK/p.json"
expect_in "$OUT" "ANE ESTIMATE (projected from published figures, NOT measured)"
expect_json "$(cat "$WORK/p.json")" "j['projection']['estimate'] is True and j['projection']['prompt'] == j['seq'] and
  j['projection']['ctx'] == j['ctx'] and {r['depth'] for r in j['projection']['rows']} == {1, 2} and
  {r['mode'] for r in j['projection']['rows']} == {2}"
expect_rc 0 "$MILC" bench --quick --modes 2 --no-sweeps --json "$WORK/np.json"
expect_json "$(cat "$WORK/np.json")" "j['projection'] is None"
expect_rc 2 "$MILC" bench --quick --project gpu
expect_rc 2 "$MILC" bench --quick --chip m4-max
expect_rc 1 "$MILC" bench --quick --project ane --chip "$WORK/bad.json"
expect_in "$ERR" "fp16_tflops"
