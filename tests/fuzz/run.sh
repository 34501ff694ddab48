#!/usr/bin/env bash
# Run every libFuzzer target for SECONDS each: tests/fuzz/run.sh BUILD_DIR [SECONDS]
# BUILD_DIR is a -DMILC_FUZZ=ON build.  Findings are written to BUILD_DIR/fuzz-findings/
# and fail the run; turn each into a regression input under tests/fuzz/corpus/NAME/.
set -euo pipefail
build=${1:?usage: run.sh BUILD_DIR [SECONDS]}
secs=${2:-60}
here=$(cd "$(dirname "$0")" && pwd)
out="$build/fuzz-findings"
mkdir -p "$out"
status=0
for bin in "$build"/tests/fuzz/fuzz_*; do
  [ -x "$bin" ] || continue
  name=$(basename "$bin"); short=${name#fuzz_}
  work="$build/fuzz-corpus/$short"; mkdir -p "$work"
  seeds=(); [ -d "$here/corpus/$short" ] && seeds=("$here/corpus/$short")
  dict=(); [ -f "$here/$short.dict" ] && dict=(-dict="$here/$short.dict")
  echo "--- $name: ${secs}s"
  if ! "$bin" "${dict[@]}" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 \
       -artifact_prefix="$out/$name-" -print_final_stats=1 "$work" "${seeds[@]}" \
       > "$out/$name.log" 2>&1; then
    echo "FINDING in $name (see $out/$name.log)"; tail -40 "$out/$name.log"; status=1
  else
    grep -E 'stat::number_of_executed_units|Done [0-9]+ runs' "$out/$name.log" | tail -2
  fi
done
exit $status
