#!/usr/bin/env bash
# make demo: the main job. Runs the default game day and writes reports/<run>/.
set -euo pipefail
cd "$(dirname "$0")/.."
GAMEDAY=.venv/bin/gameday
run="demo-$(date +%Y%m%d-%H%M%S)"
out="reports/$run"
mkdir -p "$out"

echo "== gameday demo: $run"
echo "NOTE: the local sandbox (app, db, dns, Prometheus in network namespaces) and its"
echo "      default game day are not built yet; this demo runs what exists today:"
echo "      validation of every experiment, then the ledger pre-flight experiment."
$GAMEDAY validate experiments/*.json
$GAMEDAY run --journal-dir "$out" experiments/ledger-clean.json
echo "== journals written to $out/"
