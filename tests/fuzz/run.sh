#!/usr/bin/env bash
# Run every libFuzzer target for SECONDS each: tests/fuzz/run.sh BUILD_DIR [SECONDS] [TARGET...]
# BUILD_DIR is a -DMILC_FUZZ=ON build; TARGETs (e.g. "npy mil") pick a subset.
# Without TARGETs, targets listed in known-open.txt (open, routed findings) are skipped.
# The grown corpus is kept in BUILD_DIR/fuzz-corpus/NAME (reused by the next
# run); findings are written to BUILD_DIR/fuzz-findings/ and fail the run:
# turn each into a regression input under tests/fuzz/corpus/NAME/ (ctest
# replays those through replay_main.c) plus a fix.
# A summary line per target (executions, seconds, findings) goes to
# BUILD_DIR/fuzz-findings/summary.txt for the README's Reliability section's table.
set -euo pipefail
build=${1:?usage: run.sh BUILD_DIR [SECONDS] [TARGET...]}
secs=${2:-60}
shift $(( $# >= 2 ? 2 : $# ))
here=$(cd "$(dirname "$0")" && pwd)
out="$build/fuzz-findings"
mkdir -p "$out"
status=0
for bin in "$build"/tests/fuzz/fuzz_*; do
  [ -x "$bin" ] || continue
  name=$(basename "$bin"); short=${name#fuzz_}
  if [ $# -gt 0 ]; then
    want=" $* "; [[ "$want" == *" $short "* ]] || continue   # no `| grep -q` under pipefail
  elif grep -q "^$short " "$here/known-open.txt" 2> /dev/null; then
    echo "--- $name: skipped (open finding, see tests/fuzz/known-open.txt)"; continue
  fi
  work="$build/fuzz-corpus/$short"; mkdir -p "$work"
  seeds=(); [ -d "$here/corpus/$short" ] && seeds=("$here/corpus/$short")
  # The back end starts from the front end's programs (and its dictionary).
  [ "$short" = compile ] && seeds+=("$here/corpus/mil")
  # Artifacts are compiled fresh by this build's milc (seed_artifacts.sh).
  if [ "$short" = artifact ] && [ -x "$build/cli/milc" ]; then
    "$here/seed_artifacts.sh" "$build/cli/milc" "$build/fuzz-seeds/artifact" && seeds+=("$build/fuzz-seeds/artifact")
  fi
  dict=(); [ -f "$here/$short.dict" ] && dict=(-dict="$here/$short.dict")
  [ "$short" = compile ] && dict=(-dict="$here/mil.dict")
  echo "--- $name: ${secs}s"
  # Leaks count as findings (ASan's leak check runs at exit of each input set).
  if ! ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1} "$bin" "${dict[@]}" -max_total_time="$secs" -timeout=10 \
       -rss_limit_mb=2048 -artifact_prefix="$out/$name-" -print_final_stats=1 "$work" "${seeds[@]}" \
       > "$out/$name.log" 2>&1; then
    echo "FINDING in $name (see $out/$name.log)"; tail -40 "$out/$name.log"; status=1
    echo "$short $(date -u +%FT%TZ) secs=$secs FINDING" >> "$out/summary.txt"
  else
    runs=$(grep -oE 'stat::number_of_executed_units: *[0-9]+' "$out/$name.log" | grep -oE '[0-9]+$' || echo 0)
    cov=$(grep -oE 'cov: [0-9]+ ft: [0-9]+' "$out/$name.log" | tail -1)
    echo "$name: $runs executions in ${secs}s; $cov; no finding"
    echo "$short $(date -u +%FT%TZ) secs=$secs runs=$runs $cov findings=0" >> "$out/summary.txt"
  fi
done
exit $status
