#!/usr/bin/env bash
# Shows that each of .ci/guards' checks fails on a deliberate violation: for each, a fresh
# copy of the committed tree gets one bad change and .ci/guards must exit non-zero.
# Usage: scripts/guards_demo.sh   (from a checkout with the README's set-up done)
set -uo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
venv=$repo/.venv
# Each violation passes the guards before its own (so the guard named is the one that fails).
declare -A bad=(
  [ruff-check]='import os  # unused'
  [ruff-format]='x = {  "a":1 }'
  [mypy]='y: int = "not an int"'
  [lint-imports]=$'def _violation() -> None:\n    import infmon.load.client  # noqa: F401  (model must not import load)'
  [any-count]=$'def any_more(x: Any) -> Any:  # one more Any in model\n    return x'
  [vulture]=$'def _never_called() -> None:  # dead code\n    return None'
)
declare -A guard=([ruff-check]='ruff check' [ruff-format]='ruff format --check' [mypy]='mypy'
  [lint-imports]='lint-imports' [any-count]='Any per package' [vulture]='vulture')
declare -A where=([any-count]=infmon/model/steps/evidence.py)  # a module that imports Any already
status=0
for check in ruff-check ruff-format mypy lint-imports any-count vulture; do
  file=${where[$check]:-infmon/model/records/request.py}
  tmp=$(mktemp -d)
  git -C "$repo" archive HEAD | tar -x -C "$tmp"
  printf '\n\n%s\n' "${bad[$check]}" >>"$tmp/$file"
  if "$tmp/.ci/guards" "$venv" >"$tmp/out" 2>&1; then
    echo "FAIL: $check: the guards passed"
    status=1
  else
    failed=$(grep '^guard:' "$tmp/out" | tail -1)
    case "$failed" in
      "guard: ${guard[$check]}"*) echo "ok: a $check violation fails the guards at: $failed" ;;
      *) echo "FAIL: $check: an earlier guard failed first: $failed"; status=1 ;;
    esac
  fi
  rm -rf "$tmp"
done
exit $status
