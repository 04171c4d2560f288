#!/usr/bin/env bash
# One-connection bulk, ipkit over tap against Linux over veth, side by side (issue 4's
# "bulk over tap with offloads on at least Linux's"), with the cost of each side: a
# benchmark run, not a test.
#
#   bash bench/tap_bulk.sh [BUILD_DIR] [SECONDS] [ROUNDS]      (root; default build 10 3)
#
# The two pairs are set up as bench/io_pairs.sh's "tap" and "linux" bulk rows: two TAP
# devices (IFF_VNET_HDR, offloads on) joined by a bridge with an ipkit-bench at each
# (client --zerocopy -g 2 -l 65536, both --tcp-buf 2097152), and a veth pair (MTU
# $MTU, default 3822 as in docs/io-figures.md) between two namespaces with the Linux
# twin at each end; client pinned to CPU 0, server to CPU 1. ROUNDS alternate the
# pairs (ipkit, Linux, ipkit, ...) so both see the same machine. Per cell:
#   Gbit/s       the client's figure over the run (bench_summary.py)
#   CPU s/GB     CPU time (user + system, /proc/PID/stat) of the sender and of the
#                receiver per GB carried, over the middle of the cell: less noisy
#                than Gbit/s on a shared machine, and what bounds a quiet run
#   frame KB     bytes per frame the sender handed its device (TSO/GSO frames: the
#                device's own counters, a 64 KiB frame counts once)
#   frames/ACK   data frames per frame sent back (the receiver's ACKs)
# Everything is named itb<4 hex>... and removed on exit, also on failure or Ctrl-C.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
. bench/bulk_lib.sh
bulk_args tap_bulk 3822 "$@"
bulk_netns itb
bulk_tap_bridge
bulk_linux_link 10.80.0

tck=$(getconf CLK_TCK)
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat" 2>/dev/null || echo 0; }
# counter NS DEV NAME: a device counter (rx_packets, ...) seen from inside NS
counter() { ip netns exec "$1" cat "/sys/class/net/$2/statistics/$3"; }
# The kernel's view: what the sender wrote is rx on its device (tap) or tx on its
# veth end; what the receiver sent back likewise.
frames() { # kind -> "data_frames data_bytes back_frames"
	case $1 in
	ipkit) echo "$(counter "$ns" "${tag}t2" rx_packets) $(counter "$ns" "${tag}t2" rx_bytes)" \
		"$(counter "$ns" "${tag}t1" rx_packets)" ;;
	linux) echo "$(counter "$ns" "${tag}c" tx_packets) $(counter "$ns" "${tag}c" tx_bytes)" \
		"$(counter "$ns2" "${tag}d" tx_packets)" ;;
	esac
}

cell() { # kind
	local sp cp s0 s1 c0 c1 t0 t1 f0 f1 g
	if [ "$1" = ipkit ]; then
		ip netns exec "$ns" taskset -c 1 "$B" --io "tap:${tag}t1" --ip 10.9.0.1/24 -p 7 -g 2 \
			--tcp-buf 2097152 >/dev/null 2>&1 &
	else
		ip netns exec "$ns2" taskset -c 1 "$L" --ip 10.80.0.2 -p 7 -g 2 >/dev/null 2>&1 &
	fi
	sp=$! # ip netns exec and taskset exec: the bench's own PID
	pids+=("$sp")
	sleep 0.5
	if [ "$1" = ipkit ]; then
		ip netns exec "$ns" taskset -c 0 "$B" --io "tap:${tag}t2" --ip 10.9.0.2/24 -s 10.9.0.1 -p 7 \
			-t "$secs" --json -c 1 -l 65536 -g 2 --zerocopy --tcp-buf 2097152 \
			>"$tmpd/out" 2>"$tmpd/err" &
	else
		ip netns exec "$ns" taskset -c 0 "$L" -s 10.80.0.2 -p 7 -t "$secs" --json -c 1 -l 65536 -g 2 \
			>"$tmpd/out" 2>"$tmpd/err" &
	fi
	cp=$!
	pids+=("$cp")
	# the middle of the run: past the client's warm-up and slow start, before its end
	sleep 1.5
	s0=$(cpu_ticks "$sp"); c0=$(cpu_ticks "$cp"); f0=$(frames "$1"); t0=$(date +%s%N)
	sleep $((secs - 3))
	s1=$(cpu_ticks "$sp"); c1=$(cpu_ticks "$cp"); f1=$(frames "$1"); t1=$(date +%s%N)
	wait "$cp" || true
	unset 'pids[-1]'
	kill "$sp" 2>/dev/null || true
	wait "$sp" 2>/dev/null || true
	unset 'pids[-1]'
	g=$(python3 bench/bench_summary.py <"$tmpd/out" | awk '{print $4}')
	awk -v k="$1" -v g="${g:-0}" -v s=$((s1 - s0)) -v c=$((c1 - c0)) -v hz="$tck" \
		-v dt=$((t1 - t0)) -v f0="$f0" -v f1="$f1" 'BEGIN {
		split(f0, a, " "); split(f1, b, " ")
		nf = b[1] - a[1]; nb = b[2] - a[2]; na = b[3] - a[3]
		gb = nb / 1e9; if (gb <= 0) gb = 1e-9
		printf "| %s | %.2f | %.3f / %.3f | %.0f / %.0f | %.1f | %.2f |\n", k, g,
			c / hz / gb, s / hz / gb, c / hz / (dt / 1e9) * 100, s / hz / (dt / 1e9) * 100,
			nf ? nb / nf / 1000 : 0, na ? nf / na : 0 }'
}

echo "tap_bulk: $(date -u '+%F %H:%M') UTC, kernel $(uname -r), load $(cut -d' ' -f1-3 /proc/loadavg)," \
	"${secs} s cells, veth MTU $mtu, commit $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
echo
echo "| pair | Gbit/s | CPU s/GB sender / receiver | CPU % sender / receiver | frame KB | frames/ACK |"
echo "|---|---|---|---|---|---|"
for ((r = 0; r < rounds; r++)); do
	cell ipkit
	cell linux
done
echo
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
