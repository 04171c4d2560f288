#!/bin/bash
# Issue 4 p99 diagnosis (not a test, not a benchmark): is the 32-connection p99 CPU
# contention on the pinned server CPU? Run twice, quiet and with SPIN=1:
#   sudo SPIN=0 bench/p99_contention.sh 3 [blocking|busy-poll]; sudo SPIN=1 bench/p99_contention.sh 3
# Quiet (22:39 UTC 2026-11-22): p99 605/667 us blocking, 757 us busy-poll; SPIN=1:
# 4415/4399 us blocking, 4268 us busy-poll; server run-queue wait 148-171 vs 1463-1597 ms/3 s.
# controlled experiment: afpacket blocking, 32 conns, SECS s; SPIN=1 adds one CPU-bound
# loop pinned to the server's CPU (1), same nice as the bench. Prints the client summary
# and the server's run-queue wait (/proc/PID/schedstat field 2) over the client's run.
set -u
B=${BUILD:-build}/bench/ipkit-bench
ns=ipkPe; secs=${1:-4}; var=${2:-blocking}
bp=""; [ "$var" = busy-poll ] && bp=--busy-poll
sp=""; spin=""
cleanup(){ for p in $spin $sp; do kill $p 2>/dev/null; done; wait 2>/dev/null; ip netns del $ns 2>/dev/null; }
trap cleanup EXIT
ip netns add $ns; ip netns exec $ns ip link set lo up
ip netns exec $ns ip link add ipkPe1 type veth peer name ipkPe2
ip netns exec $ns ip link set ipkPe1 up; ip netns exec $ns ip link set ipkPe2 up
ip netns exec $ns taskset -c 1 $B --io afpacket:ipkPe1 --ip 10.9.0.1/24 -p 7 $bp >/dev/null 2>&1 &
sp=$!; sleep 0.5
if [ "${SPIN:-0}" = 1 ]; then taskset -c 1 timeout $((secs+5)) sh -c 'while :; do :; done' & spin=$!; fi
r0=$(awk '{print $2}' /proc/$sp/schedstat); n0=$(awk '/nonvoluntary/{print $2}' /proc/$sp/status)
ip netns exec $ns taskset -c 0 timeout $((secs+30)) $B --io afpacket:ipkPe2 --ip 10.9.0.2/24 -s 10.9.0.1 -p 7 -t $secs $bp -c 32 -l 1 -g 1 | grep -E "^latency|^summary" | sed 's/.*-T 1): //'
r1=$(awk '{print $2}' /proc/$sp/schedstat); n1=$(awk '/nonvoluntary/{print $2}' /proc/$sp/status)
echo "server: run-queue wait $(( (r1-r0)/1000000 )) ms in ${secs} s, involuntary switches $((n1-n0)); load $(cut -d' ' -f1-3 /proc/loadavg)"
