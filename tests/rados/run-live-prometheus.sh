#!/usr/bin/env bash
# LivePrometheus.rados: the live Prometheus suite (tests/observability) over a tier-host replay
# whose cold tier is the rados provider on the fixture cluster: every dashboard panel and alert
# evaluated, provider="rados". Usage: run-live-prometheus.sh CLUSTER_DIR PROMETHEUS_TESTS PLUGIN
set -euo pipefail
dir=$1 tests=$2 plugin=$3
if [ ! -f "$dir/ready" ]; then
  echo "SKIP: no test cluster in $dir (RadosCluster.Start brings one up when ceph is installed)"
  exit 77
fi
# shellcheck disable=SC1090
. <(grep -E '^(conf|pool|client|keyring)=' "$dir/ready")
TIER_OBS_SERVER_ARGS=$(printf '%s\n' --tier-plugin "$plugin" --tier-opt "conf=$conf" \
  --tier-opt "pool=$pool" --tier-opt "client=$client" --tier-opt "keyring=$keyring" \
  --tier-opt capacity_gib=1 --tier-opt op_timeout_s=10 \
  --tier-opt "namespace_prefix=obs-$$-$RANDOM")
export TIER_OBS_SERVER_ARGS
exec "$tests"
