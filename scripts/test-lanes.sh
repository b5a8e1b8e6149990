#!/usr/bin/env bash
# The whole test suite as two pytest sessions at once, one per core:
#   lane "sandbox": tests/sandbox, tests/crash and the verdict truth table (long runs that
#                   mostly wait on real servers, timers and child processes);
#   lane "main":    everything else, the qemu VM lane included (it starts in the background).
# A serial session keeps one core busy most of the time: the CLI runs, servers and
# experiments it waits on rarely fill the second. Each lane has its own pytest temp
# folder (and so its own ledger markers); every test already uses its own ledger, ports,
# network namespaces and servers. Exit status: non-zero if either lane failed.
# The sandbox lane's output goes to reports/test-lane-sandbox.log and is shown at the end.
#   LANES=2 scripts/test-lanes.sh      the two lanes (opt-in, see below)
#   scripts/test-lanes.sh              one serial session of everything (the default)
#   scripts/test-lanes.sh ARGS...      one serial session: pytest ARGS (e.g. a folder, -x)
# The orphan scan is machine-wide by design, so while a test of one lane leaves an orphan or
# a damaged ledger on purpose, a `gameday rollback` of the other lane names it and exits 2
# (seen in the crash matrix's dns-rate-limit cells). Those tests carry the `orphans` marker:
# both lanes deselect them, and they run alone after both lanes have ended.
# Not the default: the last serial CI ran 49:44 of tests on 2 cores (over the 45-minute goal);
# the two lanes' CIs of 2026-12-06 took 35:22-35:46, but 1 of 3 failed: a `gameday rollback`
# in the main lane (tests/dns/test_dns_rate_limit.py, after a SIGKILLed run) named a
# `_tcp_holder` helper of the sandbox lane as an orphan and exited 2. Until a session's orphan
# scan cannot see another session's live helpers, two lanes stay opt-in. The abort-during-control-setup defect the first
# measured LANES=2 run found is fixed (tests/prometheus/test_abort_outside_run_loop.py).
set -uo pipefail
cd "$(dirname "$0")/.."
PY="${PY:-.venv/bin/python}"
if [ "${LANES:-1}" != "2" ] || [ $# -gt 0 ]; then
  exec "$PY" -m pytest "$@"
fi
SANDBOX_LANE=(tests/sandbox tests/crash tests/test_truth_table.py)
ignores=()
for path in "${SANDBOX_LANE[@]}"; do ignores+=("--ignore=$path"); done
base=$(mktemp -d /tmp/gameday-lanes.XXXXXX)
mkdir -p reports
log=reports/test-lane-sandbox.log
started=$(date +%s)
# -m replaces pyproject's addopts -m, so both deselections are spelled here
LANE_MARKS="not mutation and not orphans"
"$PY" -m pytest -p no:cacheprovider --basetemp="$base/sandbox" -m "$LANE_MARKS" "${SANDBOX_LANE[@]}" >"$log" 2>&1 &
sandbox_pid=$!
# a CI that is killed must not leave the other lane running
trap 'kill "$sandbox_pid" 2>/dev/null' EXIT
echo "lane sandbox: ${SANDBOX_LANE[*]} (pid $sandbox_pid, output: $log)"
echo "lane main: the rest of tests/"
"$PY" -m pytest --basetemp="$base/main" -m "$LANE_MARKS" "${ignores[@]}"
main_status=$?
echo "lane main: exit $main_status after $(( $(date +%s) - started )) s"
while kill -0 "$sandbox_pid" 2>/dev/null; do
  sleep 30
  kill -0 "$sandbox_pid" 2>/dev/null &&
    echo "  ... lane sandbox still running ($(( $(date +%s) - started )) s): $(tail -c 200 "$log" | tr -d '\n' | tail -c 80)"
done
wait "$sandbox_pid"
sandbox_status=$?
trap - EXIT
echo "== lane sandbox: exit $sandbox_status after $(( $(date +%s) - started )) s; its output:"
cat "$log"
echo "== the tests that leave an orphan on purpose, alone (-m orphans)"
"$PY" -m pytest --basetemp="$base/orphans" -m "orphans and not mutation" tests
orphans_status=$?
if [ "$main_status" -ne 0 ] || [ "$sandbox_status" -ne 0 ] || [ "$orphans_status" -ne 0 ]; then
  echo "FAILED: lane main exit $main_status, lane sandbox exit $sandbox_status, orphans exit $orphans_status"
  exit 1
fi
rm -rf "$base"  # kept when a lane failed: its tests' temporary folders
echo "both lanes passed in $(( $(date +%s) - started )) s"
