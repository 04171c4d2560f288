#!/usr/bin/env bash
# `make demo`: ipkit on a real link with Linux as the peer.
#
#   demo_check.sh [BUILD_DIR] [BACKEND]      BACKEND: tap (default) or afpacket
#
# Creates a private namespace ipk<hex>n holding a TAP device (or a veth pair for
# afpacket), starts ipkit-httpd on the ipkit side, lets Linux curl a page and ping
# ipkit. Then the side-by-side: 1-byte ping-pong at 1 and 32 connections, ipkit-bench
# (client and server, C) over AF_XDP on a veth pair (memlink, ipkit's shared-memory
# link, when AF_XDP is unavailable) against its Linux twin ipkit-bench-linux (the same
# program on Linux sockets and epoll) over a veth pair between two namespaces
# (ipk<hex>n and ipk<hex>p). DEMO_SECONDS (default 3) per cell; DEMO_IO=memlink skips
# AF_XDP. Everything it creates
# is removed on exit, also on Ctrl-C or failure; the whole run is bounded (< 1 minute).
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
build=${1:-build}
kind=${2:-tap}
secs=${DEMO_SECONDS:-3}
ex=$build/examples
B=$build/bench/ipkit-bench
L=$build/bench/ipkit-bench-linux
for p in "$ex/ipkit-httpd" "$B" "$L"; do
	[ -x "$p" ] || { echo "demo: FAIL: $p not built (run make)"; exit 1; }
done
[ "$(id -u)" = 0 ] || { echo "demo: FAIL: needs root (network namespaces, TAP)"; exit 1; }

tag=ipk$(od -An -N2 -tx1 /dev/urandom | tr -d ' \n')
ns=${tag}n
ns2=${tag}p
dev=${tag}k
lx=${tag}l
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
in_ns() { ip netns exec "$ns" "$@"; }

ip netns add "$ns"
in_ns ip link set lo up
in_ns sysctl -qw net.ipv6.conf.all.disable_ipv6=1
if [ "$kind" = tap ]; then
	in_ns ip tuntap add dev "$dev" mode tap vnet_hdr
	lx=$dev
	spec="tap:$dev"
else
	in_ns ip link add "$lx" type veth peer name "$dev"
	in_ns ip link set "$dev" up
	in_ns ethtool -K "$lx" tso off gso off >/dev/null 2>&1 || true
	spec="afpacket:$dev"
fi
in_ns ip addr add 10.77.0.1/24 dev "$lx"
in_ns ip link set "$lx" up

echo "demo: namespace $ns, Linux 10.77.0.1 on $lx, ipkit 10.77.0.2 over $spec"
ip netns exec "$ns" "$ex/ipkit-httpd" --io "$spec" --ip 10.77.0.2/24 --size 2k 2>/dev/null &
pids+=($!)
ok=0
for _ in $(seq 50); do
	in_ns ping -c 1 -W 1 10.77.0.2 >/dev/null 2>&1 && { ok=1; break; }
	sleep 0.1
done
[ "$ok" = 1 ] || { echo "demo: FAIL: ipkit-httpd never answered"; exit 1; }

page=$(in_ns curl -s -m 5 -w '\n%{http_code} %{size_download}' http://10.77.0.2/index.html)
code=$(tail -n 1 <<<"$page")
echo "demo: curl http://10.77.0.2/index.html -> HTTP ${code% *}, ${code#* } bytes: $(head -c 34 <<<"$page" | tr '\n' ' ')..."
[ "${code% *}" = 200 ] || { echo "demo: FAIL: curl"; exit 1; }
pingout=$(in_ns ping -c 5 -i 0.1 -W 1 10.77.0.2 | tail -n 2)
echo "demo: ping 10.77.0.2: $(head -n 1 <<<"$pingout")"
echo "      $(tail -n 1 <<<"$pingout")"
kill "${pids[0]}"; wait "${pids[0]}" 2>/dev/null || true
pids=()

# The side-by-side. ipkit: both ends of a veth pair (in ns) driven by ipkit-bench over
# AF_XDP (skb mode: any veth), server pinned to CPU 1, client to CPU 0. Linux: the
# same client and server code on kernel sockets across a veth pair between ns and
# ns2, pinned the same way. Both in their blocking mode with the same 50 us spin
# window after traffic (as bench/pp32_runs.sh), so neither sleeps between a reply and
# the next request.
in_ns ip link add "${tag}x1" type veth peer name "${tag}x2"
in_ns ip link set "${tag}x1" up
in_ns ip link set "${tag}x2" up
ip netns add "$ns2"
ip netns exec "$ns2" ip link set lo up
in_ns ip link add "${tag}c" type veth peer name "${tag}d" netns "$ns2"
in_ns ip addr add 10.78.0.1/24 dev "${tag}c"
in_ns ip link set "${tag}c" up
ip netns exec "$ns2" ip addr add 10.78.0.2/24 dev "${tag}d"
ip netns exec "$ns2" ip link set "${tag}d" up
ncpu=$(nproc)
cpu_s=$((ncpu > 1 ? 1 : 0))
stop_last() {
	kill "${pids[-1]}" 2>/dev/null || true
	wait "${pids[-1]}" 2>/dev/null || true
	unset 'pids[-1]'
}
# cell NS SERVER-ARGS -- CLIENT-ARGS: "req/s p50 p99" of one run (0 0 0 on failure)
cell() {
	local n=$1 srv=() r
	shift
	while [ "$1" != -- ]; do srv+=("$1"); shift; done
	shift
	ip netns exec "$n" taskset -c "$cpu_s" "${srv[@]}" >/dev/null 2>&1 &
	pids+=($!)
	sleep 0.5
	r=$(in_ns taskset -c 0 timeout $((secs + 15)) "$@" -t "$secs" --json -l 1 -g 1 2>/dev/null |
		python3 bench/bench_summary.py | awk '{print $1, $2, $3}') || r="0 0 0"
	stop_last
	echo "${r:-0 0 0}"
}
ipk_cell() { # conns io-a io-b
	cell "$ns" "$B" --io "$2" --ip 10.9.0.1/24 -p 7 --spin-us 50 -- \
		"$B" --io "$3" --ip 10.9.0.2/24 -s 10.9.0.1 -p 7 -c "$1" --spin-us 50
}
io="AF_XDP (veth, skb mode)"
a="afxdp:${tag}x1,mode=skb" b="afxdp:${tag}x2,mode=skb"
r1="0 0 0"
[ "${DEMO_IO:-afxdp}" = memlink ] || r1=$(ipk_cell 1 "$a" "$b")
if [ "${r1%% *}" = 0 ]; then # no AF_XDP here (kernel, permissions): the memlink
	io="memlink (shared memory)"
	a="memlink:${tag}m,role=a" b="memlink:${tag}m,role=b"
	r1=$(ipk_cell 1 "$a" "$b")
fi
r32=$(ipk_cell 32 "$a" "$b")
l1=$(cell "$ns2" "$L" --ip 10.78.0.2 -p 7 --spin-us 50 -- "$L" -s 10.78.0.2 -p 7 -c 1 --spin-us 50)
l32=$(cell "$ns2" "$L" --ip 10.78.0.2 -p 7 --spin-us 50 -- "$L" -s 10.78.0.2 -p 7 -c 32 --spin-us 50)

echo
echo "demo: 1-byte ping-pong, ${secs}s per cell; client and server are the same C program"
echo "      (bench/ipkit-bench.c on ipkit, its twin bench/linux/ipkit-bench-linux.c on Linux sockets)"
printf '  %-58s %11s %11s %8s %8s\n' "" "c=1 req/s" "c=32 req/s" "p50_us" "p99_us"
read -r a1 p50 p99 <<<"$r1"
read -r a32 _ _ <<<"$r32"
printf '  %-58s %11s %11s %8s %8s\n' "ipkit-bench <-> ipkit-bench over $io" "$a1" "$a32" "$p50" "$p99"
read -r b1 p50 p99 <<<"$l1"
read -r b32 _ _ <<<"$l32"
printf '  %-58s %11s %11s %8s %8s\n' "Linux twin <-> Linux twin over veth (epoll)" "$b1" "$b32" "$p50" "$p99"
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2fx", a / b; else print "n/a" }'; }
printf '  %-58s %11s %11s   (p50/p99: c=1)\n' "ipkit / Linux" "$(ratio "$a1" "$b1")" "$(ratio "$a32" "$b32")"
for v in "$a1" "$a32" "$b1" "$b32"; do
	[ "$v" != 0 ] || { echo "demo: FAIL: a ping-pong cell did not run"; exit 1; }
done
echo
echo "demo: ok (namespaces $ns and $ns2 removed on exit)"
