#!/usr/bin/env bash
# ixy's experiment on ipkit's virtio driver (issue 21) — a benchmark, not a test.
#
#   bench/virtio_fwd.sh [BUILD_DIR] [SECONDS] [BATCHES]
#
# 1. Forwarding: dpdk-testpmd with two net_vhost ports in flowgen mode (it sends 64-byte
#    frames on both ports and drops what comes back) is the traffic generator; a
#    forwarder sends what arrives on one port out of the other, in batches of 1..256:
#    build/bench/virtio/ipkit-virtio-fwd (ipkit's driver, raw batch API) and then
#    dpdk-virtio-fwd (DPDK's net_virtio_user), SECONDS each, one after the other
#    against the same testpmd. One "fwd" line per run (see fwd_common.h).
# 2. Through the whole stack, testpmd in io-forward mode between two nodes:
#    ipkit-bench ping-pong (1 connection, 1 byte) and bulk (-g 2, 64 KiB writes), on
#    the virtio backend and on the dpdk backend over net_virtio_user; then both again
#    with --busy-poll.
#
# Prints the load average before and after (the machine is shared: the figures are
# ratios measured side by side, not absolutes). Needs root (DPDK's /var/run/dpdk).
# Everything is named vhfw<hex> (EAL prefixes, a private temp dir) and removed on exit;
# processes are ended by PID.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
build=${1:-build}
secs=${2:-5}
batches=${3:-"1 2 4 8 16 32 64 128 256"}
tag=vhfw$(od -An -N2 -tx1 /dev/urandom | tr -d ' \n')
tmp=$(mktemp -d /tmp/vhfw.XXXXXX)
pids=()
cleanup() {
	local p
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
	rm -rf "$tmp" /var/run/dpdk/"$tag"* 2>/dev/null || true
}
trap cleanup EXIT
trap 'exit 130' INT TERM
cpus=$(python3 -c 'import os; print(",".join(map(str, sorted(os.sched_getaffinity(0)))))')
eal() { # eal NAME NLCORES VDEV...: EAL arguments, file prefix $tag$NAME
	local name=$1 n=$2 l="" i v
	shift 2
	for ((i = 0; i < n; i++)); do l="$l${l:+,}$i@($cpus)"; done
	echo -n "--no-huge -m 512 --no-pci --no-telemetry --lcores=$l --file-prefix=$tag$name"
	for v in "$@"; do echo -n " --vdev=$v"; done
}
testpmd_start() { # testpmd_start MODE
	rm -f "$tmp"/v0.sock "$tmp"/v1.sock
	# shellcheck disable=SC2046
	(sleep 100000 | dpdk-testpmd $(eal "tp$1" 2 "net_vhost0,iface=$tmp/v0.sock,queues=1" \
		"net_vhost1,iface=$tmp/v1.sock,queues=1") -- --forward-mode="$1" --auto-start \
		--nb-cores=1 --total-num-mbufs=16384 >"$tmp/testpmd.log" 2>&1) &
	tp=$!
	pids+=($tp)
	for _ in $(seq 300); do
		grep -q "Checking link statuses" "$tmp/testpmd.log" && return 0
		sleep 0.1
	done
	echo "testpmd did not start:"; tail -5 "$tmp/testpmd.log"; exit 1
}
testpmd_stop() {
	pkill -P "$tp" 2>/dev/null || true   # the subshell's children: sleep and testpmd
	wait "$tp" 2>/dev/null || true
}

echo "# bench/virtio_fwd.sh $(date -u +%FT%TZ), $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)"
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"

testpmd_start flowgen
for b in $batches; do
	timeout $((secs + 60)) "$build/bench/virtio/ipkit-virtio-fwd" "$tmp/v0.sock" "$tmp/v1.sock" \
		"$b" "$secs" | sed 's/^/fwd /' || echo "fwd driver=ipkit batch=$b failed"
	# shellcheck disable=SC2046
	timeout $((secs + 60)) "$build/bench/virtio/dpdk-virtio-fwd" $(eal "fwd$b" 1 \
		"net_virtio_user0,path=$tmp/v0.sock,queues=1" \
		"net_virtio_user1,path=$tmp/v1.sock,queues=1") -- "$b" "$secs" 2>"$tmp/dpdk_fwd.err" |
		grep "^driver=" | sed "s/^/fwd /" || { echo "fwd driver=dpdk batch=$b failed"; tail -3 "$tmp/dpdk_fwd.err"; }
done
testpmd_stop

# ipkit-bench takes its EAL defaults (a private --file-prefix=ipkit-PID, removed at exit)
stack() { # stack NAME SPEC_A SPEC_B [--busy-poll]
	local srv r p b
	"$build/bench/ipkit-bench" --io "$2" --ip 10.9.0.1/24 -p 7 ${4:-} >/dev/null 2>&1 &
	srv=$!
	pids+=($srv)
	sleep 3
	r=$(timeout $((secs + 60)) "$build/bench/ipkit-bench" --io "$3" --ip 10.9.0.2/24 \
		-s 10.9.0.1 -p 7 -t "$secs" --json -c 1 -l 1 -g 1 ${4:-} 2>/dev/null |
		python3 "$root/bench/bench_summary.py")
	p=$(cut -d' ' -f1-3 <<<"$r")
	r=$(timeout $((secs + 60)) "$build/bench/ipkit-bench" --io "$3" --ip 10.9.0.2/24 \
		-s 10.9.0.1 -p 7 -t "$secs" --json -c 1 -l 65536 -g 2 ${4:-} 2>/dev/null |
		python3 "$root/bench/bench_summary.py")
	b=$(cut -d' ' -f4 <<<"$r")
	echo "stack $1${4:+ busy-poll} pingpong_req_s_p50_us_p99_us=$p bulk_gbit_s=$b"
	kill "$srv"; wait "$srv" 2>/dev/null || true
}
testpmd_start io
stack virtio "virtio:vhost-user=$tmp/v0.sock" "virtio:vhost-user=$tmp/v1.sock"
stack dpdk-virtio_user "dpdk:net_virtio_user0,path=$tmp/v0.sock,queues=1" \
	"dpdk:net_virtio_user1,path=$tmp/v1.sock,queues=1"
# the dpdk backend cannot sleep on net_virtio_user (it naps): both again never sleeping
stack virtio "virtio:vhost-user=$tmp/v0.sock" "virtio:vhost-user=$tmp/v1.sock" --busy-poll
stack dpdk-virtio_user "dpdk:net_virtio_user0,path=$tmp/v0.sock,queues=1" \
	"dpdk:net_virtio_user1,path=$tmp/v1.sock,queues=1" --busy-poll
testpmd_stop
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
