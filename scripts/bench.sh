#!/usr/bin/env bash
# Run every benchmark (benchmarks/*.py) one after the other and print each one's
# last line, its figures. Full output: reports/bench/<name>.log. A benchmark that
# cannot run (a peer missing: its last line names the package) or fails is said
# so in one line; the others still run. Exit status: 1 if any did not finish.
#   scripts/bench.sh [NAME...]     e.g. scripts/bench.sh cli report k8s
set -uo pipefail
cd "$(dirname "$0")/.."
PY="${PY:-.venv/bin/python}"
logs=reports/bench
mkdir -p "$logs"
if [ $# -gt 0 ]; then names=("$@"); else
  names=()
  for f in benchmarks/[!_]*.py; do names+=("$(basename "$f" .py)"); done
fi
failed=0
for name in "${names[@]}"; do
  log="$logs/$name.log"
  echo "== benchmarks/$name.py (log: $log)"
  PYTHONPATH="$PWD" timeout "${BENCH_TIMEOUT:-1800}" "$PY" "benchmarks/$name.py" >"$log" 2>&1
  status=$?
  last=$(grep -v '^[[:space:]]*$' "$log" | tail -n 1)
  if [ "$status" -eq 0 ]; then
    echo "$last"
  else
    failed=1
    [ "$status" -eq 124 ] && last="timed out after ${BENCH_TIMEOUT:-1800} s"
    # a traceback's last line is the exception; a missing peer's is its one-line reason
    echo "$name: did not finish (exit $status): $last"
  fi
done
exit "$failed"
