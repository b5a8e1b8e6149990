#!/usr/bin/env bash
# make demo: bring up the local sandbox, run the default game day, write reports/<run>/,
# take the sandbox down again (also on failure or Ctrl-C).
# Usage: scripts/demo.sh [fragile|tuned] [--repeat N]   (N runs of each experiment: what
# `gameday compare` needs to call a tuning change improved with confidence)
# scripts/demo.sh envelope: the breaking points of the fragile and the tuned app (envelopes), compared.
# scripts/demo.sh incidents: the three incidents replayed under a load ramp, fragile then tuned app.
set -euo pipefail
cd "$(dirname "$0")/.."
app="${1:-fragile}"
repeat=()
if [ "${2:-}" = "--repeat" ] && [ -n "${3:-}" ]; then
  repeat=(--repeat "$3")
fi
if [ "$app" = "envelope" ]; then
  exec scripts/demo_envelope.sh
fi
if [ "$app" = "incidents" ]; then
  exec scripts/demo_incidents.sh
fi
GAMEDAY=".venv/bin/gameday"
prefix="${GAMEDAY_SANDBOX_PREFIX:-gd}"  # another prefix runs beside a demo already up
run="gameday-$(date +%Y%m%d-%H%M%S)-$app"
out="reports/$run"
started=$(date +%s)

say() { printf '\n== %s (%d s)\n' "$*" $(( $(date +%s) - started )); }
cleanup() {
  say "sandbox down"
  $GAMEDAY sandbox down --prefix "$prefix" || true
}
trap cleanup EXIT

# a previous demo killed half-way may have left its sandbox: remove it first
$GAMEDAY sandbox down --prefix "$prefix" >/dev/null 2>&1 || true

say "sandbox up ($app app)"
$GAMEDAY sandbox up --prefix "$prefix" --app "$app"

say "default game day: experiments/sandbox/*.json (each waits for a steady system first)"
game_day_started=$(date +%s)
set +e
$GAMEDAY sandbox run --prefix "$prefix" --journal-dir "$out/run" "${repeat[@]}" experiments/sandbox/*.json
verdict=$?
set -e
game_day_s=$(( $(date +%s) - game_day_started ))
if ! compgen -G "$out/run/journal-*.json" >/dev/null; then
  echo "the game day ran no experiment (exit $verdict): see the lines above" >&2
  exit $(( verdict ? verdict : 2 ))
fi

say "report"
$GAMEDAY report "$out/run" -o "$out" --title "Default game day ($app app)"

say "summary (game day ${game_day_s} s)"
.venv/bin/python -m chaos_ext._products.sandbox.summary "$out/run"
echo
echo "report: $out/report.html   summary: $out/summary.md"
echo "game day exit code: $verdict (0 every hypothesis held, 1 some deviated, 2 failed," \
  "4 not steady before a fault: nothing injected there)"
if [ "$verdict" -eq 4 ]; then
  echo "some experiments never saw a steady system, so they injected nothing: is the machine" \
    "very busy? (docs/sandbox.md, 'A busy machine')" >&2
fi
# the fragile app is expected to deviate: the demo itself succeeded if the game day ran
[ "$verdict" -le 1 ] || exit "$verdict"
