#!/usr/bin/env bash
# Benchmark run (not a test) for io/dpdk, all without hugepages:
#   1. bulk Gbit/s ipkit -> ipkit over net_memif (two processes, one CPU each):
#      offloads on (multi-seg chains, zero-copy tx), on with copied tx (txzc=0), off
#   2. bulk Gbit/s ipkit -> Linux over net_tap, offloads on (checksums, TSO) and off
#   3. 1-byte ping-pong requests/s (p50/p99 µs) ipkit -> ipkit over net_memif, 1 and
#      32 connections (client: tests/io/io_pingpong)
#   4. Linux baselines in the same run: bulk socat -> socat over veth, ping-pong with
#      bench/pingpong.py (python epoll client and server) over veth
# ipkit bulk rates come from io_pingpong --bulk (established to last byte acknowledged,
# no start-up inside); the Linux rate is (512 MiB - 64 MiB) / (time of a 512 MiB socat
# run - time of a 64 MiB run), so process start-up cancels out there too.
#
#   io/dpdk/figures.sh [BUILD_DIR] [PINGPONG_SECONDS]
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
build=${1:-build}
secs=${2:-3}
ex=$build/examples
pp=$build/tests/io/io_pingpong
tag=ipkD$(od -An -N2 -tx1 /dev/urandom | tr -d ' \n')
ns=${tag}n
ns2=${tag}p
tmp=$(mktemp -d /tmp/ipkD-fig.XXXXXX)
pids=()
cleanup() {
	local p
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
	ip netns del "$ns" 2>/dev/null || true
	ip netns del "$ns2" 2>/dev/null || true
	rm -rf "$tmp" /var/run/dpdk/"$tag"*
}
trap cleanup EXIT
trap 'exit 130' INT TERM
ncpu=$(nproc)
cpu_a=0
cpu_b=$((ncpu > 1 ? 1 : 0))
eal() { # CPU VDEV NAME: EAL args for one process, file prefix $tag$NAME
	echo "--no-huge -m 256 --no-pci --no-telemetry --lcores=0@$1 --file-prefix=$tag$3 --vdev=$2 --"
}
wait_sock() { # PATH: the memif server listens (22.11: an abstract socket; bounded, 30 s)
	for _ in $(seq 300); do grep -q "@$1\$" /proc/net/unix && return 0; sleep 0.1; done
	echo "memif socket $1 never appeared" >&2; return 1
}
now() { date +%s%N; }
gbps() { awk -v b="$1" -v ns="$2" 'BEGIN { printf "%.2f", b * 8 / ns }'; }
size=512M

# memif_bulk NAME SPEC_OPTS [NODE_OPTS]: io_pingpong --bulk to an ipkit-nc sink
memif_bulk() {
	local sock=$tmp/m$BASHPID$RANDOM.sock srv r
	# shellcheck disable=SC2046,SC2086
	"$ex/ipkit-nc" $(eal $cpu_a "net_memif0,role=server,socket=$sock" s$RANDOM) \
		--io "dpdk:net_memif0$2" --ip 10.9.0.1/24 ${3:-} -l 5009 --no-output </dev/null \
		2>/dev/null &
	srv=$!; pids+=($srv)
	wait_sock "$sock"
	# shellcheck disable=SC2046,SC2086
	r=$("$pp" $(eal $cpu_b "net_memif0,role=client,socket=$sock" c$RANDOM) \
		--io "dpdk:net_memif0$2" --ip 10.9.0.2/24 ${3:-} --bulk "$size" 10.9.0.1 5009 \
		2>/dev/null) || r=fail
	kill $srv 2>/dev/null || true; wait $srv 2>/dev/null || true; unset 'pids[-1]'
	printf '| %-48s | %s Gbit/s |\n' "$1" "$r"
}
X() { ip netns exec "$ns" "$@"; }
ip netns add "$ns"; ip netns add "$ns2"
X ip link set lo up
X sysctl -qw net.ipv6.conf.all.disable_ipv6=1
X ip link add "${tag}c" type veth peer name "${tag}d" netns "$ns2"
X ip addr add 10.80.0.1/24 dev "${tag}c"; X ip link set "${tag}c" up
ip netns exec "$ns2" ip addr add 10.80.0.2/24 dev "${tag}d"
ip netns exec "$ns2" ip link set "${tag}d" up; ip netns exec "$ns2" ip link set lo up

# tap_bulk NAME SPEC_OPTS: io_pingpong --bulk on net_tap to a Linux socat sink
tap_bulk() {
	local dev=${tag}t lst r
	ip netns exec "$ns" socat -u TCP-LISTEN:5009,reuseaddr OPEN:/dev/null &
	lst=$!; pids+=($lst); sleep 0.2
	( for _ in $(seq 300); do X ip link show "$dev" >/dev/null 2>&1 && break; sleep 0.1; done
	  X ip addr replace 10.78.0.1/24 dev "$dev"; X ip link set "$dev" up ) &
	# shellcheck disable=SC2046
	r=$(X "$pp" $(eal $cpu_b "net_tap0,iface=$dev" t$RANDOM) --io "dpdk:net_tap0$2" \
		--ip 10.78.0.2/24 --bulk "$size" 10.78.0.1 5009 2>/dev/null) || r=fail
	kill $lst 2>/dev/null || true; wait $lst 2>/dev/null || true; unset 'pids[-1]'
	wait
	printf '| %-48s | %s Gbit/s |\n' "$1" "$r"
}
linux_run() { # SIZE_BYTES
	local t0 t1 lst
	ip netns exec "$ns2" socat -u TCP-LISTEN:5009,reuseaddr OPEN:/dev/null &
	lst=$!; pids+=($lst); sleep 0.2
	t0=$(now)
	X socat -u OPEN:/dev/zero,readbytes="$1" "TCP:10.80.0.2:5009,retry=20,interval=0.1"
	t1=$(now)
	wait $lst 2>/dev/null || true; unset 'pids[-1]'
	echo $((t1 - t0))
}

echo "one-connection bulk ($size), sender -> receiver, $(date -u +%F), $(nproc) CPUs, load $(cut -d' ' -f1 /proc/loadavg)"
echo
echo "| path                                         | throughput |"
echo "|---|---|"
memif_bulk "ipkit -> ipkit, memif, offloads on (zero-copy)" ""
memif_bulk "ipkit -> ipkit, memif, offloads on, txzc=0" ",txzc=0"
memif_bulk "ipkit -> ipkit, memif, offloads off" ",offload=0"
memif_bulk "ipkit -> ipkit, memif, offloads on, --busy-poll" "" "--busy-poll"
tap_bulk "ipkit -> Linux, net_tap, offloads on" ""
tap_bulk "ipkit -> Linux, net_tap, offloads off" ",offload=0"
big=$(linux_run $((512 << 20))); small=$(linux_run $((64 << 20)))
printf '| %-48s | %s Gbit/s |\n' "Linux -> Linux, socat, veth (TSO/GRO on)" \
	"$(gbps $(((512 - 64) << 20)) $((big - small)))"

echo
echo "1-byte ping-pong, ${secs}s per cell: requests/s / p50 µs / p99 µs"
echo
echo "| path                                         | 1 connection | 32 connections |"
echo "|---|---|---|"
# memif_pp NAME NODE_OPTS: ipkit-echo and io_pingpong over memif, 1 and 32 connections
memif_pp() {
	local sock=$tmp/pp$BASHPID.sock cells=() c r
	# shellcheck disable=SC2046,SC2086
	"$ex/ipkit-echo" $(eal $cpu_a "net_memif0,role=server,socket=$sock" e$BASHPID) --io dpdk:net_memif0 \
		--ip 10.9.0.1/24 $2 </dev/null 2>/dev/null &
	pids+=($!)
	wait_sock "$sock"
	for c in 1 32; do
		# shellcheck disable=SC2046,SC2086
		r=$("$pp" $(eal $cpu_b "net_memif0,role=client,socket=$sock" p$c$BASHPID) --io dpdk:net_memif0 \
			--ip 10.9.0.2/24 $2 -c $c -t "$secs" 10.9.0.1 7 2>/dev/null || echo "fail")
		cells+=("$(tr ' ' '/' <<<"$r")")
	done
	printf '| %-48s | %s | %s |\n' "$1" "${cells[0]}" "${cells[1]}"
	kill "${pids[-1]}" 2>/dev/null || true; wait "${pids[-1]}" 2>/dev/null || true
	unset 'pids[-1]'
}
memif_pp "ipkit -> ipkit-echo, memif (poll, 50 µs naps)" ""
memif_pp "ipkit -> ipkit-echo, memif, --busy-poll" "--busy-poll"
ip netns exec "$ns2" python3 bench/pingpong.py server 10.80.0.2 7 &
pids+=($!); sleep 0.5
r1=$(X timeout 30 python3 bench/pingpong.py client 10.80.0.2 7 "$secs" 1)
r32=$(X timeout 30 python3 bench/pingpong.py client 10.80.0.2 7 "$secs" 32)
printf '| %-48s | %s | %s |\n' "Linux python epoll, veth" "$(tr ' ' '/' <<<"$r1")" \
	"$(tr ' ' '/' <<<"$r32")"
