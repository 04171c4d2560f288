#!/bin/sh
# The priority experiment on the wire (issue 17's figures): a level-0 TCP
# request/response through ipkitd over TAP, idle and while two level-2
# applications flood the same link with bulk transfers (FLOOD_MIB, default 512 MiB, each way each,
# SHA-256 checked), and the same request/response at level 2 under the flood (what
# the level buys). All against one Linux echo server (ipkit-bench-linux).
#   sudo tests/svc/prio_wire_figures.sh [BUILD] [SECONDS]      root; ~4 x SECONDS
# Everything lives in a private namespace (ipk<hex>p), removed on exit.
set -eu
B=${1:-build}
SECS=${2:-3}
FLOOD_MIB=${FLOOD_MIB:-512} # each flood outlasts the probe
# the flooding processes' CPU niceness: on a shared 2-CPU machine the probe's tail
# is otherwise the scheduler's (a flood client holds the CPU the probe needs for
# a time slice, ~4 ms), which no order inside ipkitd changes; 0 = as the probe
FLOOD_NICE=${FLOOD_NICE:-0}
# PROBE_SERVER=own: the probe talks to an echo server of its own (port 10001), so
# the flood's server (port 10000, at FLOOD_NICE too) cannot hold the probe's
# request behind the flood's reads and writes in its one event loop; the default
# (shared) puts both on one server, as before
PROBE_SERVER=${PROBE_SERVER:-shared}
# PIN=1: ipkitd on CPU 1, every other process of the experiment on CPU 0 (the
# thesis pinned its processes, section 6.1.2). Unpinned, a waking probe often lands
# on the CPU where ipkitd runs (the waker's: wake-affine) and, both at the same
# niceness, waits out ipkitd's time slice (up to ~1 ms) whatever ipkitd's levels do
PIN=${PIN:-0}
ON0=""
ON1=""
if [ "$PIN" = 1 ]; then
	ON0="taskset -c 0"
	ON1="taskset -c 1"
fi
tag=ipk$(od -An -N2 -tx1 /dev/urandom | tr -d ' \n')
S=${tag}p
TMP=$(mktemp -d /tmp/ipkprio.XXXXXX)
PIDS=""
cleanup() {
	for p in $PIDS; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	ip netns del "$S" 2>/dev/null || true
	rm -rf "$TMP"
}
trap cleanup EXIT INT TERM
ip netns add "$S"
ip -n "$S" link set lo up
ip -n "$S" tuntap add dev "${tag}k" mode tap vnet_hdr
ip -n "$S" addr add 10.78.1.1/24 dev "${tag}k"
ip -n "$S" link set "${tag}k" up
PPORT=10000
if [ "$PROBE_SERVER" = own ]; then
	ip netns exec "$S" $ON0 nice -n "$FLOOD_NICE" "$B/bench/ipkit-bench-linux" -p 10000 >"$TMP/server.log" 2>&1 &
	PIDS="$PIDS $!"
	PPORT=10001
fi
ip netns exec "$S" $ON0 "$B/bench/ipkit-bench-linux" -p "$PPORT" >"$TMP/pserver.log" 2>&1 &
PIDS="$PIDS $!"
ip netns exec "$S" $ON1 "$B/svc/ipkitd" --io "tap:${tag}k,offload=1" --ip 10.78.1.2/24 \
	--socket "$TMP/s" --prio-uid "$(id -u):0" ${IPKITD_ARGS:-} 2>"$TMP/ipkitd.log" &
PIDS="$PIDS $!"
i=0
while [ ! -S "$TMP/s" ] && [ $i -lt 100 ]; do sleep 0.05; i=$((i + 1)); done
sleep 0.5
T="$B/tests/svc/svc_tool"
echo "# $(date -u +%FT%TZ) $(uname -r) $(nproc) CPUs, ${SECS} s per cell, probe server $PROBE_SERVER, flood nice $FLOOD_NICE, pinned $PIN"
echo "## level 0 rr, idle"
SVC_TOOL_PRIO=1 timeout $((SECS + 30)) $ON0 "$T" --socket "$TMP/s" rr 10.78.1.1 "$PPORT" 1 "$SECS" sleep
flood() {
	t0=$(date +%s.%N)
	for k in 1 2; do
		SVC_TOOL_PRIO=3 timeout 300 $ON0 nice -n "$FLOOD_NICE" "$T" --socket "$TMP/s" connect 10.78.1.1 10000 \
			$((FLOOD_MIB << 20)) >"$TMP/flood$k.out" 2>&1 &
		eval "F$k=\$!"
	done
	sleep 0.3
	echo "## $1 rr under a level-2 flood (2 x $FLOOD_MIB MiB each way)"
	SVC_TOOL_PRIO=$2 timeout $((SECS + 30)) $ON0 "$T" --socket "$TMP/s" rr 10.78.1.1 "$PPORT" 1 "$SECS" sleep
	wait "$F1" "$F2" || true
	echo "flood: done in $(echo "$(date +%s.%N) - $t0" | bc) s"
	cat "$TMP/flood1.out" "$TMP/flood2.out"
}
flood "level 0" 1
flood "level 2" 3
