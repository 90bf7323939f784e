#!/usr/bin/env bash
# Shows that each of .ci/guards' checks fails on a deliberate violation: for each, a fresh
# copy of the committed tree gets one bad change and .ci/guards must exit non-zero.
# Usage: scripts/guards_demo.sh   (from a checkout with the README's set-up done)
set -uo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
venv=$repo/.venv
declare -A bad=(
  [ruff-check]='infmon/model/records.py|import os  # unused'
  [ruff-format]='infmon/model/records.py|x = {  "a":1 }'
  [mypy]='infmon/model/records.py|y: int = "not an int"'
  [lint-imports]='infmon/model/records.py|import infmon.load.client  # model must not import load'
)
status=0
for check in ruff-check ruff-format mypy lint-imports; do
  tmp=$(mktemp -d)
  git -C "$repo" archive HEAD | tar -x -C "$tmp"
  file=${bad[$check]%%|*}
  line=${bad[$check]#*|}
  printf '\n%s\n' "$line" >>"$tmp/$file"
  if "$tmp/.ci/guards" "$venv" >"$tmp/out" 2>&1; then
    echo "FAIL: $check: the guards passed with: $line"
    status=1
  else
    echo "ok: $check violation fails the guards ($(grep -m1 '^guard:' "$tmp/out" >/dev/null; grep '^guard:' "$tmp/out" | tail -1))"
  fi
  rm -rf "$tmp"
done
exit $status
