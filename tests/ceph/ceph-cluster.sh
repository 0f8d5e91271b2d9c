#!/usr/bin/env bash
# ceph-cluster.sh -- a throw-away single-node Ceph cluster for the rados provider's tests, built
# from Debian's packages (ceph-mon ceph-mgr ceph-osd ceph-common): one mon, one mgr, one OSD
# (BlueStore on a sparse file), cephx on, loopback only, everything under DIR. No systemd, no
# vstart.sh, nothing outside DIR is touched and `stop` kills exactly the daemons `start` started.
#
#   ceph-cluster.sh start DIR       bring it up, create the pool, wait until every PG is
#                                   active+clean (bounded); prints the conf and keyring paths
#   ceph-cluster.sh stop DIR        stop the daemons started in DIR (pid files) and wait for them
#   ceph-cluster.sh status DIR      `ceph -s` of the cluster in DIR
#   ceph-cluster.sh kill-osd DIR    SIGKILL the OSD (a crash) and tell the mon it is down
#   ceph-cluster.sh start-osd DIR   start the OSD again and wait until the PGs are active
#   ceph-cluster.sh env DIR         print CEPH_CONF=... lines for a shell (eval "$(...)")
#
# Exit status: 0 on success, 77 when the ceph binaries are not installed (ctest SKIP), 1 on
# failure (with the reason on stderr and the last lines of the daemon logs).
#
# After `start`, DIR holds: ceph.conf, client.admin.keyring (all caps; for the `ceph` CLI),
# client.tier.keyring (the provider's client `client.tier`: mon 'allow r', osd 'allow rw', as a
# production deployment would grant), the pool `tier`, and a file `ready` with the paths.
set -euo pipefail

POOL=tier
CLIENT=tier
START_TIMEOUT_S=${CEPH_CLUSTER_TIMEOUT_S:-60}

die() {
  echo "ceph-cluster: $*" >&2
  exit 1
}

usage() {
  sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
}

[ $# -eq 2 ] || usage
cmd=$1
dir=$2

need_binaries() {
  local missing=()
  # TIER_CEPH_ABSENT=1: behave as if ceph were not installed (checks the skip path).
  if [ "${TIER_CEPH_ABSENT:-0}" = 1 ]; then
    echo "ceph-cluster: SKIP: TIER_CEPH_ABSENT=1 (as if ceph were not installed)" >&2
    exit 77
  fi
  for b in ceph-mon ceph-mgr ceph-osd ceph ceph-authtool monmaptool; do
    command -v "$b" >/dev/null 2>&1 || missing+=("$b")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    echo "ceph-cluster: SKIP: ${missing[*]} not installed (Debian: apt-get install ceph-mon" \
      "ceph-mgr ceph-osd ceph-common; .ci/install-deps.sh does it)" >&2
    exit 77
  fi
}

abs_dir() {
  mkdir -p "$1"
  (cd "$1" && pwd)
}

# ceph CLI as client.admin of the cluster in $dir, bounded.
cephc() {
  timeout 30 ceph --conf "$dir/ceph.conf" --name client.admin \
    --keyring "$dir/client.admin.keyring" --connect-timeout 10 "$@"
}

# A TCP port on 127.0.0.1 nobody listens on, from a range derived from $1 (a seed) and the pid.
free_port() {
  local seed=$1 port tries=0
  while [ $tries -lt 200 ]; do
    port=$(( 20000 + (seed * 7919 + $$ * 31 + tries * 104729 + RANDOM) % 30000 ))
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
      # Nobody answers; a bind test confirms nobody holds it either.
      if python3 - "$port" <<'EOF' 2>/dev/null; then
import socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1]))); s.close()
EOF
        echo "$port"
        return 0
      fi
    fi
    tries=$((tries + 1))
  done
  die "no free loopback port found"
}

# Is the daemon of pid file $1 alive (and one of ours: its command line names $dir)?
alive() {
  local pidfile=$1 pid
  [ -f "$pidfile" ] || return 1
  pid=$(cat "$pidfile" 2>/dev/null) || return 1
  [ -n "$pid" ] && [ -d "/proc/$pid" ] || return 1
  grep -qF -- "$dir/ceph.conf" <<<"$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null)"
}

show_logs() {
  for log in "$dir"/log/*.log; do
    [ -f "$log" ] || continue
    echo "---- last lines of $log" >&2
    tail -n 15 "$log" >&2
  done
}

fail_start() {
  echo "ceph-cluster: start failed: $*" >&2
  show_logs
  stop_daemons
  exit 1
}

# Runs "$@" until it succeeds or $1 seconds pass.
wait_for() {
  local seconds=$1
  shift
  local deadline=$(( $(date +%s) + seconds ))
  while ! "$@" >/dev/null 2>&1; do
    [ "$(date +%s)" -lt "$deadline" ] || return 1
    sleep 0.5
  done
}

all_pgs_active_clean() {
  local out
  out=$(cephc pg stat 2>/dev/null) || return 1
  # "8 pgs: 8 active+clean; ..." -- every PG in the one state active+clean.
  grep -Eq '^([0-9]+) pgs: \1 active\+clean;' <<<"$out"
}

all_pgs_active() {
  local total active
  total=$(cephc pg stat -f json 2>/dev/null | python3 -c '
import json,sys
d=json.load(sys.stdin); s=d.get("pg_summary",d)
t=s.get("num_pgs",0); a=sum(x["num"] for x in s.get("num_pg_by_state",[]) if "active" in x["name"].split("+") and "peering" not in x["name"])
print(t, a)') || return 1
  set -- $total
  [ "$1" -gt 0 ] && [ "$1" -eq "$2" ]
}

osd_up() {
  cephc osd dump -f json 2>/dev/null | python3 -c '
import json,sys
d=json.load(sys.stdin)
sys.exit(0 if any(o["osd"]==0 and o["up"]==1 for o in d["osds"]) else 1)'
}

write_conf() {
  local fsid=$1 mon_port=$2 port_min=$3
  cat >"$dir/ceph.conf" <<EOF
# Generated by tests/ceph/ceph-cluster.sh: a single-node test cluster, loopback only.
[global]
fsid = $fsid
mon_host = [v2:127.0.0.1:$mon_port]
public_network = 127.0.0.0/8
ms_bind_msgr1 = false
ms_bind_msgr2 = true
ms_bind_port_min = $port_min
ms_bind_port_max = $((port_min + 60))
auth_cluster_required = cephx
auth_service_required = cephx
auth_client_required = cephx
run_dir = $dir/run
admin_socket = $dir/run/\$cluster-\$name.asok
pid_file = $dir/run/\$name.pid
log_file = $dir/log/\$name.log
log_to_stderr = false
err_to_stderr = true
mon_cluster_log_file = $dir/log/cluster.log
crash_dir = $dir/crash
# One OSD: pools of size 1, PGs on one host, no warnings about either.
osd_pool_default_size = 1
osd_pool_default_min_size = 1
osd_pool_default_pg_num = 8
osd_pool_default_pgp_num = 8
osd_pool_default_pg_autoscale_mode = off
osd_crush_chooseleaf_type = 0
mon_allow_pool_size_one = true
mon_allow_pool_delete = true
mon_warn_on_pool_no_redundancy = false
mon_max_pg_per_osd = 1000
mon_data_avail_warn = 2
mon_data_avail_crit = 1
# A dead OSD is noticed in seconds, not after 900 s (no peer reports it: the mon relies on the
# OSD's beacons), and is not marked out while the fault tests restart it.
osd_beacon_report_interval = 1
mon_osd_report_timeout = 6
osd_mon_report_interval = 1
mon_osd_down_out_interval = 600
mon_osd_min_down_reporters = 1
osd_heartbeat_interval = 1
osd_heartbeat_grace = 5
# Stats reach the mon quickly, so a pool quota is enforced within seconds.
mgr_stats_period = 1
mon_mgr_beacon_grace = 10
mgr_tick_period = 1
# Modest memory: the OSD grows to ~2 GB under heavy writes otherwise.
osd_memory_target = 1073741824
bluestore_cache_autotune = true
osd_objectstore = bluestore
bluestore_fsck_on_mount = false
bluestore_fsck_on_mkfs = false
mon_data = $dir/mon
mgr_data = $dir/mgr
osd_data = $dir/osd.\$id
# The block file lives outside the OSD data dir (mkfs fails on a symlink loop otherwise);
# sparse, it grows to the peak written.
bluestore_block_path = $dir/block/osd.\$id.block
bluestore_block_create = true
bluestore_block_size = 21474836480
[mon]
keyring = $dir/mon/keyring
mon_initial_members = a
auth_allow_insecure_global_id_reclaim = false
[mgr]
keyring = $dir/mgr/keyring
[osd]
keyring = $dir/osd.\$id/keyring
[client]
keyring = $dir/\$name.keyring
EOF
}

start_cluster() {
  need_binaries
  dir=$(abs_dir "$dir")
  if alive "$dir/run/mon.a.pid" || alive "$dir/run/osd.0.pid" || alive "$dir/run/mgr.x.pid"; then
    # Left by an interrupted run: these pids were started in $dir, so they are ours to stop.
    echo "ceph-cluster: stopping the cluster left running in $dir" >&2
    stop_daemons
  fi
  rm -rf "$dir/mon" "$dir/mgr" "$dir/osd.0" "$dir/block" "$dir/run" "$dir/log" "$dir/crash" \
    "$dir/ready" "$dir"/*.keyring "$dir/ceph.conf" "$dir/monmap"
  mkdir -p "$dir/run" "$dir/log" "$dir/crash" "$dir/mgr" "$dir/osd.0" "$dir/block"
  local t0 fsid mon_port port_min
  t0=$(date +%s)
  fsid=$(cat /proc/sys/kernel/random/uuid)
  mon_port=$(free_port 1)
  port_min=$(free_port 2)
  write_conf "$fsid" "$mon_port" "$port_min"

  # Keys: mon., client.admin (everything), the provider's client.tier (what a deployment grants).
  ceph-authtool --create-keyring "$dir/mon.keyring" --gen-key -n mon. --cap mon 'allow *' \
    >/dev/null
  ceph-authtool --create-keyring "$dir/client.admin.keyring" --gen-key -n client.admin \
    --cap mon 'allow *' --cap osd 'allow *' --cap mgr 'allow *' --cap mds 'allow *' >/dev/null
  ceph-authtool --create-keyring "$dir/client.$CLIENT.keyring" --gen-key -n client.$CLIENT \
    --cap mon 'allow r' --cap osd 'allow rw' >/dev/null
  cp "$dir/mon.keyring" "$dir/mon.seed.keyring"
  ceph-authtool "$dir/mon.seed.keyring" --import-keyring "$dir/client.admin.keyring" >/dev/null
  ceph-authtool "$dir/mon.seed.keyring" --import-keyring "$dir/client.$CLIENT.keyring" >/dev/null
  monmaptool --create --fsid "$fsid" --addv a "[v2:127.0.0.1:$mon_port]" "$dir/monmap" \
    >/dev/null

  ceph-mon --conf "$dir/ceph.conf" --id a --mkfs --monmap "$dir/monmap" \
    --keyring "$dir/mon.seed.keyring" >/dev/null 2>"$dir/log/mon-mkfs.err" ||
    fail_start "ceph-mon --mkfs: $(tail -n 3 "$dir/log/mon-mkfs.err")"
  rm -f "$dir/mon.seed.keyring"
  cp "$dir/mon.keyring" "$dir/mon/keyring"
  ceph-mon --conf "$dir/ceph.conf" --id a 2>>"$dir/log/mon.err" ||
    fail_start "ceph-mon did not start"
  wait_for 20 cephc mon stat || fail_start "the mon at 127.0.0.1:$mon_port did not answer in 20 s"

  # mgr: quota enforcement and PG stats go through it.
  cephc auth get-or-create mgr.x mon 'allow profile mgr' osd 'allow *' mds 'allow *' \
    -o "$dir/mgr/keyring" >/dev/null || fail_start "cannot create the mgr key"
  ceph-mgr --conf "$dir/ceph.conf" --id x 2>>"$dir/log/mgr.err" || fail_start "ceph-mgr did not start"

  # OSD 0: BlueStore on a sparse file outside its data dir.
  local osd_uuid osd_key
  osd_uuid=$(cat /proc/sys/kernel/random/uuid)
  osd_key=$(ceph-authtool --gen-print-key)
  printf '[osd.0]\n\tkey = %s\n' "$osd_key" >"$dir/osd.0/keyring"
  printf '{"cephx_secret": "%s"}\n' "$osd_key" >"$dir/run/osd-secret.json"
  cephc osd new "$osd_uuid" 0 -i "$dir/run/osd-secret.json" >/dev/null ||
    fail_start "ceph osd new failed"
  rm -f "$dir/run/osd-secret.json"
  ceph-osd --conf "$dir/ceph.conf" --id 0 --mkfs --osd-uuid "$osd_uuid" \
    >"$dir/log/osd-mkfs.out" 2>&1 || fail_start "ceph-osd --mkfs: $(tail -n 5 "$dir/log/osd-mkfs.out")"
  ceph-osd --conf "$dir/ceph.conf" --id 0 2>>"$dir/log/osd.err" || fail_start "ceph-osd did not start"
  wait_for 30 osd_up || fail_start "osd.0 not up within 30 s"

  cephc osd pool create "$POOL" 8 8 replicated >/dev/null 2>&1 || fail_start "cannot create pool $POOL"
  cephc osd pool set "$POOL" size 1 --yes-i-really-mean-it >/dev/null 2>&1 || true
  cephc osd pool application enable "$POOL" tier >/dev/null 2>&1 || true
  local remaining=$(( START_TIMEOUT_S - ($(date +%s) - t0) ))
  [ $remaining -gt 5 ] || remaining=5
  wait_for "$remaining" all_pgs_active_clean ||
    fail_start "PGs not active+clean within ${START_TIMEOUT_S} s: $(cephc pg stat 2>&1 | sed -n 1p)"

  cat >"$dir/ready" <<EOF
conf=$dir/ceph.conf
pool=$POOL
client=$CLIENT
keyring=$dir/client.$CLIENT.keyring
admin_keyring=$dir/client.admin.keyring
mon_host=127.0.0.1:$mon_port
EOF
  echo "ceph-cluster: up in $(( $(date +%s) - t0 )) s: mon 127.0.0.1:$mon_port, pool $POOL"
  echo "conf=$dir/ceph.conf"
  echo "keyring=$dir/client.$CLIENT.keyring (client.$CLIENT; admin: $dir/client.admin.keyring)"
}

# Sends TERM to one daemon of ours, waits up to 15 s, then KILL.
stop_one() {
  local pidfile=$1 pid i
  alive "$pidfile" || { rm -f "$pidfile"; return 0; }
  pid=$(cat "$pidfile")
  kill -TERM "$pid" 2>/dev/null || true
  for i in $(seq 1 60); do
    [ -d "/proc/$pid" ] || break
    sleep 0.25
  done
  if [ -d "/proc/$pid" ]; then
    kill -KILL "$pid" 2>/dev/null || true
    sleep 0.2
  fi
  rm -f "$pidfile"
}

stop_daemons() {
  [ -d "$dir/run" ] || return 0
  # OSD first (it reports to the mon), the mon last.
  stop_one "$dir/run/osd.0.pid"
  stop_one "$dir/run/mgr.x.pid"
  stop_one "$dir/run/mon.a.pid"
}

stop_cluster() {
  [ -d "$dir" ] || { echo "ceph-cluster: nothing in $dir"; return 0; }
  dir=$(abs_dir "$dir")
  stop_daemons
  rm -f "$dir/ready"
  # The block file is sparse but grows to what was written: give the space back.
  rm -rf "$dir/block"
  echo "ceph-cluster: stopped the daemons in $dir"
}

kill_osd() {
  dir=$(abs_dir "$dir")
  alive "$dir/run/osd.0.pid" || die "osd.0 is not running in $dir"
  kill -KILL "$(cat "$dir/run/osd.0.pid")"
  rm -f "$dir/run/osd.0.pid"
  echo "ceph-cluster: osd.0 killed"
}

start_osd() {
  need_binaries
  dir=$(abs_dir "$dir")
  alive "$dir/run/osd.0.pid" && die "osd.0 is already running in $dir"
  # A restarted OSD can hang in booting until the mon has marked the old instance down.
  cephc osd down 0 >/dev/null 2>&1 || true
  ceph-osd --conf "$dir/ceph.conf" --id 0 2>>"$dir/log/osd.err" || die "ceph-osd did not start"
  wait_for 40 osd_up || die "osd.0 not up within 40 s"
  wait_for 40 all_pgs_active || die "PGs not active within 40 s after the restart"
  echo "ceph-cluster: osd.0 up"
}

case $cmd in
  start) start_cluster ;;
  stop) stop_cluster ;;
  status)
    need_binaries
    dir=$(abs_dir "$dir")
    [ -f "$dir/ceph.conf" ] || die "no cluster in $dir"
    cephc -s
    ;;
  kill-osd) kill_osd ;;
  start-osd) start_osd ;;
  env)
    dir=$(abs_dir "$dir")
    [ -f "$dir/ready" ] || die "no running cluster in $dir"
    echo "CEPH_CONF=$dir/ceph.conf"
    echo "CEPH_KEYRING=$dir/client.admin.keyring"
    ;;
  *) usage ;;
esac
