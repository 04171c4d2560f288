#!/bin/sh
# NOP round trips through ipkitd, busy-poll and sleeping, next to the machine's own
# futex ping-pong between two processes, and the latency against the number of
# sockets, in one run (issue 17's first figures).
#   tests/svc/nop_figures.sh [BUILD] [N]     no root; ~15 s with N=100000
#   OL_RATE=R OL_SECS=S (open-loop rows' total NOPs/s and seconds), OL_ONLY=1 (only those)
# ipkitd runs on a memlink with nobody on the other end (NOPs never touch the wire).
set -eu
B=${1:-build}
N=${2:-200000}
T=$(mktemp -d /tmp/ipknop.XXXXXX)
PIDS=""
cleanup() { for p in $PIDS; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null; rm -rf "$T"; }
trap cleanup EXIT INT TERM
run() { # $1: daemon flags; $2...: svc_tool mode and arguments
	"$B/svc/ipkitd" --io "memlink:ipknop$$,role=a" --ip 10.9.9.2/24 --socket "$T/s" $1 \
		2>"$T/d.log" &
	d=$!
	PIDS="$PIDS $d"
	i=0
	while [ ! -S "$T/s" ] && [ $i -lt 100 ]; do sleep 0.05; i=$((i + 1)); done
	shift
	timeout 120 "$B/tests/svc/svc_tool" --socket "$T/s" "$@"
	kill "$d"
	wait "$d" || true
}
echo "# $(date -u +%FT%TZ) $(uname -r) $(nproc) CPUs, N=$N"
if [ -n "${OL_ONLY:-}" ]; then # only the open-loop rows (below)
	for s in 1 8 16 32 64 120; do
		run "" openloop "$s" "${OL_RATE:-100000}" "${OL_SECS:-2}"
	done
	exit 0
fi
"$B/tests/svc/svc_tool" futex-floor "$N"
run "--spin-us 0" nopbench "$N" sleep
run "" nopbench "$N" sleep
run "--busy-poll" nopbench "$N" spin
# latency against the number of sockets, one NOP in flight on each (daemon sleeping
# when idle, client spinning), N/10 round trips in all per row
for s in 1 8 16 32 64 120; do
	run "" scale "$s" $((N / 10 / s))
done
# the same against sockets open loop (no coordinated omission): one thread offers
# OL_RATE NOPs/s in all (default 100000), spread evenly over the sockets on a
# schedule, for OL_SECS s; latency from each NOP's scheduled time to its completion
for s in 1 8 16 32 64 120; do
	run "" openloop "$s" "${OL_RATE:-100000}" "${OL_SECS:-2}"
done
# the thesis's priority experiment: one level-0 socket probing with NOPs, idle and
# while 8 level-2 sockets keep their SQs full of NOPs, then a level-2 probe under
# the same flood; the flood's progress during each probe (needs level 0: --prio-uid)
run "--prio-uid $(id -u):0" prio 8 $((N / 10))
