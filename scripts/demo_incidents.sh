#!/usr/bin/env bash
# scripts/demo.sh incidents: replay the three incidents of experiments/incidents/ (faults acting
# together under an open-loop load ramp) against the fragile app, then the tuned app; write one
# report of both, `gameday compare` them, and print each incident's figures and the line
# `incidents eks_break_fragile_rps=... latency_amplification=...`. The sandbox is taken down
# between the apps and at the end (also on failure or Ctrl-C). About 12-15 minutes on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
GAMEDAY="${GAMEDAY:-.venv/bin/gameday}"
PYTHON="${PYTHON:-.venv/bin/python}"
prefix="${GAMEDAY_SANDBOX_PREFIX:-gd}"  # another prefix runs beside a default sandbox
out="${INCIDENTS_OUT:-reports/incidents-$(date +%Y%m%d-%H%M%S)}"
started=$(date +%s)
worst=0

say() { printf '\n== %s (%d s)\n' "$*" $(( $(date +%s) - started )); }
cleanup() {
  say "sandbox down"
  $GAMEDAY sandbox down --prefix "$prefix" || true
}
trap cleanup EXIT

$GAMEDAY sandbox down --prefix "$prefix" >/dev/null 2>&1 || true
for app in fragile tuned; do
  say "sandbox up ($app app)"
  $GAMEDAY sandbox up --prefix "$prefix" --app "$app"
  say "incident replays ($app app): experiments/incidents/*.json"
  set +e
  $GAMEDAY sandbox run --prefix "$prefix" --journal-dir "$out/$app/run" experiments/incidents/*.json
  code=$?
  set -e
  # 0 held, 1 deviated (expected of the fragile app); 2 failed, 3 invalid, 4 never steady
  if [ "$code" -gt 1 ] && [ "$code" -gt "$worst" ]; then worst=$code; fi
  $GAMEDAY sandbox down --prefix "$prefix"
done

say "report and comparison"
$GAMEDAY report "$out/fragile/run" "$out/tuned/run" -o "$out" \
  --title "Incident replays: fragile app, then tuned app"
$GAMEDAY compare "$out/fragile/run" "$out/tuned/run" -o "$out/comparison" \
  --better app-p95-latency-over-time=lower --better app-error-ratio-over-time=lower || true
say "figures (docs/incidents.md)"
$PYTHON -m chaos_ext._products.report.incident_compare "$out/fragile/run" "$out/tuned/run" || worst=$(( worst > 1 ? worst : 1 ))
echo
echo "report: $out/report.html   comparison: $out/comparison/"
exit "$worst"
