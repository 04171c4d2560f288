#!/bin/sh
# Zero-copy SEND vs copy through ipkitd over TAP (issue 17), in one run: the same
# svc_tool transfer with ipkitd --tx-zc 0 and --tx-zc 1, alternating, and the
# daemon's CPU time (utime + stime, /proc/PID/stat) per MiB moved.
#   bulk: svc_tool connect -> ipkitd -> TAP -> a Linux sink (reads, discards)
#   echo: svc_tool connect -> ipkitd -> TAP -> a Linux echo (both directions; the
#         receive side copies in both modes)
#   sudo tests/svc/zc_figures.sh [BUILD] [MiB] [REPS]     root; a namespace ipk<hex>
# CALLGRIND=1 adds the daemon's instructions per byte sent (bulk), valgrind
# --tool=callgrind over two lengths (8 and 24 MiB): (I(24) - I(8)) / 16 MiB, so
# start-up and set-up cancel; --spin-us 0 there, so polling while idle counts little.
# Everything lives in one private namespace, removed on exit; processes ended by PID.
set -eu
B=${1:-build}
MIB=${2:-256}
REPS=${3:-3}
tag=ipk$(od -An -N2 -tx1 /dev/urandom | tr -d ' \n')
TMP=$(mktemp -d /tmp/ipkzc.XXXXXX)
PIDS=""
cleanup() {
	for p in $PIDS; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	ip netns del "$tag" 2>/dev/null || true
	rm -rf "$TMP"
}
trap cleanup EXIT INT TERM
ip netns add "$tag"
ip -n "$tag" link set lo up
ip -n "$tag" tuntap add dev "${tag}k" mode tap vnet_hdr
ip -n "$tag" addr add 10.77.3.1/24 dev "${tag}k"
ip -n "$tag" link set "${tag}k" up
cat >"$TMP/peer.py" <<'PY'
import socket, sys, threading
def serve(port, echo):
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("0.0.0.0", port)); s.listen(16)
    def conn(c):
        while True:
            b = c.recv(1 << 18)
            if not b:
                break
            if echo:
                c.sendall(b)
        c.close()
    while True:
        c, _ = s.accept()
        threading.Thread(target=conn, args=(c,), daemon=True).start()
threading.Thread(target=serve, args=(9000, False), daemon=True).start()
serve(9001, True)
PY
ip netns exec "$tag" /usr/bin/python3 "$TMP/peer.py" &
PIDS="$PIDS $!"
ticks=$(getconf CLK_TCK)
# start_daemon ZC [WRAPPER...]: ipkitd on the TAP, $d its PID, ready to serve
start_daemon() {
	z=$1
	shift
	rm -f "$TMP/s"
	ip netns exec "$tag" "$@" "$B/svc/ipkitd" --io "tap:${tag}k,offload=1" \
		--ip 10.77.3.2/24 --socket "$TMP/s" --tx-zc "$z" ${DARGS:-} 2>"$TMP/d.log" &
	d=$!
	i=0
	while [ ! -S "$TMP/s" ] && [ $i -lt 600 ]; do sleep 0.05; i=$((i + 1)); done
	sleep 0.3
}
cpu() { awk '{print $14 + $15}' "/proc/$1/stat"; }
now_ms() { date +%s%3N; }
echo "# $(date -u +%FT%TZ) $(uname -r) $(nproc) CPUs, ${MIB} MiB per run, clock ${ticks} Hz"
echo "# kind  mode  MiB/s  daemon-CPU-ms/MiB  tx_zc  tx_copied  sends_zc  sends_copied"
r=0
while [ $r -lt "$REPS" ]; do
	for kind in bulk echo; do
		port=9000
		[ $kind = echo ] && port=9001
		for zc in 0 1; do
			start_daemon $zc
			c0=$(cpu $d)
			t0=$(now_ms)
			timeout 300 "$B/tests/svc/svc_tool" --socket "$TMP/s" connect 10.77.3.1 $port \
				$((MIB << 20)) >"$TMP/out"
			t1=$(now_ms)
			c1=$(cpu $d)
			kill $d
			wait $d 2>/dev/null || true
			awk -v k=$kind -v z=$zc -v mib="$MIB" -v ms=$((t1 - t0)) -v c=$((c1 - c0)) \
				-v hz="$ticks" '/^tx_zc/ { printf "%-5s %-5s %6.0f %8.3f  %s %s %s %s\n",
				k, z ? "zc" : "copy", mib * 1000 / ms, c * 1000 / hz / mib, $2, $4, $6, $8 }' \
				"$TMP/out"
		done
	done
	r=$((r + 1))
done

[ "${CALLGRIND:-0}" = 1 ] || exit 0
echo "# callgrind: daemon instructions per byte, bulk, (I(24 MiB) - I(8 MiB)) / 16 MiB"
DARGS="--spin-us 0"
for zc in 0 1; do
	for mib in 8 24; do
		start_daemon $zc valgrind --tool=callgrind --callgrind-out-file="$TMP/cg.$zc.$mib"
		timeout 600 "$B/tests/svc/svc_tool" --socket "$TMP/s" connect 10.77.3.1 9000 \
			$((mib << 20)) >"$TMP/out"
		kill $d
		wait $d 2>/dev/null || true
		grep -h '^summary:\|^totals:' "$TMP/cg.$zc.$mib" | head -1 | awk '{print $2}' \
			>"$TMP/ir.$zc.$mib"
	done
	awk -v z=$zc -v a="$(cat "$TMP/ir.$zc.8")" -v b="$(cat "$TMP/ir.$zc.24")" 'BEGIN {
		printf "%-5s instructions/byte %.3f  (I8 %d, I24 %d)\n", z ? "zc" : "copy",
		(b - a) / (16 * 1048576), a, b }'
done
