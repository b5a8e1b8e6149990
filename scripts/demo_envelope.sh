#!/usr/bin/env bash
# scripts/demo.sh envelope: for the fragile app, then the tuned app, find the breaking point of
# every experiment in experiments/sandbox/envelope/ (gameday envelope inside the sandbox), then
# say how tuning moved each one (gameday compare) and draw them (gameday report). The sandbox is
# taken down between the apps and at the end (also on failure or Ctrl-C). About 25-35 minutes on
# 2 cores: each envelope is 3 to 16 whole runs (inject, judge, roll back, settle).
set -euo pipefail
cd "$(dirname "$0")/.."
GAMEDAY=".venv/bin/gameday"
prefix="${GAMEDAY_SANDBOX_PREFIX:-gd}"  # another prefix runs beside a default sandbox
out="reports/envelope-$(date +%Y%m%d-%H%M%S)"
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
  for experiment in experiments/sandbox/envelope/*.json; do
    name="$(basename "$experiment" .json)"
    say "envelope of $name ($app app)"
    set +e
    $GAMEDAY sandbox envelope --prefix "$prefix" --label "$app" -o "$out/$app/$name" "$experiment"
    code=$?
    set -e
    # 0 an answer, 1 noisy (listed, still an answer); 2 incomplete, 3 invalid, 4 never steady
    if [ "$code" -gt 1 ] && [ "$code" -gt "$worst" ]; then worst=$code; fi
  done
  $GAMEDAY sandbox down --prefix "$prefix"
done

say "how tuning moved each breaking point"
$GAMEDAY compare "$out/fragile" "$out/tuned" -o "$out/comparison" || worst=$?
say "report"
$GAMEDAY report "$out/fragile" "$out/tuned" -o "$out" --title "Resilience envelopes: fragile vs tuned"
.venv/bin/python -m chaos_ext._products.envelope.sandbox_check "$out/fragile/dns-tcp-connections" || worst=1
echo
echo "report: $out/report.html   comparison: $out/comparison/envelope-comparison.html"
exit "$worst"
