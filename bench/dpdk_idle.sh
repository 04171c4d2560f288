#!/usr/bin/env bash
# The DPDK loop without --busy-poll (issue 5, io/dpdk/dpdk.c dp_arm): latency of a
# 1-connection 1-byte ping-pong and the CPU an idle pair burns, over net_memif (no rx
# interrupt in 22.11, so the loop cannot sleep on an fd and polls with naps).
#
#   bench/dpdk_idle.sh [BUILD_DIR] [SECONDS]      (a benchmark, not a test)
#
# Prints: "pingpong req/s p50_us p99_us" (ipkit-bench on both ends, server on CPU 0,
# client on CPU 1, as mc_figures.sh's unified/1-core cell), then "idle server_cpu%
# client_cpu%": ipkit-echo and a connected ipkit-nc that sends nothing, utime+stime
# from /proc/PID/stat over 5 s. Needs root. Everything it makes is named ipkW<hex>
# (EAL file prefixes of ipkit-echo/-nc, sockets in a private temp dir) and is removed on exit.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
build=${1:-build}
secs=${2:-5}
tag=ipkW$(od -An -N2 -tx1 /dev/urandom | tr -d ' \n')
tmp=$(mktemp -d /tmp/ipkW-idle.XXXXXX)
pids=()
cleanup() {
	local p
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
	rm -rf "$tmp" /var/run/dpdk/"$tag"* 2>/dev/null || true
}
trap cleanup EXIT
trap 'exit 130' INT TERM
eal() { echo "--no-huge -m 256 --no-pci --file-prefix=${tag}$1 --"; }
wait_sock() { # abstract memif socket; 30 s bound
	local i
	for i in $(seq 300); do
		grep -q "@$1\$" /proc/net/unix 2>/dev/null && return 0
		sleep 0.1
	done
	return 1
}
srv="dpdk:net_memif0,role=server,socket=$tmp/s.sock"
cli="dpdk:net_memif0,role=client,socket=$tmp/s.sock"
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"

# (ipkit-bench takes no EAL arguments: EAL starts with defaults and a private
# --file-prefix=ipkit-PID, removed at exit)
taskset -c 0 "$build/bench/ipkit-bench" --io "$srv" --ip 10.9.0.1/24 -p 7 -T 1 \
	-g 1 >/dev/null 2>&1 &
pids+=($!)
wait_sock "$tmp/s.sock"
sleep 0.5
r=$(taskset -c 1 timeout $((secs + 60)) "$build/bench/ipkit-bench" --io "$cli" \
	--ip 10.9.0.2/24 -s 10.9.0.1 -p 7 -t "$secs" --json -c 1 -l 1 -g 1 2>/dev/null |
	python3 "$root/bench/bench_summary.py")
echo "pingpong $(cut -d' ' -f1-3 <<<"$r")"
kill "${pids[-1]}"; wait "${pids[-1]}" 2>/dev/null || true; unset 'pids[-1]'

cpu() { awk '{print $14 + $15}' "/proc/$1/stat"; }
# shellcheck disable=SC2046
taskset -c 0 "$build/examples/ipkit-echo" $(eal e) --io "$srv" --ip 10.9.0.1/24 \
	>/dev/null 2>&1 &
spid=$!
pids+=($spid)
wait_sock "$tmp/s.sock"
sleep 0.5
# shellcheck disable=SC2046
sleep 30 | taskset -c 1 "$build/examples/ipkit-nc" $(eal n) --io "$cli" --ip 10.9.0.2/24 \
	--timeout 60 10.9.0.1 7 >/dev/null 2>&1 &
cpid=$!
pids+=($cpid)
sleep 3 # connected and settled
hz=$(getconf CLK_TCK)
s0=$(cpu "$spid"); c0=$(cpu "$cpid")
sleep 5
s1=$(cpu "$spid"); c1=$(cpu "$cpid")
awk -v s=$((s1 - s0)) -v c=$((c1 - c0)) -v hz="$hz" \
	'BEGIN { printf "idle %.1f %.1f\n", 100 * s / hz / 5, 100 * c / hz / 5 }'
