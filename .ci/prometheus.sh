#!/usr/bin/env bash
# Start Debian's prometheus on loopback scraping TARGET (host:port) every second.
# Usage: .ci/prometheus.sh HOST:PORT [LISTEN_PORT]   → prints export lines for the e2e tests;
# stop it with: kill "$(cat "$INFMON_PROM_DIR/pid")"
set -euo pipefail
target=${1:?usage: .ci/prometheus.sh HOST:PORT [LISTEN_PORT]}
port=${2:-19090}
dir=$(mktemp -d /tmp/infmon-prom.XXXXXX)
cat >"$dir/prometheus.yml" <<YML
global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: infmon-e2e
    static_configs:
      - targets: ['$target']
YML
prometheus --config.file="$dir/prometheus.yml" --storage.tsdb.path="$dir/data" \
  --web.listen-address="127.0.0.1:$port" --log.level=warn >"$dir/log" 2>&1 &
echo $! >"$dir/pid"
for _ in $(seq 1 100); do
  if curl -fsS "http://127.0.0.1:$port/-/ready" >/dev/null 2>&1; then
    echo "export INFMON_PROM_DIR=$dir"
    echo "export INFMON_TEST_PROMETHEUS_URL=http://127.0.0.1:$port"
    echo "export INFMON_TEST_PROMETHEUS_TARGET=http://$target"
    echo "export INFMON_TEST_PROMETHEUS_JOB=infmon-e2e"
    exit 0
  fi
  sleep 0.2
done
echo "prometheus did not become ready; log: $dir/log" >&2
kill "$(cat "$dir/pid")" 2>/dev/null || true
exit 1
