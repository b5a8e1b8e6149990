#!/usr/bin/env bash
# make demo: bring up the local sandbox, run the default game day, write reports/<run>/,
# take the sandbox down again (also on failure or Ctrl-C). Usage: scripts/demo.sh [fragile|tuned]
set -euo pipefail
cd "$(dirname "$0")/.."
app="${1:-fragile}"
GAMEDAY=".venv/bin/gameday"
prefix="gd"
run="gameday-$(date +%Y%m%d-%H%M%S)-$app"
out="reports/$run"
started=$(date +%s)

say() { printf '\n== %s\n' "$*"; }
cleanup() {
  say "sandbox down"
  $GAMEDAY sandbox down --prefix "$prefix" || true
}
trap cleanup EXIT

# a previous demo killed half-way may have left its sandbox: remove it first
$GAMEDAY sandbox down --prefix "$prefix" >/dev/null 2>&1 || true

say "sandbox up ($app app)"
$GAMEDAY sandbox up --prefix "$prefix" --app "$app"
say "baseline: 15 s more of clean traffic"
sleep 15

say "default game day: experiments/sandbox/*.json"
set +e
$GAMEDAY sandbox run --prefix "$prefix" --journal-dir "$out/run" experiments/sandbox/*.json
verdict=$?
set -e

say "report"
$GAMEDAY report "$out/run" -o "$out" --title "Default game day ($app app)"

say "summary ($(( $(date +%s) - started )) s)"
.venv/bin/python -m chaos_ext.sandbox.summary "$out/run"
echo
echo "report: $out/report.html   summary: $out/summary.md"
echo "game day exit code: $verdict (0 every hypothesis held, 1 some deviated, 2 failed)"
# the fragile app is expected to deviate: the demo itself succeeded if the game day ran
[ "$verdict" -le 1 ]
