#!/bin/sh
# A TCP echo through ipkitd over TAP next to the same exchange on Linux kernel
# sockets, in one run (issue 17's last figure): 1-byte request/response at 1 and 32
# connections against one Linux echo server (ipkit-bench-linux in server mode).
#   ipkitd side: svc_tool rr (libipkit-client, spinning) -> ipkitd -> TAP -> Linux
#   Linux side:  ipkit-bench-linux --busy-poll in a second namespace -> veth -> Linux
#   sudo tests/svc/echo_figures.sh [BUILD] [SECONDS]      root; ~4 x SECONDS + 5 s
# IPKITD_ARGS adds ipkitd options (e.g. --busy-poll); RR_MODE=sleep makes the
# ipkitd-side client sleep on its futex instead of spinning.
# Everything lives in two private namespaces (ipk<hex>s, ipk<hex>c), removed on exit.
set -eu
B=${1:-build}
SECS=${2:-3}
tag=ipk$(od -An -N2 -tx1 /dev/urandom | tr -d ' \n')
S=${tag}s
C=${tag}c
TMP=$(mktemp -d /tmp/ipkecho.XXXXXX)
PIDS=""
cleanup() {
	for p in $PIDS; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	ip netns del "$S" 2>/dev/null || true
	ip netns del "$C" 2>/dev/null || true
	rm -rf "$TMP"
}
trap cleanup EXIT INT TERM
ip netns add "$S"
ip netns add "$C"
ip -n "$S" link set lo up
ip -n "$C" link set lo up
ip -n "$S" tuntap add dev "${tag}k" mode tap vnet_hdr
ip -n "$S" addr add 10.77.1.1/24 dev "${tag}k"
ip -n "$S" link set "${tag}k" up
ip -n "$S" link add "${tag}v" type veth peer name "${tag}w" netns "$C"
ip -n "$S" addr add 10.77.2.1/24 dev "${tag}v"
ip -n "$S" link set "${tag}v" up
ip -n "$C" addr add 10.77.2.2/24 dev "${tag}w"
ip -n "$C" link set "${tag}w" up
ip netns exec "$S" "$B/bench/ipkit-bench-linux" -p 10000 >"$TMP/server.log" 2>&1 &
PIDS="$PIDS $!"
ip netns exec "$S" "$B/svc/ipkitd" --io "tap:${tag}k,offload=1" --ip 10.77.1.2/24 \
	--socket "$TMP/s" ${IPKITD_ARGS:-} 2>"$TMP/ipkitd.log" &
PIDS="$PIDS $!"
i=0
while [ ! -S "$TMP/s" ] && [ $i -lt 100 ]; do sleep 0.05; i=$((i + 1)); done
sleep 0.5
echo "# $(date -u +%FT%TZ) $(uname -r) $(nproc) CPUs, ${SECS} s per cell"
for c in 1 32; do
	echo "## ipkitd over TAP, svc_tool rr, $c connection(s)"
	timeout $((SECS + 30)) "$B/tests/svc/svc_tool" --socket "$TMP/s" rr 10.77.1.1 10000 "$c" "$SECS" ${RR_MODE:-}
	echo "## Linux kernel sockets over veth, ipkit-bench-linux --busy-poll, $c connection(s)"
	timeout $((SECS + 30)) ip netns exec "$C" "$B/bench/ipkit-bench-linux" -s 10.77.2.1 \
		-p 10000 -c "$c" -t "$SECS" --busy-poll | tail -4
done
