#!/usr/bin/env bash
# Installs the Debian 12 packages the build and the tests need, when missing. As root it runs
# apt-get; otherwise it prints the exact command to run and fails.
set -euo pipefail
packages=(
  cmake ninja-build g++ pkg-config binutils        # toolchain (nm checks plugin exports)
  liburing-dev libzstd-dev libxxhash-dev           # disk provider: io_uring, zstd, xxh3
  prometheus-cpp-dev nlohmann-json3-dev libcli11-dev  # host: metrics, JSON, command line
  libgtest-dev libbenchmark-dev                    # tests and microbenchmarks
  prometheus                                       # tests/observability: prometheus, promtool (own loopback ports; the packaged service is not used)
  clang libclang-rt-14-dev clang-format            # tests/run-fuzz.sh: libFuzzer; Style.ClangFormatClean
  e2fsprogs mount                                  # FullFilesystem: a full ext4 loop image
  libfuse3-dev fuse3                               # tests/powerloss: the fault-injecting FUSE filesystem (libfuse3; fuse3 brings fusermount3 and /etc/fuse.conf); no packaged tool models power loss (LazyFS is not in Debian 12)
  librados-dev                                     # plugins/rados: the shared cold tier on Ceph RADOS
  libzmq3-dev libmsgpack-dev                       # host: KV events (ZeroMQ PUB/ROUTER, msgpack-c's packer)
  python3-zmq python3-msgpack                      # tests/host: the KV-event subscriber written from vLLM's format
  libssl-dev                                       # plugins/rados: keyed seals and tags; host: encryption at rest (AES-256-GCM, HKDF)
  ceph-mon ceph-mgr ceph-osd ceph-common           # tests/ceph/ceph-cluster.sh: the single-node test cluster (no systemd unit is used)
)
missing=()
for p in "${packages[@]}"; do
  [[ "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null)" == *'install ok installed'* ]] || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -ne 0 ]; then
  echo "missing Debian packages; run: sudo apt-get install -y ${missing[*]}" >&2
  exit 1
fi
echo "installing: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
