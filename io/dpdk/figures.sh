#!/usr/bin/env bash
# Benchmark run (not a test) for io/dpdk, all without hugepages:
#   1. bulk Gbit/s ipkit -> ipkit over net_memif (two processes, one CPU each):
#      offloads on (multi-seg chains, zero-copy tx), on with copied tx (txzc=0), off
#   2. bulk Gbit/s ipkit -> Linux over net_tap, offloads on (checksums, TSO) and off
#   3. 1-byte ping-pong requests/s (p50/p99 µs) ipkit -> ipkit over net_memif, 1 and
#      32 connections (client: tests/io/io_pingpong)
#   4. Linux baselines in the same run: bulk socat -> socat over veth, ping-pong with
#      bench/pingpong.py (python epoll client and server) over veth
# Bulk rate = (1 GiB - 64 MiB) / (time of a 1 GiB run - time of a 64 MiB run), so
# process and EAL start-up cancel out.
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
eal() { # CPU VDEV: EAL args for one process (runs in $(...): no state kept here)
	echo "--no-huge -m 256 --no-pci --no-telemetry --lcores=0@$1 --file-prefix=$tag$RANDOM --vdev=$2 --"
}
wait_sock() { # PATH: the memif server listens (22.11: an abstract socket; bounded, 30 s)
	for _ in $(seq 300); do grep -q "@$1\$" /proc/net/unix && return 0; sleep 0.1; done
	echo "memif socket $1 never appeared" >&2; return 1
}
now() { date +%s%N; }
gbps() { awk -v b="$1" -v ns="$2" 'BEGIN { printf "%.2f", b * 8 / ns }'; }
rate() { # NS_1G NS_64M: Gbit/s of the difference, or "fail"
	if [ "$1" = fail ] || [ "$2" = fail ] || [ "$1" -le "$2" ]; then echo "fail"; return; fi
	echo "$(gbps $(((1024 - 64) << 20)) $(($1 - $2))) Gbit/s"
}

# memif_run SIZE SPEC_OPTS: seconds (ns) for ipkit-nc to push SIZE to an ipkit-nc sink
memif_run() { # SIZE SPEC_OPTS [NODE_OPTS]
	local sock=$tmp/m$RANDOM.sock t0 t1 srv
	# shellcheck disable=SC2046,SC2086
	"$ex/ipkit-nc" $(eal $cpu_a "net_memif0,role=server,socket=$sock") \
		--io "dpdk:net_memif0$2" --ip 10.9.0.1/24 ${3:-} -l 5009 --no-output </dev/null \
		2>/dev/null &
	srv=$!; pids+=($srv)
	wait_sock "$sock"
	t0=$(now)
	# shellcheck disable=SC2046,SC2086
	"$ex/ipkit-nc" $(eal $cpu_b "net_memif0,role=client,socket=$sock") \
		--io "dpdk:net_memif0$2" --ip 10.9.0.2/24 ${3:-} --send-size "$1" --no-output \
		10.9.0.1 5009 2>/dev/null || t0=fail
	t1=$(now)
	wait $srv 2>/dev/null || true; unset 'pids[-1]'
	[ "$t0" = fail ] && echo fail || echo $((t1 - t0))
}
memif_bulk() { # NAME SPEC_OPTS [NODE_OPTS]
	local big small
	big=$(memif_run 1G "$2" "${3:-}"); small=$(memif_run 64M "$2" "${3:-}")
	printf '| %-44s | %s |\n' "$1" "$(rate "$big" "$small")"
}

X() { ip netns exec "$ns" "$@"; }
ip netns add "$ns"; ip netns add "$ns2"
X ip link set lo up
X sysctl -qw net.ipv6.conf.all.disable_ipv6=1
X ip link add "${tag}c" type veth peer name "${tag}d" netns "$ns2"
X ip addr add 10.80.0.1/24 dev "${tag}c"; X ip link set "${tag}c" up
ip netns exec "$ns2" ip addr add 10.80.0.2/24 dev "${tag}d"
ip netns exec "$ns2" ip link set "${tag}d" up; ip netns exec "$ns2" ip link set lo up

# tap_run SIZE OPTS: ns for ipkit-nc on net_tap to push SIZE to a Linux socat sink
tap_run() {
	local dev=${tag}t t0 t1 lst
	X socat -u TCP-LISTEN:5009,reuseaddr OPEN:/dev/null &
	lst=$!; pids+=($lst); sleep 0.2
	( for _ in $(seq 100); do X ip link show "$dev" >/dev/null 2>&1 && break; sleep 0.05; done
	  X ip addr replace 10.78.0.1/24 dev "$dev"; X ip link set "$dev" up ) &
	t0=$(now)
	# shellcheck disable=SC2046
	X "$ex/ipkit-nc" $(eal $cpu_b "net_tap0,iface=$dev") --io "dpdk:net_tap0$2" \
		--ip 10.78.0.2/24 --send-size "$1" --no-output 10.78.0.1 5009 2>/dev/null || t0=fail
	t1=$(now)
	wait $lst 2>/dev/null || true; unset 'pids[-1]'
	wait
	[ "$t0" = fail ] && echo fail || echo $((t1 - t0))
}
tap_bulk() {
	local big small
	big=$(tap_run 1G "$2"); small=$(tap_run 64M "$2")
	printf '| %-44s | %s |\n' "$1" "$(rate "$big" "$small")"
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

echo "one-connection bulk, sender -> receiver, $(date -u +%F), $(nproc) CPUs, load $(cut -d' ' -f1 /proc/loadavg)"
echo
echo "| path                                         | throughput |"
echo "|---|---|"
memif_bulk "ipkit -> ipkit, memif, offloads on (zero-copy)" ""
memif_bulk "ipkit -> ipkit, memif, offloads on, txzc=0" ",txzc=0"
memif_bulk "ipkit -> ipkit, memif, offloads off" ",offload=0"
memif_bulk "ipkit -> ipkit, memif, offloads on, --busy-poll" "" "--busy-poll"
tap_bulk "ipkit -> Linux, net_tap, offloads on" ""
tap_bulk "ipkit -> Linux, net_tap, offloads off" ",offload=0"
big=$(linux_run $((1 << 30))); small=$(linux_run $((64 << 20)))
printf '| %-44s | %s |\n' "Linux -> Linux, veth (TSO/GRO on)" "$(rate "$big" "$small")"

echo
echo "1-byte ping-pong, ${secs}s per cell: requests/s / p50 µs / p99 µs"
echo
echo "| path                                         | 1 connection | 32 connections |"
echo "|---|---|---|"
# memif_pp NAME NODE_OPTS: ipkit-echo and io_pingpong over memif, 1 and 32 connections
memif_pp() {
	local sock=$tmp/pp$RANDOM.sock cells=() c r
	# shellcheck disable=SC2046,SC2086
	"$ex/ipkit-echo" $(eal $cpu_a "net_memif0,role=server,socket=$sock") --io dpdk:net_memif0 \
		--ip 10.9.0.1/24 $2 </dev/null 2>/dev/null &
	pids+=($!)
	wait_sock "$sock"
	for c in 1 32; do
		# shellcheck disable=SC2046,SC2086
		r=$("$pp" $(eal $cpu_b "net_memif0,role=client,socket=$sock") --io dpdk:net_memif0 \
			--ip 10.9.0.2/24 $2 -c $c -t "$secs" 10.9.0.1 7 2>/dev/null || echo "fail")
		cells+=("$(tr ' ' '/' <<<"$r")")
	done
	printf '| %-44s | %s | %s |\n' "$1" "${cells[0]}" "${cells[1]}"
	kill "${pids[-1]}" 2>/dev/null || true; wait "${pids[-1]}" 2>/dev/null || true
	unset 'pids[-1]'
}
memif_pp "ipkit -> ipkit-echo, memif (poll, 50 µs naps)" ""
memif_pp "ipkit -> ipkit-echo, memif, --busy-poll" "--busy-poll"
ip netns exec "$ns2" python3 bench/pingpong.py server 10.80.0.2 7 &
pids+=($!); sleep 0.5
r1=$(X timeout 30 python3 bench/pingpong.py client 10.80.0.2 7 "$secs" 1)
r32=$(X timeout 30 python3 bench/pingpong.py client 10.80.0.2 7 "$secs" 32)
printf '| %-44s | %s | %s |\n' "Linux python epoll, veth" "$(tr ' ' '/' <<<"$r1")" \
	"$(tr ' ' '/' <<<"$r32")"
