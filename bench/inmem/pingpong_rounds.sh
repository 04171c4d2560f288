#!/bin/bash
# Ping-pong req/s in interleaved rounds, every program pinned to one CPU (taskset), and
# the ratios issue 6 sets taken within each round: ipkit unity c=1 / lwIP c=1 (target
# 1.5) and ipkit unity c=32 / smoltcp c=32 (target 1.5), also for ipkit's library build,
# over each wire (--wire copy, the default of every harness, and handoff). Prints every
# round's figures and ratios, then best and median; a run that fails its data check
# fails the script. For a quiet machine: single runs swing by up to 1.8x on the shared
# development VM.
#
#   bench/inmem/pingpong_rounds.sh [--build DIR] [--peers DIR] [--wire copy|handoff|both]
#                                  [--rounds N] [--requests N] [--cpu C] [--json FILE]
# Peers come from `make bench-peers` (--peers, default DIR/bench-peers); all are needed.
# ipkit at the peers' flags: --build build-rel (meson setup build-rel --buildtype=release
# -Ddebug=true -Db_lto=true), --peers build/bench-peers.
set -euo pipefail
build=build peers="" wires="copy handoff" rounds=8 requests=1000000 cpu=1 json=""
while [ $# -gt 0 ]; do
	case $1 in
	--build) build=$2; shift ;;
	--peers) peers=$2; shift ;;
	--wire) case $2 in both) wires="copy handoff" ;; *) wires=$2 ;; esac; shift ;;
	--rounds) rounds=$2; shift ;;
	--requests) requests=$2; shift ;;
	--cpu) cpu=$2; shift ;;
	--json) json=$2; shift ;;
	-h|--help) sed -n 2,14p "$0"; exit 0 ;;
	*) echo "pingpong_rounds.sh: unknown option $1" >&2; exit 2 ;;
	esac
	shift
done
peers=${peers:-$build/bench-peers}
ipkit=$build/bench/inmem/ipkit-inmem-unity
ipkitlib=$build/bench/inmem/ipkit-inmem
lwip=$peers/lwip/lwip-inmem
smoltcp=$peers/smoltcp/smoltcp-inmem
for b in "$ipkit" "$ipkitlib" "$lwip" "$smoltcp"; do
	[ -x "$b" ] || { echo "pingpong_rounds.sh: $b not built (make, make bench-peers)" >&2; exit 1; }
done
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT

for r in $(seq 1 "$rounds"); do
	for w in $wires; do
		for b in "$ipkit" "$ipkitlib" "$lwip" "$smoltcp"; do
			for c in 1 32; do
				taskset -c "$cpu" "$b" -c "$c" -n "$requests" --wire "$w" -q --json "$tmp" ||
					{ echo "pingpong_rounds.sh: $b -c $c --wire $w failed" >&2; exit 1; }
			done
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
    st = r["stack"] + ("-lib" if r["build"] == "lib" else "")
    rate.setdefault((st, r["conns"], r["wire"]), []).append(r["req_per_s"])
def line(name, v, f):
    print("%-34s %s   best %s  median %s" % (name, " ".join(f(x) for x in v), f(max(v)),
                                            f(statistics.median(v))))
k = lambda x: "%6.0fk" % (x / 1e3)
for key in sorted(rate):
    line("%s c=%d %s req/s" % key, rate[key], k)
q = lambda x: "%5.2f" % x
ratio = lambda a, b: [x / y for x, y in zip(rate[a], rate[b])]
for w in sorted({key[2] for key in rate}):
    for ip in ("ipkit", "ipkit-lib"):
        line("%s: c=1 %s/lwIP" % (w, ip), ratio((ip, 1, w), ("lwip", 1, w)), q)
        line("%s: c=32 %s/smoltcp" % (w, ip), ratio((ip, 32, w), ("smoltcp", 32, w)), q)
        line("%s: c=1 %s/smoltcp" % (w, ip), ratio((ip, 1, w), ("smoltcp", 1, w)), q)
PY
