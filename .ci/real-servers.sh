#!/usr/bin/env bash
# The real-server suite (tests/real, marker real_server): vLLM 0.32 on CPU and `transformers serve`
# with a tiny model built locally. Called by .ci/run after the fast suite, from the repo root, with
# .venv already installed. The first run on a machine builds the cached environment under
# ${INFMON_CACHE_DIR:-~/.cache/infmon} (a few minutes, ~3.5 GB); later runs reuse it.
set -euo pipefail
cd "$(dirname "$0")/.."
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1

start=$(date +%s)
.venv/bin/python scripts/real_servers.py setup
echo "real servers: setup took $(( $(date +%s) - start ))s (cached env reused when present)"

start=$(date +%s)
status=0
.venv/bin/python -m pytest -m 'real_server and not unmet' tests/real -p no:cacheprovider -s -q || status=$?
echo "real servers: suite took $(( $(date +%s) - start ))s"
exit $status
