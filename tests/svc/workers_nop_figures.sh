#!/bin/sh
# NOP operations/s of two applications, each spinning on its own socket with 8
# NOPs in flight (ipkitd places new sockets round robin over its workers, so with
# --workers 2 they sit on different workers), --workers 1 and 2 alternating, R
# rounds of S seconds. A benchmark: it prints, it does not judge.
#   tests/svc/workers_nop_figures.sh [BUILD] [R] [S] [BUILD2]   no root
# BUILD2 (optional): a second build (e.g. main's) run in the same rounds.
# Each round also runs --workers 2 with IPKITD_BIG_LOCK=1 (every worker takes one
# lock: the passes serialised, as before the lock split), labelled "big".
set -eu
B=${1:-build}
R=${2:-5}
S=${3:-3}
B2=${4:-}
T=$(mktemp -d /tmp/ipkwknop.XXXXXX)
PIDS=""
cleanup() { for p in $PIDS; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null; rm -rf "$T"; }
trap cleanup EXIT INT TERM
one() { # $1 build, $2 workers, $3 "big": IPKITD_BIG_LOCK=1
	q=""
	wk=""
	big=0
	if [ "$2" -gt 1 ]; then q=",queues=$2"; wk="--workers $2"; fi
	if [ "${3:-}" = big ]; then big=1; fi
	rm -f "$T/s"
	# shellcheck disable=SC2086
	IPKITD_BIG_LOCK=$big "$1/svc/ipkitd" --io "memlink:ipkwn$$,role=a$q" --ip 10.9.9.2/24 \
		--socket "$T/s" $wk 2>"$T/d.log" &
	d=$!
	PIDS="$d"
	i=0
	while [ ! -S "$T/s" ] && [ $i -lt 100 ]; do sleep 0.05; i=$((i + 1)); done
	timeout 60 "$1/tests/svc/svc_tool" --socket "$T/s" nopspin "$S" 1 >"$T/a" &
	a=$!
	timeout 60 "$1/tests/svc/svc_tool" --socket "$T/s" nopspin "$S" 1 >"$T/b" &
	b=$!
	wait $a || true
	wait $b || true
	kill "$d"
	wait "$d" || true
	PIDS=""
	x=$(awk '/^nopspin/ {print $4}' "$T/a")
	y=$(awk '/^nopspin/ {print $4}' "$T/b")
	o=$(awk '/overlap/ {for (i = 1; i < NF; i++) if ($i == "overlap") s = s " " $(i + 1)} END {print s}' "$T/d.log")
	echo "$1 workers=$2${3:+ $3} app1 ${x:-0} app2 ${y:-0} sum $(( ${x:-0} + ${y:-0} )) overlap${o:- -}"
}
echo "# $(date -u +%FT%TZ) $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg), ${S}s each"
r=0
while [ $r -lt "$R" ]; do
	one "$B" 1
	one "$B" 2
	one "$B" 2 big
	if [ -n "$B2" ]; then one "$B2" 1; one "$B2" 2; fi
	r=$((r + 1))
done
