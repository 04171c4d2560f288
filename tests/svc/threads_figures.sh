#!/bin/sh
# Mean latency against the number of sockets in the shape of the pifus thesis's
# Table 6.4 (issue 17's third figure): N threads of one application, each with its
# own socket and one operation in flight, sleeping between operations, for MS
# milliseconds per row; N = 1, 8, 16, 32, 64, 120. NOPs over a memlink with nobody
# on the other end, so the figure is ipkitd's and the library's cost, not the wire's.
#   tests/svc/threads_figures.sh [BUILD] [MS]     no root; ~6 x MS
set -eu
B=${1:-build}
MS=${2:-2000}
T=$(mktemp -d /tmp/ipkthr.XXXXXX)
PIDS=""
cleanup() { for p in $PIDS; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null; rm -rf "$T"; }
trap cleanup EXIT INT TERM
echo "# $(date -u +%FT%TZ) $(uname -r) $(nproc) CPUs, $MS ms per row, load $(cut -d' ' -f1 /proc/loadavg)"
for n in 1 8 16 32 64 120; do
	"$B/svc/ipkitd" --io "memlink:ipkthr$$,role=a" --ip 10.9.9.2/24 --socket "$T/s" \
		${IPKITD_ARGS:-} 2>"$T/d.log" &
	d=$!
	PIDS="$PIDS $d"
	i=0
	while [ ! -S "$T/s" ] && [ $i -lt 100 ]; do sleep 0.05; i=$((i + 1)); done
	timeout 120 "$B/tests/svc/svc_tool" --socket "$T/s" threads "$n" "$MS"
	kill "$d"
	wait "$d" || true
done
