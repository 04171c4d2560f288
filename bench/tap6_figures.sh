#!/usr/bin/env bash
# Benchmark run (not a test), issue 19's TAP figures: 1-byte TCP ping-pong requests/s
# at 1 and 32 connections for
#   ipkit4  ipkit-bench server over TAP, IPv4   (client: ipkit-bench-linux, IPv4)
#   ipkit6  the same server process over IPv6 (client: ipkit-bench-linux -s ADDR6)
#   linux6  ipkit-bench-linux -6 server over a veth into a second namespace (Linux's
#           IPv6 end to end; the same client)
#   linux4  the same over IPv4 (reference)
# Every repeat starts the servers, measures ROUNDS rounds of every cell interleaved
# (1 conn: ipkit4 ipkit6 linux6 linux4, then 32 conns likewise) and prints each
# cell's median and the ratios ipkit6/ipkit4, ipkit6/linux6: the machine is noisy,
# so compare rows of one repeat, not repeats.
# Servers and clients are unpinned and blocking (epoll / poll sleep), as ipkit-bench
# and its twin run by default.
#
#   bench/tap6_figures.sh [BUILD_DIR] [SECONDS_PER_CELL] [REPEATS] [ROUNDS]  # 2 3 3
# Needs root (network namespaces). Everything it creates is named ipk6F<4 hex>... and
# removed on exit, also on failure or Ctrl-C.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
build=${1:-build}
secs=${2:-2}
reps=${3:-3}
rounds=${4:-3}
blin=$build/bench/ipkit-bench-linux
bipk=$build/bench/ipkit-bench
[ -x "$blin" ] && [ -x "$bipk" ] || { echo "ipkit-bench(-linux) not built in $build" >&2; exit 2; }
tag=ipk6F$(od -An -N2 -tx1 /dev/urandom | tr -d ' \n')
ns=${tag}n   # the TAP device, and every client
ns2=${tag}p  # the Linux server of the linux rows
pids=()
cleanup() {
	local p
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
	ip netns del "$ns" 2>/dev/null || true
	ip netns del "$ns2" 2>/dev/null || true
}
trap cleanup EXIT
trap 'exit 130' INT TERM
X() { ip netns exec "$ns" "$@"; }
Y() { ip netns exec "$ns2" "$@"; }

# ---------------------------------------------------------------- topology
ip netns add "$ns"; ip netns add "$ns2"
X ip link set lo up; Y ip link set lo up
X ip tuntap add dev "${tag}t" mode tap vnet_hdr
X sysctl -qw "net.ipv6.conf.${tag}t.disable_ipv6=0" 2>/dev/null || true
X ip addr add 10.78.0.1/24 dev "${tag}t"
X ip -6 addr add fd78::1/64 dev "${tag}t" nodad
X ip link set "${tag}t" up
X ip link add "${tag}c" type veth peer name "${tag}d" netns "$ns2"
X ip addr add 10.80.0.1/24 dev "${tag}c"; X ip -6 addr add fd80::1/64 dev "${tag}c" nodad
X ip link set "${tag}c" up
Y ip addr add 10.80.0.2/24 dev "${tag}d"; Y ip -6 addr add fd80::2/64 dev "${tag}d" nodad
Y ip link set "${tag}d" up

# ---------------------------------------------------------------- helpers
wait_ping() { # -4|-6 addr: bounded wait until the server answers (DAD, ND)
	local i
	for i in $(seq 100); do X ping "$1" -c 1 -W 1 "$2" >/dev/null 2>&1 && return 0; sleep 0.1; done
	return 1
}
# The servers run for the whole repeat: one ipkit-bench node with both families on
# the TAP (its listener takes both: ipkit4 and ipkit6 hit the same process), the
# twin over IPv6 (port 7) and IPv4 (port 8) in the second namespace.
servers_start() {
	ip netns exec "$ns" "$bipk" --io "tap:${tag}t" --ip 10.78.0.2/24 --ip6 fd78::2/64 \
		-p 7 >/dev/null 2>&1 &
	pids+=($!)
	ip netns exec "$ns2" "$blin" -6 --ip fd80::2 -p 7 >/dev/null 2>&1 &
	pids+=($!)
	ip netns exec "$ns2" "$blin" --ip 10.80.0.2 -p 8 >/dev/null 2>&1 &
	pids+=($!)
	wait_ping -4 10.78.0.2 && wait_ping -6 fd78::2 && wait_ping -6 fd80::2
}
servers_stop() {
	local p
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
	pids=()
}
declare -A dst=([ipkit4]=10.78.0.2 [ipkit6]=fd78::2 [linux6]=fd80::2 [linux4]=10.80.0.2)
declare -A port=([ipkit4]=7 [ipkit6]=7 [linux6]=7 [linux4]=8)
pp() { # row conns -> req/s (0 on errors or no summary)
	X timeout $((secs + 20)) "$blin" -s "${dst[$1]}" -p "${port[$1]}" -c "$2" -t "$secs" \
		-l 1 -g 1 --json | python3 bench/bench_summary.py | cut -d' ' -f1
}
median() { python3 -c "import sys,statistics; print(int(statistics.median(map(float, sys.argv[1:]))))" "$@"; }
ratio() { python3 -c "import sys; a,b=float(sys.argv[1]),float(sys.argv[2]); print('%.2f' % (a/b) if b else '-')" "$1" "$2"; }

rows="ipkit4 ipkit6 linux6 linux4"
echo "# TAP, 1-byte TCP ping-pong, requests/s: median of $rounds interleaved ${secs}s cells" \
	"per repeat, $reps repeats ($(date -u +%F\ %H:%M) UTC)"
printf '%-6s %-6s %10s %10s %10s %10s %14s %14s\n' rep conns ipkit4 ipkit6 linux6 linux4 \
	ipkit6/ipkit4 ipkit6/linux6
for rep in $(seq "$reps"); do
	declare -A v=()
	servers_start
	for r in $(seq "$rounds"); do
		for c in 1 32; do
			for row in $rows; do v[$row.$c]="${v[$row.$c]:-} $(pp "$row" "$c")"; done
		done
	done
	servers_stop
	for c in 1 32; do
		for row in $rows; do v[$row.$c]=$(median ${v[$row.$c]}); done
		printf '%-6s %-6s %10s %10s %10s %10s %14s %14s\n' "$rep" "$c" "${v[ipkit4.$c]}" \
			"${v[ipkit6.$c]}" "${v[linux6.$c]}" "${v[linux4.$c]}" \
			"$(ratio "${v[ipkit6.$c]}" "${v[ipkit4.$c]}")" \
			"$(ratio "${v[ipkit6.$c]}" "${v[linux6.$c]}")"
	done
	unset v
done
