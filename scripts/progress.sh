#!/usr/bin/env bash
# Run a long command and never leave the terminal silent for more than ~8 s:
# its own output passes through; when it prints nothing for 8 s, a line says
# what is still running and for how long. Exit status: the command's.
#   scripts/progress.sh "installing Python packages" pip install ...
set -uo pipefail
label="$1"
shift
start=$(date +%s)
quiet_s="${PROGRESS_EVERY:-8}"
"$@" 2>&1 | while true; do
  if IFS= read -r -t "$quiet_s" line; then
    printf '%s\n' "$line"
  elif [ $? -gt 128 ]; then
    [ -n "${line:-}" ] && printf '%s\n' "$line"  # a partial line read before the timeout
    printf '  ... %s (%d s)\n' "$label" $(( $(date +%s) - start ))
  else
    [ -n "${line:-}" ] && printf '%s\n' "$line"
    break
  fi
done
status=${PIPESTATUS[0]}
exit "$status"
