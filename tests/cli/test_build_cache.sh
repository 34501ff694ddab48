# milc build against a real cache: miss then direct hit, keys that change
# with parameters and mode, cache maintenance, bundles, damage.
B=("$MILC" build --model tiny --json)
key_of() { printf '%s' "$1" | "$PY" -c "import json,sys; print(json.load(sys.stdin)['builds'][0]['key'])"; }
outcome_of() { printf '%s' "$1" | "$PY" -c "import json,sys; print(json.load(sys.stdin)['builds'][0]['outcome'])"; }

# a request that cannot be built leaves no cache behind where there was none
expect_rc 1 "${B[@]}" --layers 0
expect_in "$OUT" '--layers: 0 is outside 1..1000'
if [ -e "$MILC_CACHE_DIR" ]; then fail "a failed build created $MILC_CACHE_DIR"; else ok; fi
expect_rc 1 "$MILC" build --model tiny --no-such-param 3
expect_in "$ERR" "has no parameter 'no-such-param'"
if [ -e "$MILC_CACHE_DIR" ]; then fail "a failed build created $MILC_CACHE_DIR"; else ok; fi

expect_rc 0 "${B[@]}" --mode 2
k2=$(key_of "$OUT"); expect_eq "$(outcome_of "$OUT")" miss
expect_rc 0 "${B[@]}" --mode 2
expect_eq "$(outcome_of "$OUT")" direct_hit
expect_eq "$(key_of "$OUT")" "$k2"
expect_json "$OUT" "j['builds'][0]['artifact_bytes'] > 0 and j['builds'][0]['ms']['total'] > 0"
# The mode is part of the key.
expect_rc 0 "${B[@]}" --mode 1
k1=$(key_of "$OUT"); expect_eq "$(outcome_of "$OUT")" miss
if [ "$k1" != "$k2" ]; then ok; else fail "mode 1 and mode 2 share a key"; fi
# A changed parameter misses; changing it back hits.
expect_rc 0 "${B[@]}" --mode 2 --seq 16
expect_eq "$(outcome_of "$OUT")" miss
expect_rc 0 "${B[@]}" --mode 2 --weights random:7
expect_eq "$(outcome_of "$OUT")" miss
expect_rc 0 "${B[@]}" --mode 2
expect_eq "$(outcome_of "$OUT")" direct_hit
# A hit is checksummed unless it passed before and nothing but milc has
# written the cache file since; --verify always checksums, --no-verify never.
expect_rc 0 "${B[@]}" --mode 2
expect_json "$OUT" "j['builds'][0]['checksummed'] == False"
expect_rc 0 "${B[@]}" --mode 2 --verify
expect_json "$OUT" "j['builds'][0]['checksummed'] == True and j['builds'][0]['outcome'] == 'direct_hit'"
expect_rc 0 "${B[@]}" --mode 2 --no-verify
expect_json "$OUT" "j['builds'][0]['checksummed'] == False"
expect_rc 2 "${B[@]}" --verify --no-verify
expect_in "$ERR" "--verify, --verify-once and --no-verify exclude each other"
# Another program writes into data.mdb (a byte of nothing milc reads): every
# entry is checksummed again, once.
"$PY" -c "
import os
p='$MILC_CACHE_DIR/data.mdb'; f=open(p,'r+b'); f.seek(os.path.getsize(p) - 1); b=f.read(1); f.seek(os.path.getsize(p) - 1); f.write(b); f.close()"
expect_rc 0 "${B[@]}" --mode 2
expect_json "$OUT" "j['builds'][0]['checksummed'] == True and j['builds'][0]['outcome'] == 'direct_hit'"
expect_rc 0 "${B[@]}" --mode 2
expect_json "$OUT" "j['builds'][0]['checksummed'] == False"
# Human output names the outcome and the timing breakdown.
expect_rc 0 "$MILC" build --model tiny --mode 0
expect_in "$OUT" "miss"
expect_in "$OUT" "parse+check"
expect_rc 0 "$MILC" build --model tiny --mode 0
expect_in "$OUT" "hit (direct)"
# Whole model in chunks, parameter lists.
expect_rc 0 "$MILC" build --model tiny --chunk 1 --seq 16,32 --json
expect_json "$OUT" "len(j['builds']) == 4"
# Overlap: one program stored while the next is made (-j 2, the default on 2+
# CPUs) gives -j 1's keys in -j 1's order, and a hit among the misses keeps
# its place; every entry stored passes a full verify.
keys_of() { printf '%s' "$1" | "$PY" -c "import json,sys; print(' '.join(b['key'] + ':' + b['outcome'] for b in json.load(sys.stdin)['builds']))"; }
expect_rc 0 "$MILC" --cache-dir "$WORK/ov1" build --model tiny --chunk 1 --mode 0,2 --json -j 1
ov1=$(keys_of "$OUT")
expect_rc 0 "$MILC" --cache-dir "$WORK/ov2" build --model tiny --layers 1 --first_layer 1 --mode 2 --json
mid=$(key_of "$OUT")
expect_rc 0 "$MILC" --cache-dir "$WORK/ov2" build --model tiny --chunk 1 --mode 0,2 --json -j 2
expect_eq "$(keys_of "$OUT")" "$(printf '%s' "$ov1" | sed "s/$mid:miss/$mid:direct_hit/")"
expect_in "$(keys_of "$OUT")" "$mid:direct_hit"
expect_rc 0 "$MILC" --cache-dir "$WORK/ov2" cache verify
expect_rc 2 "$MILC" build --model tiny -j 3

# cache ls / stat / show / verify.
expect_rc 0 "$MILC" cache ls --json
expect_json "$OUT" "len(j) >= 6 and all(e['bytes'] > 0 for e in j)"
expect_rc 0 "$MILC" cache stat --json
expect_json "$OUT" "j['direct_hits'] >= 3 and j['misses'] >= 4 and j['entries'] >= 6"
expect_rc 0 "$MILC" cache show "$k2"
expect_in "$OUT" "MODE"
expect_in "$OUT" "MIL "
expect_rc 0 "$MILC" cache verify
expect_rc 2 "$MILC" cache show not-a-key
expect_rc 1 "$MILC" cache show 00000000000000000000000000000000

# Run a cached artifact by key.
"$PY" -c "import numpy as np; np.save('x.npy', (np.random.RandomState(0).randn(1,128,1,32)*0.5).astype(np.float16))"
expect_rc 0 "$MILC" run "$k2" --input x=x.npy -o out2
if [ -s out2/y.npy ]; then ok; else fail "run by key wrote no y.npy"; fi
# Run with build options: the same chunk, found in the cache, the same outputs.
expect_rc 0 "$MILC" run --model tiny --mode 2 --input x=x.npy -o out3
if cmp -s out2/y.npy out3/y.npy; then ok; else fail "run by build options differs from run by key"; fi
expect_rc 2 "$MILC" run "$k2" --model tiny --input x=x.npy
expect_rc 2 "$MILC" run --model tiny --seq 16,32 --input x=x.npy

# Export, clear, import: the same entries come back and hit.
expect_rc 0 "$MILC" cache export "$WORK/all.bundle"
n_before=$("$MILC" cache ls --json | "$PY" -c "import json,sys; print(len(json.load(sys.stdin)))")
expect_rc 0 "$MILC" cache clear
expect_rc 0 "$MILC" cache ls --json
expect_json "$OUT" "len(j) == 0"
# A tampered bundle is rejected and leaves the cache untouched.
cp "$WORK/all.bundle" "$WORK/bad.bundle"
"$PY" -c "
import sys; p='$WORK/bad.bundle'; b=bytearray(open(p,'rb').read()); b[len(b)//2] ^= 0x40; open(p,'wb').write(b)"
expect_rc 1 "$MILC" cache import "$WORK/bad.bundle"
expect_rc 0 "$MILC" cache ls --json
expect_json "$OUT" "len(j) == 0"
head -c 1000 "$WORK/all.bundle" > "$WORK/short.bundle"
expect_rc 1 "$MILC" cache import "$WORK/short.bundle"
expect_rc 0 "$MILC" cache import "$WORK/all.bundle"
expect_rc 0 "$MILC" cache ls --json
expect_json "$OUT" "len(j) == $n_before"
expect_rc 0 "${B[@]}" --mode 2
expect_in "$(outcome_of "$OUT")" "_hit"
expect_rc 0 "${B[@]}" --mode 2
expect_eq "$(outcome_of "$OUT")" direct_hit

# rm and gc.
expect_rc 0 "$MILC" cache rm "$k1"
expect_rc 1 "$MILC" cache rm "$k1"
expect_rc 0 "$MILC" cache gc --max-size 1 --json
expect_json "$OUT" "j['evicted'] >= 1"
expect_rc 0 "$MILC" cache ls --json
expect_json "$OUT" "len(j) == 0"

# A damaged environment file: a clear error naming the file and the cure.
expect_rc 0 "${B[@]}" --mode 2
"$PY" -c "
p='$MILC_CACHE_DIR/data.mdb'; b=bytearray(open(p,'rb').read()); b[0:4096]=b'\xff'*4096; open(p,'wb').write(b)"
expect_rc 3 "$MILC" cache ls
expect_in "$ERR" "data.mdb"
expect_in "$ERR" "milc cache clear"
expect_rc 0 "$MILC" cache clear
expect_rc 0 "${B[@]}" --mode 2
expect_eq "$(outcome_of "$OUT")" miss

# The request note: a repeated request finds its keys without reading a
# template, but only while every template file of the path is unchanged.  A
# comment changes no program: after one, the request and its direct key miss
# and the full key (the generated MIL) hits.  (Built-in names win over a
# user directory's, so the test's template and block have names of their own.)
mkdir -p "$WORK/tpl/myblocks"
sed 's#blocks/layernorm#myblocks/layernorm#' "$SRC/mil-templates/gpt2.xml" > "$WORK/tpl/mygpt.xml"
cp "$SRC/mil-templates/blocks/layernorm.xml" "$WORK/tpl/myblocks/layernorm.xml"
T=("$MILC" build --template-dir "$WORK/tpl" --template mygpt --model_layers 2 --layers 2 --dim 128 --heads 4 --ffn 256 --seq 32
   --chunk 1 --json)
expect_rc 0 "${T[@]}"
expect_json "$OUT" "[b['outcome'] for b in j['builds']] == ['miss'] * 2"
expect_rc 0 "${T[@]}"
expect_json "$OUT" "[(b['outcome'], b['note']) for b in j['builds']] == [('direct_hit', True)] * 2"
printf '<!-- a comment -->\n' >> "$WORK/tpl/mygpt.xml"
# A full-key hit is found before the compile, with one program stored while
# the next is made (-j 2) as without (-j 1): nothing is checked or lowered.
NOCOMPILE="all(b['ms']['check'] == 0 and b['ms']['lower'] == 0 for b in j['builds'])"
expect_rc 0 "${T[@]}" -j 2
expect_json "$OUT" "[b['outcome'] for b in j['builds']] == ['full_hit'] * 2 and $NOCOMPILE"
expect_rc 0 "${T[@]}"
expect_json "$OUT" "[b['outcome'] for b in j['builds']] == ['direct_hit'] * 2"
printf '<!-- a comment -->\n' >> "$WORK/tpl/myblocks/layernorm.xml"
expect_rc 0 "${T[@]}" -j 1
expect_json "$OUT" "[b['outcome'] for b in j['builds']] == ['full_hit'] * 2 and $NOCOMPILE"
# A new file in a template directory is a change of the path too; the
# direct keys still find the programs.
printf '<template/>\n' > "$WORK/tpl/other.xml"
expect_rc 0 "${T[@]}"
expect_json "$OUT" "[(b['outcome'], b['note']) for b in j['builds']] == [('direct_hit', False)] * 2"
expect_rc 0 "${T[@]}"
expect_json "$OUT" "[(b['outcome'], b['note']) for b in j['builds']] == [('direct_hit', True)] * 2"
# Entries gone behind the note's back: its keys miss and the request is
# built again the ordinary way.
expect_rc 0 "$MILC" cache clear
expect_rc 0 "${T[@]}"
expect_json "$OUT" "[b['outcome'] for b in j['builds']] == ['miss'] * 2"

# A section larger than the cache's 64 MiB values (the token table of a
# 140,000-token vocabulary, 71.7 MB in fp32) is stored in one value of its
# own, so a hit maps it rather than copying it (cache/README.md, "Chunks");
# the entry checks and the embedding runs from the hit.
W=(build --model tiny --chunk 2 --whole --vocab 140000 --json)
expect_rc 0 "$MILC" "${W[@]}"
expect_json "$OUT" "[b['chunk'] for b in j['builds']] == ['embed', 'layers 0-1', 'head'] and j['builds'][0]['artifact_bytes'] > 64 << 20"
expect_rc 0 "$MILC" "${W[@]}"
expect_json "$OUT" "[b['outcome'] for b in j['builds']] == ['direct_hit'] * 3"
expect_rc 0 "$MILC" cache ls --json
expect_json "$OUT" "[e['copied_sections'] for e in j if e['bytes'] > 64 << 20] == [0] and all(e['copied_sections'] == 0 for e in j)"
expect_rc 0 "$MILC" cache verify
"$PY" -c "
import numpy as np
np.save('big_ids.npy', np.array([[0, 139999, 70000, 5]], np.int32)); np.save('big_pos.npy', np.arange(4, dtype=np.int32)[None])"
expect_rc 0 "$MILC" run --model tiny --part embed --vocab 140000 --seq 4 --min-seq 1 --input input_ids=big_ids.npy \
  --input position_ids=big_pos.npy -o big_out
