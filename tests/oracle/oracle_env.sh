# oracle_env.sh — sourced by the oracle shell tests: coremltools on the path,
# or skip (exit 77), except under CI=true, where a missing oracle fails.
export PYTHONPATH=${PYTHONPATH:-/tmp/coreml-oracle/lib}
if ! /usr/bin/python3 -c 'import coremltools' 2>/dev/null; then
  [ "${CI:-}" = true ] && { echo "coremltools not importable (PYTHONPATH=$PYTHONPATH)"; exit 1; }
  echo "skip: the coremltools oracle is not set up"; exit 77
fi
