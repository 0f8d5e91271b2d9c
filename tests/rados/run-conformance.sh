#!/usr/bin/env bash
# conformance.rados: the AbiConformance suite against libtier_rados.so on the fixture cluster,
# one fresh namespace per test ({tmpdir} in namespace_prefix), or a skip (exit 77) with the
# reason when there is no cluster. Usage: run-conformance.sh CLUSTER_DIR TIER_CONFORMANCE PLUGIN
set -euo pipefail
dir=$1 conformance=$2 plugin=$3
shift 3
if [ ! -f "$dir/ready" ]; then
  echo "SKIP: no test cluster in $dir (the ctest fixture RadosCluster.Start brings one up when" \
    "ceph-mon, ceph-mgr, ceph-osd and ceph-common are installed)"
  exit 77
fi
# shellcheck disable=SC1090
. <(grep -E '^(conf|pool|client|keyring)=' "$dir/ready")
exec "$conformance" --tier-plugin "$plugin" --expect full \
  --tier-opt "conf=$conf" --tier-opt "pool=$pool" --tier-opt "client=$client" \
  --tier-opt "keyring=$keyring" --tier-opt capacity_gib=1 --tier-opt op_timeout_s=10 \
  --tier-opt "namespace_prefix={tmpdir}" "$@"
