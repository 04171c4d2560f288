#!/usr/bin/env bash
# One-connection bulk, ipkit over afxdp (multi-buffer above MTU 3822) against Linux
# over veth at the same MTU, side by side, with the CPU cost of each side: a benchmark
# run, not a test (issue 4's "bulk over afxdp at least half of Linux's veth figure").
#
#   [MTU=N] bash bench/afxdp_bulk.sh [BUILD_DIR] [SECONDS] [ROUNDS]
#                                   (root; defaults build 10 3, MTU 61422)
#
# Default MTU 61422, the largest afxdp carries (16 multi-buffer 4 KiB UMEM frames less
# 256 bytes of XDP headroom each and 18 of Ethernet + VLAN): Linux's sender hands veth
# 64 KiB GSO skbs whatever the MTU, while AF_XDP in copy mode has no segmentation
# offload, so every per-frame cost (an skb built and freed, a generic XDP run, a
# descriptor chain) is paid per MTU-sized frame; at 61422 both senders move frames of
# about the same size. Both rows run at the same MTU. docs/io-figures.md has the rows
# at 9000 and 32000 as well ("AF_XDP bulk: ...").
#
# Pairs as bench/io_pairs.sh's bulk rows: a veth pair at MTU N with an ipkit-bench on
# each end (afxdp, frame=4096, sg=1 above 3822; skb and drv XDP; client --zerocopy -g 2
# -l 65536, both --tcp-buf 2097152), and a veth pair between two namespaces with the
# Linux twin at each end; client pinned to CPU 0, server to CPU 1. ROUNDS alternate
# the rows so all see the same machine. Per cell: Gbit/s (the client's figure) and
# CPU us per MB carried (sum of /proc/PID/task/*/schedstat of the sender and of the
# receiver over the middle of the cell, bytes from the server device's counters):
# less noisy than Gbit/s on a shared machine, and what bounds a quiet run.
#
# ROWS="..." picks the rows (default "skb skb+rps drv linux linux+rps"): skb / drv
# (afxdp in that XDP mode), linux (the twin), and suffixes:
#   +rps  RPS on the pair's receiving veths: each one's rps_cpus names the CPU of the
#         process behind it (server CPU 1, client CPU 0), so a frame that veth_xmit
#         hands to netif_rx (skb XDP; Linux) is processed from the backlog of the
#         receiver's CPU: for skb XDP, the generic XDP program, its copy of the skb
#         (skb_pp_cow_data) and the copy into the peer's UMEM leave the sender's CPU.
#         Native XDP does not take that path (veth's NAPI runs where the sender is).
#   +bp   afxdp busy_poll=1 on both ends (see io/afxdp/afxdp.c: no effect on veth)
#   +sw   afxdp csum=0 on both ends: the core sums each segment, the backend copies it
#         (default: the backend sums while it copies into the UMEM frame)
# Everything is named ixm<4 hex>... and removed on exit, also on failure or Ctrl-C.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
. bench/bulk_lib.sh
bulk_args afxdp_bulk 61422 "$@"
[ "$mtu" -ge 576 ] && [ "$mtu" -le 61422 ] ||
	{ echo "afxdp_bulk: MTU=$mtu: afxdp carries 576..61422" >&2; exit 2; }
frame=""
[ "$mtu" -gt 1774 ] && frame=,frame=4096
[ "$mtu" -gt 3822 ] && frame=,frame=4096,sg=1
bulk_netns ixm
X ip link add "${tag}x1" type veth peer name "${tag}x2"
for d in x1 x2; do X ip link set "${tag}$d" mtu "$mtu"; X ip link set "${tag}$d" up; done
bulk_linux_link 10.81.0

# rps DEV NS MASK: RPS CPUs of DEV's one receive queue (0: off)
rps() { ip netns exec "$2" sh -c "echo $3 > /sys/class/net/$1/queues/rx-0/rps_cpus"; }
# rows_rps ROW: RPS as the row asks on both pairs' receiving ends
rows_rps() {
	local on=0 srv=0
	case $1 in *+rps*) on=1 ;; esac
	[ "$on" = 1 ] && srv=2
	rps "${tag}x1" "$ns" "$srv"; rps "${tag}d" "$ns2" "$srv"
	rps "${tag}x2" "$ns" "$on"; rps "${tag}c" "$ns" "$on"
}

# CPU ns so far of a process's threads (%.0f: mawk prints a sum above 2^31 as %g,
# which the shell's arithmetic refuses: "2.18349e+09: syntax error")
cpu_ns() { cat /proc/"$1"/task/*/schedstat 2>/dev/null | awk '{s += $1} END {printf "%.0f\n", s}'; }
rx_bytes() { # namespace device
	ip netns exec "$1" cat /proc/net/dev | awk -v d="$2:" '$1 == d {print $2}'
}

# cell ROW: start server and client, sample the middle of the run, print the row
cell() {
	local row=$1 srv cli dev sns s0 c0 b0 s1 c1 b1 mb g mode=${1%%+*} bp=""
	case $row in *+bp*) bp=,busy_poll=1 ;; esac
	case $row in *+sw*) bp=$bp,csum=0 ;; esac
	rows_rps "$row"
	case $mode in
	linux)
		ip netns exec "$ns2" taskset -c 1 "$L" --ip 10.81.0.2 -p 7 -g 2 >/dev/null 2>&1 &
		srv=$!; pids+=("$srv"); sleep 0.5
		ip netns exec "$ns" taskset -c 0 "$L" -s 10.81.0.2 -p 7 -t "$secs" --json -c 1 \
			-l 65536 -g 2 >"$tmpd/out" 2>/dev/null &
		cli=$!; pids+=("$cli"); dev=${tag}d; sns=$ns2 ;;
	*)
		ip netns exec "$ns" taskset -c 1 "$B" --io "afxdp:${tag}x1,mode=$mode$frame$bp" \
			--ip 10.9.0.1/24 -p 7 -g 2 --tcp-buf 2097152 >/dev/null 2>&1 &
		srv=$!; pids+=("$srv"); sleep 0.5
		ip netns exec "$ns" taskset -c 0 "$B" --io "afxdp:${tag}x2,mode=$mode$frame$bp" \
			--ip 10.9.0.2/24 -s 10.9.0.1 -p 7 -t "$secs" --json -c 1 -l 65536 -g 2 \
			--zerocopy --tcp-buf 2097152 >"$tmpd/out" 2>/dev/null &
		cli=$!; pids+=("$cli"); dev=${tag}x1; sns=$ns ;;
	esac
	sleep $((secs / 4))
	s0=$(cpu_ns "$srv"); c0=$(cpu_ns "$cli"); b0=$(rx_bytes "$sns" "$dev")
	sleep $((secs / 2))
	s1=$(cpu_ns "$srv"); c1=$(cpu_ns "$cli"); b1=$(rx_bytes "$sns" "$dev")
	wait "$cli" || true
	kill "$srv" 2>/dev/null || true
	wait "$srv" 2>/dev/null || true
	pids=()
	g=$(python3 bench/bench_summary.py <"$tmpd/out" 2>/dev/null | awk '{print $4}' || true)
	mb=$(( (b1 - b0) / 1000000 ))
	[ "$mb" -gt 0 ] || mb=1
	printf '| %s | %s | %d | %d |\n' "$row" "${g:-0}" $(( (c1 - c0) / 1000 / mb )) \
		$(( (s1 - s0) / 1000 / mb ))
}

echo "MTU $mtu, afxdp spec options mode=skb|drv$frame; ${secs} s cells, $rounds rounds;"
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "| row | Gbit/s | sender CPU us/MB | receiver CPU us/MB |"
echo "|---|---|---|---|"
for ((r = 0; r < rounds; r++)); do
	for row in ${ROWS:-skb skb+rps drv linux linux+rps}; do cell "$row"; done
done
echo
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
