#!/usr/bin/env bash
# Benchmark run (not a test): 1-byte TCP ping-pong (requests/s, p50/p99 µs) at 1 and 32
# connections and one-connection bulk Gbit/s, ipkit over each backend vs Linux<->Linux
# over veth with epoll. The client is always Linux (bench/pingpong.py, python epoll),
# so the client's own cost is in every row alike; compare rows, not absolute values.
#
#   bench/io_figures.sh [BUILD_DIR] [SECONDS]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
build=${1:-build}
secs=${2:-3}
ex=$build/examples
tag=ipk$(od -An -N2 -tx1 /dev/urandom | tr -d ' \n')
ns=${tag}n
ns2=${tag}p
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

ip netns add "$ns"; ip netns add "$ns2"
X ip link set lo up
X sysctl -qw net.ipv6.conf.all.disable_ipv6=1
X ip tuntap add dev "${tag}t" mode tap vnet_hdr
X ip addr add 10.78.0.1/24 dev "${tag}t"; X ip link set "${tag}t" up
X ip link add "${tag}a" type veth peer name "${tag}b"
X ip addr add 10.79.0.1/24 dev "${tag}a"; X ip link set "${tag}a" up; X ip link set "${tag}b" up
X ethtool -K "${tag}a" tso off gso off >/dev/null 2>&1 || true
# Linux peer for Linux<->Linux: a second namespace over veth
X ip link add "${tag}c" type veth peer name "${tag}d" netns "$ns2"
X ip addr add 10.80.0.1/24 dev "${tag}c"; X ip link set "${tag}c" up
ip netns exec "$ns2" ip addr add 10.80.0.2/24 dev "${tag}d"
ip netns exec "$ns2" ip link set "${tag}d" up; ip netns exec "$ns2" ip link set lo up

row() { # name ip port
	local r1 r32
	r1=$(X timeout 30 python3 bench/pingpong.py client "$2" "$3" "$secs" 1)
	r32=$(X timeout 30 python3 bench/pingpong.py client "$2" "$3" "$secs" 32)
	printf '| %-28s | %s | %s |\n' "$1" "$(tr ' ' '/' <<<"$r1")" "$(tr ' ' '/' <<<"$r32")"
}
bulk() { # name ip: Linux sends 256 MiB to a sink on ip:5009
	local t0 t1
	t0=$(date +%s%N)
	X timeout 60 socat -u OPEN:/dev/zero,readbytes=268435456 "TCP:$2:5009,retry=20,interval=0.1"
	t1=$(date +%s%N)
	printf '| %-28s | %s Gbit/s |\n' "$1" "$(awk -v ns=$((t1 - t0)) 'BEGIN {printf "%.2f", 268435456 * 8 / ns}')"
}
wait_ping() { for _ in $(seq 50); do X ping -c 1 -W 1 "$1" >/dev/null 2>&1 && return; sleep 0.1; done; }

echo "ping-pong, 1-byte, Linux python epoll client, ${secs}s per cell: requests/s / p50 µs / p99 µs"
echo
echo "| server                       | 1 connection | 32 connections |"
echo "|---|---|---|"
for kind in tap afpacket; do
	if [ $kind = tap ]; then spec="tap:${tag}t"; ip=10.78.0.2; else spec="afpacket:${tag}b"; ip=10.79.0.2; fi
	ip netns exec "$ns" "$ex/ipkit-echo" --io "$spec" --ip $ip/24 2>/dev/null &
	pids+=($!); sleep 0.3; wait_ping $ip
	row "ipkit-echo over $kind" $ip 7
	kill "${pids[-1]}" 2>/dev/null || true; wait "${pids[-1]}" 2>/dev/null || true; unset 'pids[-1]'
done
ip netns exec "$ns2" python3 bench/pingpong.py server 10.80.0.2 7 &
pids+=($!); sleep 0.5
row "Linux epoll over veth" 10.80.0.2 7
kill "${pids[-1]}" 2>/dev/null || true; wait "${pids[-1]}" 2>/dev/null || true; unset 'pids[-1]'

echo
echo "one-connection bulk, Linux sends 256 MiB"
echo
echo "| receiver | throughput |"
echo "|---|---|"
for kind in tap afpacket; do
	if [ $kind = tap ]; then spec="tap:${tag}t"; ip=10.78.0.2; else spec="afpacket:${tag}b"; ip=10.79.0.2; fi
	ip netns exec "$ns" "$ex/ipkit-nc" --io "$spec" --ip $ip/24 -l 5009 --no-output 2>/dev/null &
	pids+=($!); sleep 0.3; wait_ping $ip
	bulk "ipkit-nc over $kind" $ip
	wait "${pids[-1]}" 2>/dev/null || true; unset 'pids[-1]'
done
ip netns exec "$ns2" socat -u TCP-LISTEN:5009,reuseaddr OPEN:/dev/null &
pids+=($!); sleep 0.3
bulk "Linux over veth" 10.80.0.2
