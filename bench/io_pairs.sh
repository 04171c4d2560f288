#!/usr/bin/env bash
# Issue 4's figures as the issue defines them (a benchmark run, not a test):
# ipkit <-> ipkit over each backend against Linux <-> Linux over veth, both ends pinned
# (client CPU 0, server CPU 1), every row measured in the same run.
#
#   ping-pong: 1-byte TCP requests/s and p50/p99 latency at 1 and 32 connections,
#              blocking and busy-poll compared like for like: ipkit-bench on both ends
#              (blocking: sleeps on the backend fd; --busy-poll: never sleeps) against
#              its twin ipkit-bench-linux on both ends (blocking: epoll_wait(1 ms);
#              --busy-poll: SO_BUSY_POLL + epoll_wait(0))
#   bulk:      one connection, Gbit/s: ipkit-bench -g 2 (burst, 64 KiB writes) ->
#              ipkit-bench server on each backend and the Linux twin over veth, plus
#              socat -> socat over the same veth (BULK bytes, wall clock)
#
# Links (all in namespaces of this run):
#   tap        two TAP devices (IFF_VNET_HDR) joined by a Linux bridge; "tap" keeps the
#              offloads (ipkit hands the kernel 64 KiB TSO frames), "tap,offload=0" not
#   afpacket   a veth pair, one ipkit on each end
#   afxdp      a veth pair, one ipkit on each end, copy mode (veth has no zero-copy),
#              generic (skb) and native (drv) XDP as separate rows
#   memlink    shared memory, no kernel on the data path
#   Linux      a veth pair between two namespaces, kernel TCP on both ends
#
#   [MTU=N] [SPIN_US=N] bench/io_pairs.sh [BUILD_DIR] [SECONDS] [BULK_BYTES] [OUT.md]
# SPIN_US (default 50): ipkit's blocking cells poll this long after their last traffic
# before sleeping (ipkit-bench --spin-us; 0: the pure event-driven loop).
# MTU (default 1500) is set on the afxdp and the Linux veth pairs, so those rows
# compare at the same MTU; above 1774 the afxdp rows use 4 KiB UMEM frames (frame=4096,
# MTU at most 3822), above 3822 also multi-buffer AF_XDP (sg=1: a frame spans up to 16
# UMEM frames, MTU at most 61422). tap and afpacket stay at 1500 (their 2 KiB pool
# buffers).
# Every cell records the run-queue wait of both pinned processes (field 2 of
# /proc/PID/schedstat, during the cell); a 1-min load above 0.5 before the run is
# warned about at the top of the output. Needs root. Everything it creates is named ipkI<4 hex>... and removed on exit, also
# on failure or Ctrl-C. With OUT.md (make io-figures passes docs/io-figures.md) the
# table is written there with the command, the kernel and the load averages.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
build=${1:-build}
secs=${2:-10}
bulk_bytes=${3:-1073741824}
out=${4:-}
mtu=${MTU:-1500}
spin_us=${SPIN_US:-50}
case $mtu$spin_us in
'' | *[!0-9]*) echo "io_pairs: MTU=$mtu / SPIN_US=$spin_us is not a number" >&2; exit 2 ;;
esac
if [ "$mtu" -lt 576 ] || [ "$mtu" -gt 61422 ]; then
	echo "io_pairs: MTU=$mtu: afxdp carries 576..61422 (16 multi-buffer 4 KiB UMEM frames" \
		"less 256 bytes of XDP headroom each and 18 of Ethernet + VLAN)" >&2
	exit 2
fi
xdp_frame=""
[ "$mtu" -gt 1774 ] && xdp_frame=,frame=4096
[ "$mtu" -gt 3822 ] && xdp_frame=,frame=4096,sg=1
bipk=$build/bench/ipkit-bench
blin=$build/bench/ipkit-bench-linux
for b in "$bipk" "$blin"; do
	[ -x "$b" ] || { echo "io_pairs: $b is not built (make)" >&2; exit 2; }
done
tag=ipkI$(od -An -N2 -tx1 /dev/urandom | tr -d ' \n')
ns=${tag}n  # every ipkit link, and the Linux client
ns2=${tag}p # the Linux server
ml=${tag}m
pids=()
tmpd=$(mktemp -d /tmp/io_pairs.XXXXXX)
cleanup() {
	local p
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
	ip netns del "$ns" 2>/dev/null || true
	ip netns del "$ns2" 2>/dev/null || true
	rm -f /dev/shm/ipkit-ml-"$ml"* 2>/dev/null || true
	rm -rf "$tmpd"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
. bench/bulk_lib.sh # X and Y (a command in ns, ns2), bulk_tap_bridge
have() { grep -q "$1" "$build/compile_commands.json" 2>/dev/null; }
load() { cut -d' ' -f1-3 /proc/loadavg; }
load_before=$(load)
load_warning=""
if awk -v l="${load_before%% *}" 'BEGIN {exit !(l > 0.5)}'; then
	load_warning="WARNING: the 1-min load before the run was ${load_before%% *} (> 0.5): other
work shared the CPUs, so these figures are not from a quiet machine (see each cell's
run-queue wait)."
	echo "$load_warning" >&2
fi

# ---------------------------------------------------------------- topology
ip netns add "$ns"; ip netns add "$ns2"
X ip link set lo up; Y ip link set lo up
for n in "$ns" "$ns2"; do
	ip netns exec "$n" sysctl -qw net.ipv6.conf.all.disable_ipv6=1
	ip netns exec "$n" sysctl -qw net.ipv6.conf.default.disable_ipv6=1
done
# tap: two TAP devices on a bridge (bench/bulk_lib.sh)
bulk_tap_bridge
# afpacket and afxdp: a veth pair each, no kernel addresses
X ip link add "${tag}a1" type veth peer name "${tag}a2"
X ip link add "${tag}x1" type veth peer name "${tag}x2"
for d in x1 x2; do X ip link set "${tag}$d" mtu "$mtu"; done
for d in a1 a2 x1 x2; do X ip link set "${tag}$d" up; done
# Linux <-> Linux
X ip link add "${tag}c" type veth peer name "${tag}d" netns "$ns2"
X ip link set "${tag}c" mtu "$mtu"; Y ip link set "${tag}d" mtu "$mtu"
X ip addr add 10.80.0.1/24 dev "${tag}c"; X ip link set "${tag}c" up
Y ip addr add 10.80.0.2/24 dev "${tag}d"; Y ip link set "${tag}d" up

# ---------------------------------------------------------------- helpers
SRV_PIN="taskset -c 1"
CLI_PIN="taskset -c 0"

# kind -> "server-spec client-spec" (ipkit), for the variant (busy-poll memlink spins too)
specs() { # kind variant
	local mbp=""
	[ "$2" = busy-poll ] && mbp=,busypoll=1
	case $1 in
	tap) echo "tap:${tag}t1 tap:${tag}t2" ;;
	tap-off) echo "tap:${tag}t1,offload=0 tap:${tag}t2,offload=0" ;;
	afpacket) echo "afpacket:${tag}a1 afpacket:${tag}a2" ;;
	afxdp-skb) echo "afxdp:${tag}x1,mode=skb$xdp_frame afxdp:${tag}x2,mode=skb$xdp_frame" ;;
	afxdp-drv) echo "afxdp:${tag}x1,mode=drv$xdp_frame afxdp:${tag}x2,mode=drv$xdp_frame" ;;
	memlink) echo "memlink:$ml,role=a$mbp memlink:$ml,role=b$mbp" ;;
	esac
}
label() {
	case $1 in
	tap) echo "ipkit over tap (bridge)" ;;
	tap-off) echo "ipkit over tap,offload=0 (bridge)" ;;
	afpacket) echo "ipkit over afpacket (veth)" ;;
	afxdp-skb) echo "ipkit over afxdp, skb XDP (veth)" ;;
	afxdp-drv) echo "ipkit over afxdp, drv XDP (veth)" ;;
	memlink) echo "ipkit over memlink" ;;
	linux) echo "Linux over veth (epoll)" ;;
	linux-socat) echo "Linux over veth, socat -> socat" ;;
	esac
}

# ipkit-bench(-linux) --json on stdin -> "req/s p50 p99 Gbit/s" (bench/bench_summary.py)
summary() { python3 "$root/bench/bench_summary.py"; }

# Run-queue wait so far of a process in ns (field 2 of /proc/PID/task/*/schedstat,
# summed over its threads: the benches may run their loop off the main thread); 0
# when it is gone.
# (%.0f: mawk prints a number above 2^31 as %g, 6 digits)
rq_ns() {
	{ cat /proc/"$1"/task/*/schedstat 2>/dev/null || true; } |
		awk '{s += $2} END {printf "%.0f\n", s}'
}
# The server of the cell: the last process started (ip netns exec execs it in place).
srv_rq() { rq_ns "${pids[-1]}"; }
# Run a client (pinned, in a namespace: the arguments are the whole command line) with
# its stdout in $tmpd/out, bounded by secs + 30 s. Its run-queue wait is sampled every
# 0.1 s while it runs (it is gone once it exits), the last sample goes to $tmpd/rq.
run_client() {
	local cpid i
	: >"$tmpd/out"
	echo 0 >"$tmpd/rq"
	"$@" >"$tmpd/out" &
	cpid=$!
	for ((i = 0; i < (secs + 30) * 10; i++)); do
		kill -0 "$cpid" 2>/dev/null || break
		rq_ns "$cpid" >"$tmpd/rq.new" && mv "$tmpd/rq.new" "$tmpd/rq"
		sleep 0.1
	done
	kill "$cpid" 2>/dev/null || true
	wait "$cpid"
}

# The ipkit server on one side (in the background, pinned); its address is 10.9.0.1.
# Loop flags for a variant, the same for ipkit-bench and its Linux twin: busy-poll never
# sleeps; blocking sleeps (ipkit on the backend's fd, the twin in epoll_wait), after
# polling up to SPIN_US (default 50) us past its last traffic (--spin-us: a halted vCPU
# takes tens of us to wake; SPIN_US=0 sleeps at once).
loop_args() { # variant
	if [ "$1" = busy-poll ]; then echo --busy-poll; else echo --spin-us "$spin_us"; fi
}
ipk_server() { # kind variant [extra args]
	local s bp
	read -r s _ <<<"$(specs "$1" "$2")"
	bp=$(loop_args "$2")
	shift 2
	ip netns exec "$ns" $SRV_PIN "$bipk" --io "$s" --ip 10.9.0.1/24 -p 7 $bp "$@" \
		>/dev/null 2>&1 &
	pids+=($!)
	sleep 0.5
}
ipk_client() { # kind variant args...
	local c bp
	read -r _ c <<<"$(specs "$1" "$2")"
	bp=$(loop_args "$2")
	shift 2
	run_client ip netns exec "$ns" $CLI_PIN "$bipk" --io "$c" --ip 10.9.0.2/24 $bp \
		-s 10.9.0.1 -p 7 -t "$secs" --json "$@"
	echo "$(summary <"$tmpd/out") $(cat "$tmpd/rq")"
}
lx_server() { # variant [extra args]
	local bp
	bp=$(loop_args "$1")
	shift
	ip netns exec "$ns2" $SRV_PIN "$blin" --ip 10.80.0.2 -p 7 $bp "$@" >/dev/null 2>&1 &
	pids+=($!)
	local i
	for i in $(seq 50); do
		X timeout 1 bash -c "exec 3<>/dev/tcp/10.80.0.2/7" 2>/dev/null && return 0
		sleep 0.1
	done
}
lx_client() { # variant args...
	local bp
	bp=$(loop_args "$1")
	shift
	run_client ip netns exec "$ns" $CLI_PIN "$blin" -s 10.80.0.2 -p 7 -t "$secs" --json \
		$bp "$@"
	echo "$(summary <"$tmpd/out") $(cat "$tmpd/rq")"
}
stop_last() {
	kill "${pids[-1]}" 2>/dev/null || true
	wait "${pids[-1]}" 2>/dev/null || true
	unset 'pids[-1]'
	rm -f /dev/shm/ipkit-ml-"$ml"* 2>/dev/null || true
}
cell() { awk '{printf "%s / %s / %s", $1, $2, $3}' <<<"$1"; }
# "server / client" run-queue wait in ms: server from two samples (n/a when it exited
# first, as socat's does), client from field 5 of the result
rqcell() { # srv_before srv_after result
	awk -v a="$1" -v b="$2" -v c="$(awk '{print $5}' <<<"$3")" \
		'BEGIN {if (b < a) printf "n/a"; else printf "%.1f", (b - a) / 1e6
		        printf " / %.1f", c / 1e6}'
}

pp_row() { # kind variant
	local kind=$1 var=$2 r1 r32 s0 s1 s2
	local -a client=(ipk_client "$kind" "$var")
	if [ "$kind" = linux ]; then
		lx_server "$var"
		client=(lx_client "$var")
	else
		ipk_server "$kind" "$var"
	fi
	s0=$(srv_rq)
	r1=$("${client[@]}" -c 1 -l 1 -g 1 || echo "0 0 0 0 0")
	s1=$(srv_rq)
	r32=$("${client[@]}" -c 32 -l 1 -g 1 || echo "0 0 0 0 0")
	s2=$(srv_rq)
	stop_last
	printf '| %s | %s | %s | %s | %s | %s |\n' "$(label "$kind")" "$var" "$(cell "$r1")" \
		"$(cell "$r32")" "$(rqcell "$s0" "$s1" "$r1")" "$(rqcell "$s1" "$s2" "$r32")"
}

# Every ipkit bulk row sends with --zerocopy (slices of one pool buffer, ipk_tcp_send):
# the backend's copy (the kernel's write for tap, the UMEM/ring copy for afxdp,
# afpacket, memlink) is then the only one, as the Linux twin's send() copies once. Both
# ends take 2 MiB buffers (--tcp-buf; Linux autotunes to several MiB): with the core's
# 256 KiB default only a few frames are in flight and every ACK wakes the sender.
bulk_buf() { case $1 in linux*) ;; *) echo --tcp-buf 2097152 ;; esac; }
bulk_zc() { case $1 in linux*) ;; *) echo --zerocopy $(bulk_buf "$1") ;; esac; }

bulk_row() { # kind
	local r t0 t1 s0 s1
	case $1 in
	linux)
		lx_server blocking -g 2
		s0=$(srv_rq)
		r=$(lx_client blocking -c 1 -l 65536 -g 2 || echo "0 0 0 0 0") ;;
	linux-socat)
		ip netns exec "$ns2" $SRV_PIN socat -u TCP-LISTEN:5009,reuseaddr OPEN:/dev/null &
		pids+=($!); sleep 0.3
		s0=$(srv_rq)
		t0=$(date +%s%N)
		run_client ip netns exec "$ns" $CLI_PIN socat -u \
			OPEN:/dev/zero,readbytes="$bulk_bytes" \
			"TCP:10.80.0.2:5009,retry=20,interval=0.1" || true
		t1=$(date +%s%N)
		r="0 0 0 $(awk -v ns=$((t1 - t0)) -v b="$bulk_bytes" \
			'BEGIN {printf "%.2f", b * 8 / ns}') $(cat "$tmpd/rq")" ;;
	*)
		ipk_server "$1" blocking -g 2 $(bulk_buf "$1")
		s0=$(srv_rq)
		r=$(ipk_client "$1" blocking -c 1 -l 65536 -g 2 $(bulk_zc "$1") || echo "0 0 0 0 0") ;;
	esac
	s1=$(srv_rq)
	stop_last
	printf '| %s | %s | %s |\n' "$(label "$1")" "$(awk '{print $4}' <<<"$r")" \
		"$(rqcell "$s0" "$s1" "$r")"
}

# ---------------------------------------------------------------- run
kinds=(tap afpacket)
have IPK_IO_HAVE_AFXDP && kinds+=(afxdp-skb afxdp-drv)
have IPK_IO_HAVE_MEMLINK && kinds+=(memlink)
kinds+=(linux)
# IO_PAIRS_KINDS="afxdp-skb linux", IO_PAIRS_BULK_KINDS="afxdp-skb linux linux-socat"
# and IO_PAIRS_BULK=0 narrow a run (side-by-side checks of one change); the default is
# every row.
[ -n "${IO_PAIRS_KINDS:-}" ] && read -r -a kinds <<<"$IO_PAIRS_KINDS"
mtu_line() {
	local fr=2048 sg=""
	[ -n "$xdp_frame" ] && fr=4096
	[ "$mtu" -gt 3822 ] && sg=", multi-buffer (sg=1: a frame spans several of them)"
	echo "MTU: $mtu on the afxdp and the Linux veth pairs (afxdp with $fr-byte UMEM"
	echo "frames$sg); tap and afpacket at 1500."
}
table() {
	mtu_line
	echo
	echo "Ping-pong, 1-byte TCP, ${secs} s per cell, both ends pinned (client CPU 0, server"
	echo "CPU 1); requests/s / p50 µs / p99 µs, and each cell's run-queue wait (ms the"
	echo "server / the client were runnable but not running, /proc/PID/schedstat):"
	echo
	echo "| link | variant | 1 connection | 32 connections | wait ms, 1 conn | wait ms, 32 conns |"
	echo "|---|---|---|---|---|---|"
	for var in blocking busy-poll; do
		for k in "${kinds[@]}"; do pp_row "$k" "$var"; done
	done
	[ "${IO_PAIRS_BULK:-1}" = 0 ] && return
	echo
	echo "One-connection bulk, blocking, pinned; ipkit-bench -g 2 -l 65536 for ${secs} s"
	echo "(sender's Gbit/s), socat for $bulk_bytes bytes (wall clock); run-queue wait in ms,"
	echo "server / client:"
	echo
	echo "| link | Gbit/s | wait ms |"
	echo "|---|---|---|"
	local b bk=(tap tap-off afpacket afxdp-skb afxdp-drv memlink linux linux-socat)
	[ -n "${IO_PAIRS_BULK_KINDS:-}" ] && read -r -a bk <<<"$IO_PAIRS_BULK_KINDS"
	for b in "${bk[@]}"; do
		case $b in
		afxdp-*) have IPK_IO_HAVE_AFXDP || continue ;;
		memlink) have IPK_IO_HAVE_MEMLINK || continue ;;
		esac
		bulk_row "$b"
	done
}
# What the profiles of the afxdp rows showed (static text: it describes the code, not
# this run).
notes() {
	cat <<'EOT'
## What limits the afxdp rows (profiles, 2026-11-22, load 8-13)

- **Kicks.** `strace -c` of an ipkit-bench server over afxdp (skb), 32 connections:
  2.0 `sendto` per request. The backend kicked in tx_burst and again in flush, and the
  node flushed after every `ipk_tcp_write` made inside the payload callback. Now the
  node flushes once per `ipk_run` round and the backend kicks once per flush: 0.047
  `sendto` per request (about 21 replies a kick). Copy-mode `sendto` sends at most 32
  descriptors (the kernel's TX_BATCH_SIZE, EAGAIN when more are left), so a flush
  kicks until the kernel took the whole burst; before, of a 200-frame burst 64 left and
  the rest waited for the next round (tests/afxdp: `*_burst_of_200_leaves_with_one_flush`,
  tests/runtime/test_node_flush). Side by side, 3 s cells, load 8-15: 32 connections
  blocking 13754 -> 38252 req/s (Linux 11983 / 12430 in the same runs).
- **First touch.** `ipk_eth_parse` was 6% of the server's cpu-clock samples: the
  kernel copies the frame into the UMEM on the sending CPU, so the first read is a
  cross-CPU miss. rx_burst prefetches each frame: 0.5-0.8%.
- **Where the time goes now** (`perf record -e cpu-clock`, server, 32 connections):
  about 70% kernel, 28% ipkit (core, backend, application). The kernel part is the
  copy-mode path: `__xsk_generic_xmit` builds an skb per frame, `veth_xmit`, the
  receiving side's generic XDP has to `pskb_expand_head` (veth's skbs have less than
  XDP_PACKET_HEADROOM), `__xsk_rcv` copies into the peer's UMEM (`xp_alloc`, memcpy).
  Most of it runs in the sender's context (veth delivers through the sender's softirq).
- **Zero-copy:** veth has none (no XDP_ZEROCOPY support); `zc=1` fails with that
  message. Every row is copy mode.
- **Native vs generic XDP on veth:** native works when the receiving veth has an XDP
  program, which both ends have here: frames then go through veth's NAPI and
  `veth_xdp_rcv_skb` (a copy into a page when the skb's headroom is short). Redirecting
  *into* a veth (`ndo_xdp_xmit`) needs the peer to run XDP or GRO; AF_XDP's copy-mode
  transmit does not use it (it goes through `veth_xmit`). Neither mode was reliably
  faster in these runs.
- **XSK busy polling** (SO_PREFER_BUSY_POLL, SO_BUSY_POLL 20 us, SO_BUSY_POLL_BUDGET 64,
  `recvfrom` on an empty rx ring) was tried with native XDP: 1-connection p50 8.2 vs
  8.3 us, no measurable change at load 13; not kept.
- **Bulk** is bound by per-frame cost, not by CPU: the sender was busy about 12% of a
  3 s run (1.5k cpu-clock samples) at MTU 1500, while every 1448-byte segment pays the
  copy-mode path above; Linux moves 64 KiB GSO skbs over the same veth. `MTU=3822`
  runs the afxdp and Linux rows at MTU 3822 with 4 KiB UMEM frames (`frame=4096`):
  2.6x fewer frames per byte. In a side-by-side check (3 s cells, load 5) the afxdp
  skb row went 1.38 -> 2.72 Gbit/s and each side's CPU time per byte fell 2.4x.
  Beyond 3822: UMEM chunks above 4 KiB are refused by this kernel (EINVAL, also on
  hugepages), so above MTU 3822 the afxdp rows run multi-buffer AF_XDP (`sg=1`,
  XDP_USE_SG): a frame spans several 4 KiB UMEM frames, received as one packet chain,
  sent as a chain of descriptors (pieces that lie in the UMEM are read in place; the
  bench's --zerocopy payload lies in a pool of its own, so the backend copies each
  segment once into full 4 KiB frames, which also means fewer descriptors).
- **Multi-buffer** (profiles 2026-11-23, MTU 9000, load 13-18, `perf record -g -p`
  on each pinned process, cpu-clock): the sender spends about 77% in the kernel, 73%
  inside `sendto`: `__xsk_generic_xmit` builds an skb (a page allocated and copied per
  descriptor after the first), and veth delivers it through the sender's softirq to
  the receiver's generic XDP, which copies the non-linear skb once more
  (`skb_pp_cow_data`) before `__xsk_rcv` copies it into the receiver's UMEM (16% of
  the sender's samples are that last memcpy: the destination frames are cold) and
  wakes the receiver (`sock_def_readable`, 5%). Three copies per byte on the sending
  CPU, where Linux's sender makes one (the receiver's copy to user space runs on the
  receiving CPU). ipkit itself is about 23% of the sender. The receiver's largest
  item is the TCP checksum over the payload (`csum_host`, 35% of its samples: the
  first touch of data the other CPU wrote; AF_XDP in copy mode reports no checksum
  status, so ipkit verifies every byte). Bigger frames cut the per-frame part only:
  CPU time per MB moved (sum of /proc/PID/task/*/schedstat, same load) fell from
  about 1100 us (3822) to 950 (9000) and 650-750 (32000-48000) on the sender, against
  about 350 for the Linux twin's sender at any of these MTUs.
- **Threaded NAPI on the veth pairs** (tried 2026-11-23, kernel 6.18, MTU 9000,
  drv and skb XDP; not kept). veth has a NAPI instance only while GRO is on or an XDP
  program is attached; then `echo 1 > /sys/class/net/DEV/threaded` works (before, the
  write fails with EIO) and makes a kthread `napi/DEV-ID` that `taskset -p` can pin.
  It survives XDP attach/detach while GRO stays on. Catch: `veth_xmit` hands an skb to
  the peer's NAPI only if the *sending* veth has no TSO (`veth_skb_is_eligible_for_gro`;
  an XDP program on the peer turns the sender's TSO off, so drv rows qualify), else it
  takes `netif_rx` in the sender's softirq and the kthread stays idle (seen: 0 s of CPU
  in an skb run). With TSO off on every veth, GRO on, the kthread of each receiving
  veth pinned to its receiver's CPU, the profile does move: `__xsk_map_redirect`,
  `skb_pp_cow_data`, `veth_xdp_rcv_skb` and copies 2 and 3 leave the sender
  (`perf record -C 0,1`, drv: the kthread is 41% `memcpy`, `xp_alloc`,
  `skb_release_data`, `xsk_destruct_skb`), but nothing gets faster. Side by side
  (afxdp_bulk.sh with the experiment's `NAPI=both`, branch `afxnapi-exp`, 8 s cells,
  3 rounds alternating, load 5.7 -> 5.6, 2 cores shared with other builds and tests):
  Gbit/s skb off 4.66/4.56/3.49 vs threaded 3.35/2.06/1.35; drv off 3.68/3.98/3.47 vs
  threaded 1.62/0.88/1.16; Linux (GRO on) off 18.3/13.2/7.1 vs threaded (which needs
  TSO off, so GSO in software) 9.4/5.1. Sender CPU us/MB (its kthread included) did not
  fall: skb 754-985 off vs 744-1108 threaded, drv 1010-1410 vs 1055-1520, while the
  receiving kthread added 270-390 (skb) and 580-820 (drv) us/MB on the receiver's
  side. Copies 2 and 3 were cheap on the sender, right behind copy 1 with the data
  in its cache; on the other CPU they read it cold, and every frame now also wakes a
  kthread. And on this machine the receiver's CPU is not idle (other helpers' tests
  and compilers took ~70% of both CPUs in the profile), so a second runnable task
  there waits its turn. Best against best: ipkit skb off 4.56 vs Linux off 13.2 (0.35x,
  medians). Untested: a quiet machine, where the receiver's CPU is really half idle.
- **Busy polling, RPS, the checksum in the copy** (2026-11-23, `bench/afxdp_bulk.sh`
  rows): since Linux 6.13 a copy-mode AF_XDP socket has no NAPI id, so afxdp's
  `busy_poll=1` polls nothing on veth (`BusyPollRxPackets` stays 0). RPS on the
  receiving veth moves generic XDP and copies 2 and 3 to the receiver's CPU: sender CPU
  per MB 15-30% lower with skb XDP, but the receiver's CPU becomes the limit (skb+rps
  stayed at 5-6 Gbit/s where skb reached 11-15 in quieter rounds), so these rows run
  without it; afxdp_bulk.sh has both. afxdp finishes the TCP checksum while it copies a segment into the UMEM
  (`csum=1`, default) instead of the core summing it first. Sender CPU per byte falls
  with the MTU: within 10-25% of Linux's at 32000-61422, 1.4-2.4x at 9000.
EOT
}

# What the 32-connection afxdp cells' counters showed (static text, bench/pp32_runs.sh).
notes_pp32() {
	cat <<'EOT'
## The 32-connection afxdp cells: where the spread comes from (2026-11-23, afx32)

Tools: `ipkit-bench --stats` prints, at exit, one line per end with the loop's
counters per request (frames per non-empty rx poll, frames per transmit push, polls,
empty polls, sleeps, spin windows, pushes), the process's user and system CPU per
request (getrusage), TCP retransmits, and on AF_XDP the kernel's socket counters
(XDP_STATISTICS: rx drops, rx ring full, fill ring empty). `bench/pp32_runs.sh`
runs only the 32-connection afxdp cells and a Linux cell per round, N rounds, and
prints each cell with both ends' `--stats` and its ratio to the same round's Linux
cell, then min / median / max per cell; with BUILD_B or BLOCK_ARGS_B it alternates
two builds or two argument sets (A/B). For the quiet machine, one command:

    bash bench/pp32_runs.sh build 8 6      # 6 rounds, 8 s cells; the minimum is the figure
    VARIANTS=blocking BLOCK_ARGS_B="--spin-us 0" bash bench/pp32_runs.sh build 8 6  # A/B of the spin

What the counters show (this session, 6 rounds x 8 s and 4 x 6 s, load 4-11 from
other work, so absolute req/s are not comparable with the table above):

- **Per request, each end: ~1 frame received and ~1 sent** (no pure ACKs), user CPU
  0.5-0.9 us, system CPU 2.3-3.2 us. The system part is copy-mode AF_XDP's path,
  run in the *sender's* context for both ends of a frame (skb built and copied,
  veth, the receiver's XDP with its headroom copy, the copy into the peer's UMEM,
  the peer's wake-up; see the profiles below). At ~3 us of CPU per request per end,
  two saturated CPUs carry at most ~330-360k req/s: 3x Linux's 105-109k sits at
  that ceiling, so every idle microsecond on either CPU shows in the ratio.
- **Stalls under heavy load:** in every cell 0 XSK rx drops, 0 rx-ring-full, 0
  fill-ring-empty, 0 invalid descriptors: the XSK rings never lose or starve. But
  31 of 152 ends over four runs at load 4-12 counted TCP retransmits (11-384 per
  end), often in multiples of 32: all 32 connections' RTOs (200 ms minimum) firing
  together, i.e. the whole exchange stood still for at least 200 ms; the slowest
  cells (6-25k req/s) are among them. The 12 cells of the spin A/B below (load
  5.6-9.4) had none. Where the frames waited is not known yet: no XSK counter moved,
  and `/proc/net/softnet_stat` shows no backlog drops. Candidates: the veth's own
  drops, softirq work deferred to a starved ksoftirqd, and descriptors left in the
  AF_XDP tx ring when a kick is refused (EBUSY ends `xdp_kick`'s loop; nothing kicks
  the ring again until the node transmits, and a node waiting for answers does not).
  The last one is closed now: the node kicks once more before every sleep
  (`test_refused_kick_is_retried_before_sleeping`), but it was not the cause, or not
  the only one: a 3-round run after it (`bash bench/pp32_runs.sh build 8 3`, 06:28
  UTC, load 5.6) still had 2 of 12 ipkit cells with retransmits (64 on one end of a
  blocking drv and of a busy-poll skb cell), and its ratios ranged 1.25-5.11x
  (blocking skb 5.11 / 1.83 / 2.99, drv 4.86 / 1.25 / 2.87; busy-poll skb 3.56 /
  4.53 / 2.40, drv 6.05 / 2.96 / 2.05, rounds 1-3). `--stats` prints `retransmits`
  for both ends, so a quiet run shows whether the stalls remain without load.
- **Batches:** 5-18 frames per non-empty poll and per push; 0.05-0.2 `sendto` per
  request; a null system call costs 210-230 ns of CPU here. Batch sizes can be
  lopsided within a cell (server 5.7 vs client 17.7 frames per poll in one run):
  the sender's `sendto` delivers its burst one frame at a time, so a peer that
  reacts at once answers in small batches.
- **Sleeps:** blocking cells slept 0.005-0.025 times per request (1.5-8k sleeps/s),
  each one a `ppoll` for the sleeper and a wake-up inside the peer's `sendto`.
  This VM has no cpuidle driver (`/sys/devices/system/cpu/cpuidle/current_driver`
  is none; no guest halt-polling), so a vCPU with nothing to run halts at once and
  its wake-up goes through the host. Under load the CPUs never idle, so that latency
  could not be measured here; on a quiet machine every sleep pays it, and how often
  the ends sleep depends on the batch pattern a run falls into: a likely source of
  the quiet-machine spread, which the per-run `--stats` lines of `pp32_runs.sh`
  will show (sleeps/req against req/s).
- **Busy-poll under load:** both ends spinning on CPUs shared with other work fell to
  10-25k req/s (190-370 empty polls per request; the spinner burns the slices the
  peer or others need); Linux's busy-poll twin fell too (1-16k). Only a quiet run
  says anything about the busy-poll rows.

Change: **a spin window before sleeping** (`ipk_node_set_spin`, `ipkit-bench
--spin-us`, `io_pairs.sh` SPIN_US, default 50 us in the blocking cells). After
traffic, an event-driven node keeps polling up to 50 us past its last frame before
it sleeps; a peer in the middle of a burst answers well within that, so the node
does not halt. An idle node never spins (the window opens only within 50 us of
traffic): CPU of an idle server over 5 s after a run, `/proc/PID/stat` utime+stime,
6 ticks (10 ms each) with --spin-us 50 and 9 without, both from ipkit-bench's 1 ms
poll timeout; a blocking server now sleeps up to 100 ms when idle: 1 tick. Since 06:40 UTC the Linux twin's
blocking cells get the same window (`ipkit-bench-linux --spin-us`: `epoll_wait` with
timeout 0 until 50 us past its last event), so blocking compares like for like;
SPIN_US=0 gives the pure event-driven cells on both sides. (The A/B below ran before
that: its Linux column is the twin without the window.)

A/B, alternating, same build, `VARIANTS=blocking BLOCK_ARGS_B="--spin-us 0" bash
bench/pp32_runs.sh build 8 6` (05:37-05:41 UTC, load 5.6 -> 9.4), req/s:

| round | Linux | skb, spin 50 | skb, spin 0 | drv, spin 50 | drv, spin 0 |
|---|---|---|---|---|---|
| 1 | 30,750 | 84,497 | 71,573 | 87,151 | 83,545 |
| 2 | 26,598 | 53,039 | 45,717 | 68,804 | 48,427 |
| 3 | 22,707 | 71,524 | 63,056 | 75,452 | 59,478 |
| 4 | 15,883 | 58,524 | 53,122 | 80,235 | 64,433 |
| 5 | 22,048 | 62,907 | 59,004 | 57,999 | 56,913 |
| 6 | 14,354 | 57,828 | 59,982 | 63,012 | 56,145 |

The spin window won 11 of 12 pairs (and 6 of 8 in an earlier 4 x 6 s A/B at load
7-10); ratio to the round's Linux cell min / median: skb 1.99 / 3.00 with the spin,
1.72 / 2.73 without; drv 2.59 / 3.08 vs 1.82 / 2.67. Means over both ends: sleeps per
request 0.0124 -> 0.0056, user CPU per request 0.695 -> 0.739 us (the spin), system
CPU 2.772 -> 2.587 us (fewer sleeps and wake-ups), 81% of spin windows ended with
traffic. At this load the floor stays below 3x in both arms: the Linux cell and the
ipkit cells of a round get different shares of CPUs that other work keeps busy.
Whether the floor clears 3x on a quiet machine is for the command above to say;
nothing here measured that.
EOT
}

# The issue's targets read from the table on stdin.
targets() {
	python3 -c '
import re, sys
pp, bulk = {}, {}
for line in sys.stdin:
    c = [x.strip() for x in line.strip().strip("|").split("|")]
    if len(c) == 6 and "/" in c[2]:
        f = lambda s: [float(v) for v in s.split("/")]
        pp[(c[0], c[1])] = (f(c[2]), f(c[3]))
    elif len(c) == 3 and re.match(r"^[0-9.]+$", c[1]):
        bulk[c[0]] = float(c[1])
def ratio(a, b):
    return "%.2fx" % (a / b) if b else "n/a"
print("## Issue 4 targets, read from this run")
print()
print("| target | variant | ipkit | Linux | ratio | met? |")
print("|---|---|---|---|---|---|")
lx = "Linux over veth (epoll)"
for var in ("blocking", "busy-poll"):
    if (lx, var) not in pp:
        continue
    L = pp[(lx, var)][1]
    for k in ("ipkit over afxdp, skb XDP (veth)", "ipkit over afxdp, drv XDP (veth)",
              "ipkit over memlink"):
        if (k, var) not in pp:
            continue
        I = pp[(k, var)][1]
        ok = I[0] >= 3 * L[0] and I[2] <= L[2] / 2 and I[0] > 0
        print("| 32 conns, >= 3x req/s and <= 1/2 p99: %s | %s | %d req/s, p99 %d us | %d req/s, p99 %d us | %s, p99 %s | %s |"
              % (k, var, I[0], I[2], L[0], L[2], ratio(I[0], L[0]), ratio(I[2], L[2]),
                 "yes" if ok else "no"))
for k, want, name in (("ipkit over afxdp, skb XDP (veth)", 0.5, "bulk afxdp skb >= 1/2 Linux"),
                      ("ipkit over afxdp, drv XDP (veth)", 0.5, "bulk afxdp drv >= 1/2 Linux"),
                      ("ipkit over tap (bridge)", 1.0, "bulk tap (offloads) >= Linux")):
    for lk in (lx, "Linux over veth, socat -> socat"):
        if k in bulk and lk in bulk:
            print("| %s (vs %s) | blocking | %.2f Gbit/s | %.2f Gbit/s | %s | %s |"
                  % (name, lk, bulk[k], bulk[lk], ratio(bulk[k], bulk[lk]),
                     "yes" if bulk[k] >= want * bulk[lk] else "no"))
'
}
if [ -z "$out" ]; then
	[ -n "$load_warning" ] && { echo "$load_warning"; echo; }
	table
	echo
	echo "load average before: $load_before, after: $(load)"
	exit 0
fi
tbl=$(table)
load_after=$(load)
cmd="MTU=$mtu SPIN_US=$spin_us bash bench/io_pairs.sh $build $secs $bulk_bytes $out"
{
	echo "# io figures"
	echo
	[ -n "$load_warning" ] && { echo "**$load_warning**"; echo; }
	echo "Issue 4's figures, measured $(date -u '+%Y-%m-%d %H:%M UTC') on $(nproc) CPUs,"
	echo "kernel $(uname -r), with"
	echo
	echo "    $cmd"
	echo
	echo "(\`make io-figures\` runs it with the defaults). Load average (1/5/15 min) before"
	echo "the run: $load_before; after: $load_after. A benchmark run, not a test; all rows"
	echo "come from this one run, so compare rows, not runs."
	echo
	cat <<'EOT'
Links, all in network namespaces of the run:

- **tap**: two TAP devices (IFF_VNET_HDR), one per ipkit process, joined by a Linux
  bridge (not routed). "tap" keeps the offloads: ipkit hands the kernel 64 KiB TSO
  frames and the bridge passes them whole to the other TAP; "tap,offload=0" does not.
  The namespace's bridge-nf-call-* sysctls are 0 (no netfilter pass per bridged frame).
- **afpacket**: a veth pair, one ipkit on each end.
- **afxdp**: a veth pair, one ipkit on each end, AF_XDP in copy mode (veth has no
  zero-copy), once with generic (skb) and once with native (drv) XDP on both ends.
- **memlink**: shared memory between the two processes, no kernel on the data path.
- **Linux**: a veth pair between two namespaces, kernel TCP on both ends.

Ping-pong: `ipkit-bench` client and server (`-g 1 -l 1`) on both ends of each ipkit
link, its twin `ipkit-bench-linux` (same loop over epoll and kernel sockets, TCP_NODELAY)
on both ends of the Linux link. *blocking*: ipkit sleeps on the backend's fd until
traffic or its next timer, the twin in `epoll_wait` (1 ms), both after polling up to
SPIN_US µs past their last traffic (`--spin-us`; an idle end never spins); *busy-poll*: `--busy-poll` on
both ends: ipkit never sleeps (memlink with `busypoll=1`), the Linux twin sets
SO_BUSY_POLL and spins on `epoll_wait(0)`. Bulk: `ipkit-bench -g 2 -l 65536` (the
client writes whenever the window allows, the server consumes; every ipkit client
with `--zerocopy`, copying no payload byte in user space, both ipkit ends with
`--tcp-buf 2097152`), the sender's Gbit/s
over the run; the socat row times BULK bytes from /dev/zero to /dev/null.
`bench/io_figures.sh` is the older run with a Linux client against ipkit servers.
EOT
	echo
	echo "$tbl"
	echo
	targets <<<"$tbl"
	echo
	notes
	echo
	notes_pp32
} >"$out"
echo "io_pairs: wrote $out"
