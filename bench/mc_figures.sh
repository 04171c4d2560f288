#!/usr/bin/env bash
# Issue 5's figures (a benchmark run, not a test): the thread models of the multi-core
# runtime compared, ipkit-bench on both ends, the Linux twin in the same run.
#
#   ping-pong  1-byte TCP requests/s, p50 and p99 µs at 1 and 32 connections, per
#              thread model (unified, merge, split) on "1 core" and "2 cores" (below),
#              over memlink, DPDK net_memif and DPDK net_vhost <-> net_virtio_user
#   bulk       one connection, Gbit/s, ipkit-bench -g 2 (64 KiB writes) over DPDK
#              net_memif with offloads on and off (offload=0)
#   Linux      ipkit-bench-linux on both ends over a veth pair (epoll), same pinning,
#              ping-pong and bulk
#
# What "1 core" and "2 cores" mean (the server side; CPUs by taskset):
#   unified 1 core   -T 1: the single loop, app logic in the stack's callbacks, CPU 0
#   unified 2 cores  -T 2 --model unified: two workers and the software-steering reader
#                    thread (ipkit-bench uses IPK_STEER_SOFT), CPUs 0-1
#   merge   1 core   -T 1 --model merge: a networking and an application thread that
#                    share CPU 0 (rings + eventfd wake-ups)
#   merge   2 cores  -T 2 --model merge: two such pairs and the reader, CPUs 0-1
#   split   1 core   -T 1 --model split: the two busy-polling threads share CPU 0
#                    (split needs 2 threads: on 1 core they take turns)
#   split   2 cores  -T 1 --model split on CPUs 0-1: networking and application thread
#                    each on its own CPU (the split model as iip runs it)
# The client (ipkit-bench, one thread) runs on CPU 1 in 1-core cells and on CPUs 0-1
# in 2-core cells: this machine has 2 CPUs, so in 2-core cells client and server share
# them. The Linux rows pin the same way (server CPU 0 or 0-1, client CPU 1 or 0-1).
#
#   bench/mc_figures.sh [BUILD_DIR] [SECONDS] [OUT.md]     (make mc-figures)
# Needs root. Everything it creates is named ipkE<4 hex>... (namespaces, devices,
# memlink areas, DPDK EAL prefixes, sockets in a private temp dir) and is removed on
# exit, also on failure or Ctrl-C. SECONDS=1 gives a quick check of every cell.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
build=${1:-build}
secs=${2:-10}
out=${3:-}
bipk=$build/bench/ipkit-bench
blin=$build/bench/ipkit-bench-linux
for b in "$bipk" "$blin"; do
	[ -x "$b" ] || { echo "mc_figures: $b is not built (make)" >&2; exit 2; }
done
have_dpdk=0
grep -q "IPK_IO_HAVE_DPDK" "$build/compile_commands.json" 2>/dev/null && have_dpdk=1
tag=ipkE$(od -An -N2 -tx1 /dev/urandom | tr -d ' \n')
ns=${tag}n
ns2=${tag}p
tmp=$(mktemp -d /tmp/ipkE-mc.XXXXXX)
pids=()
cleanup() {
	local p
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
	ip netns del "$ns" 2>/dev/null || true
	ip netns del "$ns2" 2>/dev/null || true
	rm -rf "$tmp" /var/run/dpdk/"$tag"* /dev/shm/ipkit-ml-"$tag"* 2>/dev/null || true
}
trap cleanup EXIT
trap 'exit 130' INT TERM
load() { cut -d' ' -f1-3 /proc/loadavg; }
load_before=$(load)

ip netns add "$ns"; ip netns add "$ns2"
ip netns exec "$ns" ip link set lo up; ip netns exec "$ns2" ip link set lo up
ip netns exec "$ns" ip link add "${tag}c" type veth peer name "${tag}d" netns "$ns2"
ip netns exec "$ns" ip addr add 10.80.0.1/24 dev "${tag}c"
ip netns exec "$ns" ip link set "${tag}c" up
ip netns exec "$ns2" ip addr add 10.80.0.2/24 dev "${tag}d"
ip netns exec "$ns2" ip link set "${tag}d" up

# ipkit-bench(-linux) --json on stdin -> "req/s p50 p99 Gbit/s" (bench/bench_summary.py)
summary() { python3 "$root/bench/bench_summary.py"; }

# "server-spec client-spec" for a transport and run number (fresh names per run; DPDK
# specs hot-plug the vdev and start EAL with a private file prefix, removed at exit)
specs() { # transport run [spec suffix]
	local s=$tmp/s$2.sock
	case $1 in
	memlink) echo "memlink:${tag}$2,role=a$3 memlink:${tag}$2,role=b$3" ;;
	memif) echo "dpdk:net_memif0,role=server,socket=$s$3 dpdk:net_memif0,role=client,socket=$s$3" ;;
	vhost) echo "dpdk:net_vhost0,iface=$s,queues=1$3 dpdk:net_virtio_user0,path=$s,queues=1$3" ;;
	esac
}
server_args() { # model cores
	case $1/$2 in
	unified/1) echo "0|-T 1" ;;
	unified/2) echo "0,1|-T 2 --model unified" ;;
	merge/1) echo "0|-T 1 --model merge" ;;
	merge/2) echo "0,1|-T 2 --model merge" ;;
	split/1) echo "0|-T 1 --model split" ;;
	split/2) echo "0,1|-T 1 --model split" ;;
	esac
}
client_cpus() { [ "$1" = 1 ] && echo 1 || echo 0,1; }

stop_last() {
	kill "${pids[-1]}" 2>/dev/null || true
	wait "${pids[-1]}" 2>/dev/null || true
	unset 'pids[-1]'
}
wait_path() { # PATH: a vhost-user socket (file) or memif socket (abstract); 30 s bound
	local i
	for i in $(seq 300); do
		[ -S "$1" ] && return 0
		grep -q "@$1\$" /proc/net/unix 2>/dev/null && return 0
		sleep 0.1
	done
	return 1
}

# ipkit server + client over a transport: "req/s p50 p99 Gbit/s"
ipk_run() { # transport model cores spec-suffix client-args...
	local tr=$1 model=$2 cores=$3 suf=$4 s c sa spin sargs r n=$BASHPID
	shift 4
	# n: this subshell's PID, distinct from every earlier run's names
	read -r s c <<<"$(specs "$tr" "$n" "$suf")"
	sa=$(server_args "$model" "$cores"); spin=${sa%%|*}; sargs=${sa#*|}
	# shellcheck disable=SC2086
	taskset -c "$spin" timeout $((secs + 60)) "$bipk" --io "$s" --ip 10.9.0.1/24 -p 7 \
		$sargs -g "$G" >/dev/null 2>&1 &
	pids+=($!)
	case $tr in
	memlink) sleep 0.5 ;;
	*) wait_path "$tmp/s$n.sock" || true; sleep 0.5 ;;
	esac
	r=$(taskset -c "$(client_cpus "$cores")" timeout $((secs + 60)) "$bipk" --io "$c" \
		--ip 10.9.0.2/24 -s 10.9.0.1 -p 7 -t "$secs" --json "$@" 2>/dev/null | summary) ||
		r="0 0 0 0"
	stop_last
	echo "$r"
}
lx_run() { # cores client-args...
	local cores=$1 spin r i
	shift
	spin=$([ "$cores" = 1 ] && echo 0 || echo 0,1)
	ip netns exec "$ns2" taskset -c "$spin" "$blin" --ip 10.80.0.2 -p 7 -T "$cores" \
		-g "$G" >/dev/null 2>&1 &
	pids+=($!)
	for i in $(seq 50); do
		ip netns exec "$ns" timeout 1 bash -c "exec 3<>/dev/tcp/10.80.0.2/7" 2>/dev/null &&
			break
		sleep 0.1
	done
	r=$(ip netns exec "$ns" taskset -c "$(client_cpus "$cores")" timeout $((secs + 60)) \
		"$blin" -s 10.80.0.2 -p 7 -t "$secs" --json "$@" 2>/dev/null | summary) ||
		r="0 0 0 0"
	stop_last
	echo "$r"
}
cell() { awk '{printf "%s / %s / %s", $1, $2, $3}' <<<"$1"; }

transports="memlink"
[ "$have_dpdk" = 1 ] && transports="memlink memif vhost"
label() {
	case $1 in
	memlink) echo "memlink" ;;
	memif) echo "DPDK net_memif" ;;
	vhost) echo "DPDK vhost/virtio_user" ;;
	esac
}

rows=$tmp/rows.md
G=1
for tr in $transports; do
	for model in unified merge split; do
		for cores in 1 2; do
			r1=$(ipk_run "$tr" "$model" "$cores" "" -c 1 -l 1 -g 1)
			r32=$(ipk_run "$tr" "$model" "$cores" "" -c 32 -l 1 -g 1)
			printf '| %s | %s | %s | %s | %s |\n' "$(label "$tr")" "$model" "$cores" \
				"$(cell "$r1")" "$(cell "$r32")" | tee -a "$rows"
		done
	done
done
for cores in 1 2; do
	r1=$(lx_run "$cores" -c 1 -l 1 -g 1)
	r32=$(lx_run "$cores" -c 32 -l 1 -g 1)
	printf '| Linux veth, ipkit-bench-linux (epoll) | - | %s | %s | %s |\n' "$cores" \
		"$(cell "$r1")" "$(cell "$r32")" | tee -a "$rows"
done

bulk=$tmp/bulk.md
G=2
if [ "$have_dpdk" = 1 ]; then
	for off in "" ",offload=0"; do
		r=$(ipk_run memif unified 1 "$off" -c 1 -l 65536 -g 2)
		printf '| DPDK net_memif, offloads %s | %s |\n' "$([ -z "$off" ] && echo on || echo off)" \
			"$(awk '{print $4}' <<<"$r")" | tee -a "$bulk"
	done
fi
r=$(lx_run 1 -c 1 -l 65536 -g 2)
printf '| Linux veth, ipkit-bench-linux | %s |\n' "$(awk '{print $4}' <<<"$r")" | tee -a "$bulk"

report() {
	echo "# Multi-core thread models: ping-pong and bulk figures"
	echo
	echo "Written by \`bench/mc_figures.sh $build $secs${out:+ $out}\` (\`make mc-figures\`) on"
	echo "$(date -u '+%Y-%m-%d %H:%M UTC'), kernel $(uname -r), $(nproc) CPUs, git"
	echo "$(git rev-parse --short HEAD 2>/dev/null || echo '?'); load averages before $load_before, after $(load)."
	echo "$secs s per cell. Timing figures on a shared machine are noisy."
	echo
	echo "\"1 core\" / \"2 cores\" are the server's CPUs (taskset); see the script's header:"
	echo "unified and merge on 2 cores are two workers plus the software-steering reader;"
	echo "split needs two threads, so on 1 core its networking and application threads"
	echo "share CPU 0, on 2 cores each has its own. The client runs on CPU 1 (1 core) or"
	echo "on CPUs 0-1 (2 cores, sharing them with the server on this 2-CPU machine)."
	echo
	echo "## 1-byte TCP ping-pong: requests/s / p50 µs / p99 µs"
	echo
	echo "| transport | model | cores | 1 connection | 32 connections |"
	echo "|---|---|---|---|---|"
	cat "$rows"
	echo
	echo "## Bulk, one connection, 64 KiB writes (Gbit/s)"
	echo
	echo "| path | Gbit/s |"
	echo "|---|---|"
	cat "$bulk"
	[ "$have_dpdk" = 1 ] || { echo; echo "DPDK rows skipped: the build has no DPDK backend."; }
}
if [ -n "$out" ]; then
	report >"$out"
	echo "mc_figures: wrote $out"
else
	report
fi
