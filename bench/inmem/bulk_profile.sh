#!/bin/bash
# Why one stack's bulk moves more bytes than another's: per 1460 B of payload,
# callgrind's instructions, data reads/writes, L1/last-level data misses and branch
# mispredictions (--cache-sim=yes --branch-sim=yes; two lengths, the difference, so
# set-up cancels), and from a native run the frames and bytes each way (the harness's
# JSON "frames"/"wire_bytes": segment size and ACK frequency). Bulk, one connection,
# 16 KiB writes; every harness found (as instr.sh).
#
#   bench/inmem/bulk_profile.sh [--build DIR] [--peers DIR] [--profile sw|offload]
#                               [--wire copy|handoff] [--quick]
# Output: one table, a row per stack. Cache figures are callgrind's model of this
# machine's caches (its defaults read from CPUID), not hardware counters.
set -euo pipefail
build=build peers="" prof=sw wire=copy b1=8000000 b2=16000000
while [ $# -gt 0 ]; do
	case $1 in
	--build) build=$2; shift ;;
	--peers) peers=$2; shift ;;
	--profile) prof=$2; shift ;;
	--wire) wire=$2; shift ;;
	--quick) b1=1000000 b2=2000000 ;;
	-h|--help) sed -n 2,12p "$0"; exit 0 ;;
	*) echo "bulk_profile.sh: unknown option $1" >&2; exit 2 ;;
	esac
	shift
done
peers=${peers:-$build/bench-peers}
command -v valgrind >/dev/null || { echo "bulk_profile.sh: valgrind not installed" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

declare -a names bins
add() { [ -x "$2" ] && { names+=("$1"); bins+=("$2"); } || echo "bulk_profile.sh: $1 not built ($2)" >&2; }
add ipkit-lib "$build/bench/inmem/ipkit-inmem"
add ipkit-unity "$build/bench/inmem/ipkit-inmem-unity"
add lwip "$peers/lwip/lwip-inmem"
add smoltcp "$peers/smoltcp/smoltcp-inmem"

# callgrind's totals of one run: "Ir Dr Dw I1mr D1mr D1mw ILmr DLmr DLmw Bc Bcm Bi Bim"
totals() {
	local out=$1; shift
	valgrind --tool=callgrind --cache-sim=yes --branch-sim=yes --callgrind-out-file="$out" \
		"$@" -q -t 3600 >/dev/null 2>"$out.log"
	awk '/^events:/ { for (i = 2; i <= NF; i++) ev[i - 1] = $i; n = NF - 1 }
	     /^summary:/ { for (i = 2; i <= NF; i++) v[ev[i - 1]] = $i }
	     END { printf "%s %s %s %s %s %s %s %s\n", v["Ir"], v["Dr"] + v["Dw"],
	           v["D1mr"] + v["D1mw"], v["DLmr"] + v["DLmw"], v["Bc"] + v["Bi"],
	           v["Bcm"] + v["Bim"], v["I1mr"], v["ILmr"] }' "$out"
}

args="-w bulk -p $prof --wire $wire"
d=$(((b2 - b1) / 1460))
printf '| stack (%s, %s wire, per 1460 B) | instructions | data refs | D1 misses | LL data misses | branches | mispredicted | data frames of B | ACK frames per data frame |\n' "$prof" "$wire"
echo '| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |'
for k in "${!names[@]}"; do
	name=${names[$k]} bin=${bins[$k]}
	read -r -a t1 <<<"$(totals "$tmp/$name-1.out" "$bin" $args -b $b1)"
	read -r -a t2 <<<"$(totals "$tmp/$name-2.out" "$bin" $args -b $b2)"
	"$bin" $args -b 100000000 -q --json "$tmp/$name.json"
	fr=$(python3 -c '
import json, sys
j = json.loads(open(sys.argv[1]).read().splitlines()[-1])
f, b = j["frames"], j["wire_bytes"]
print("%.1f %.3f" % (b[0] / f[0], f[1] / f[0]))' "$tmp/$name.json")
	printf '| %s |' "$name"
	for i in 0 1 2 3 4 5; do
		awk -v a="${t1[$i]}" -v b="${t2[$i]}" -v d="$d" 'BEGIN { printf " %.1f |", (b - a) / d }'
	done
	read -r sz ack <<<"$fr"
	printf ' %s | %s |\n' "$sz" "$ack"
done
