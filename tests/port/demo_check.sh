#!/usr/bin/env bash
# `make demo`: ipkit on a real link with Linux as the peer.
#
#   demo_check.sh [BUILD_DIR] [BACKEND]      BACKEND: tap (default) or afpacket
#
# Creates a private namespace ipk<hex>n holding a TAP device (or a veth pair for
# afpacket), starts ipkit-httpd on the ipkit side, lets Linux curl a page and ping
# ipkit, then compares 1-byte ping-pong against ipkit-echo and a Linux epoll echo
# server (bench/pingpong.py) answering the same client. Everything it creates is
# removed on exit, also on Ctrl-C or failure; the whole run is bounded (< 1 minute).
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
build=${1:-build}
kind=${2:-tap}
secs=${DEMO_SECONDS:-3}
ex=$build/examples
for p in ipkit-httpd ipkit-echo; do
	[ -x "$ex/$p" ] || { echo "demo: FAIL: $ex/$p not built (run make)"; exit 1; }
done
[ "$(id -u)" = 0 ] || { echo "demo: FAIL: needs root (network namespaces, TAP)"; exit 1; }

tag=ipk$(od -An -N2 -tx1 /dev/urandom | tr -d ' \n')
ns=${tag}n
dev=${tag}k
lx=${tag}l
pids=()
cleanup() {
	local p
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
	ip netns del "$ns" 2>/dev/null || true
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
in_ns ip neigh flush dev "$lx" # the next ipkit process picks a new MAC

# ping-pong: ipkit-echo on the ipkit side vs a Linux epoll server on the Linux side;
# the same Linux client drives both (for Linux, the client talks over loopback-free
# veth/TAP only when afpacket is used; with TAP both ends are in this namespace).
ip netns exec "$ns" "$ex/ipkit-echo" --io "$spec" --ip 10.77.0.2/24 --port 7 2>/dev/null &
pids+=($!)
sleep 0.3
for _ in $(seq 50); do in_ns ping -c 1 -W 1 10.77.0.2 >/dev/null 2>&1 && break; sleep 0.1; done
ipk=$(in_ns timeout 20 python3 bench/pingpong.py client 10.77.0.2 7 "$secs" 1)
ip netns exec "$ns" python3 bench/pingpong.py server 10.77.0.1 7007 &
pids+=($!)
sleep 0.3
lin=$(in_ns timeout 20 python3 bench/pingpong.py client 10.77.0.1 7007 "$secs" 1)

echo
echo "demo: 1-byte ping-pong, 1 connection, ${secs}s each (client: Linux, python epoll)"
printf '  %-34s %10s %9s %9s\n' server requests/s p50_us p99_us
read -r r p50 p99 <<<"$ipk"
printf '  %-34s %10s %9s %9s\n' "ipkit-echo over $kind" "$r" "$p50" "$p99"
read -r r p50 p99 <<<"$lin"
printf '  %-34s %10s %9s %9s\n' "Linux epoll server (same netns)" "$r" "$p50" "$p99"
echo
echo "demo: ok (namespace $ns removed on exit)"
