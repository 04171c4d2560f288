#!/bin/bash
# Ping-pong req/s in interleaved rounds, every program pinned to one CPU (taskset), and
# the ratios issue 6 sets taken within each round: ipkit unity c=1 / lwIP c=1 (target
# 1.5) and ipkit unity c=32 / smoltcp c=32 (target 1.5). Prints every round's figures
# and ratios, then best and median; a run that fails its data check fails the script.
# For a quiet machine: single runs swing by up to 1.8x on the shared development VM.
#
#   bench/inmem/pingpong_rounds.sh [--build DIR] [--rounds N] [--requests N] [--cpu C] [--json FILE]
# Peers come from `make bench-peers` (DIR/bench-peers); all three programs are needed.
set -euo pipefail
build=build rounds=8 requests=1000000 cpu=1 json=""
while [ $# -gt 0 ]; do
	case $1 in
	--build) build=$2; shift ;;
	--rounds) rounds=$2; shift ;;
	--requests) requests=$2; shift ;;
	--cpu) cpu=$2; shift ;;
	--json) json=$2; shift ;;
	-h|--help) sed -n 2,9p "$0"; exit 0 ;;
	*) echo "pingpong_rounds.sh: unknown option $1" >&2; exit 2 ;;
	esac
	shift
done
ipkit=$build/bench/inmem/ipkit-inmem-unity
lwip=$build/bench-peers/lwip/lwip-inmem
smoltcp=$build/bench-peers/smoltcp/smoltcp-inmem
for b in "$ipkit" "$lwip" "$smoltcp"; do
	[ -x "$b" ] || { echo "pingpong_rounds.sh: $b not built (make, make bench-peers)" >&2; exit 1; }
done
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT

for r in $(seq 1 "$rounds"); do
	for b in "$ipkit" "$lwip" "$smoltcp"; do
		for c in 1 32; do
			taskset -c "$cpu" "$b" -c "$c" -n "$requests" -q --json "$tmp" ||
				{ echo "pingpong_rounds.sh: $b -c $c failed" >&2; exit 1; }
		done
	done
done
[ -z "$json" ] || cat "$tmp" >>"$json"
/usr/bin/python3 - "$tmp" "$rounds" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
n = int(sys.argv[2])
rate = {}
for r in rows:
    rate.setdefault((r["stack"], r["conns"]), []).append(r["req_per_s"])
def line(name, v, f):
    print("%-22s %s   best %s  median %s" % (name, " ".join(f(x) for x in v), f(max(v)),
                                            f(statistics.median(v))))
k = lambda x: "%6.0fk" % (x / 1e3)
for key in sorted(rate):
    line("%s c=%d req/s" % key, rate[key], k)
q = lambda x: "%5.2f" % x
line("c=1 ipkit/lwIP", [a / b for a, b in zip(rate[("ipkit", 1)], rate[("lwip", 1)])], q)
line("c=32 ipkit/smoltcp", [a / b for a, b in zip(rate[("ipkit", 32)], rate[("smoltcp", 32)])], q)
line("ipkit c=32/c=1", [a / b for a, b in zip(rate[("ipkit", 32)], rate[("ipkit", 1)])], q)
line("smoltcp c=32/c=1", [a / b for a, b in zip(rate[("smoltcp", 32)], rate[("smoltcp", 1)])], q)
PY
