#!/bin/bash
# Instructions per request (ping-pong) or per 1460 payload bytes (bulk) under
# valgrind --tool=callgrind: two run lengths N1 < N2, (I(N2) - I(N1)) / (N2 - N1), so
# set-up (contexts, handshakes, pools) cancels. For every stack found:
#   ipkit lib / unity (BUILD/bench/inmem), lwip and smoltcp (BUILD/bench-peers, from
#   `make bench-peers`; skipped when absent).
# Then the top functions of 1-connection sw ping-pong for each stack.
#
#   bench/inmem/instr.sh [--build DIR] [--json FILE] [--top N] [--quick]
# Output: one line per stack x workload; --json appends JSON objects (tool "instr").
set -euo pipefail
build=build json="" top=15 n1=20000 n2=40000 b1=8000000 b2=16000000
while [ $# -gt 0 ]; do
	case $1 in
	--build) build=$2; shift ;;
	--json) json=$2; shift ;;
	--top) top=$2; shift ;;
	--quick) n1=2000 n2=4000 b1=1000000 b2=2000000 ;;
	-h|--help) sed -n 2,11p "$0"; exit 0 ;;
	*) echo "instr.sh: unknown option $1" >&2; exit 2 ;;
	esac
	shift
done
command -v valgrind >/dev/null || { echo "instr.sh: valgrind not installed" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

declare -a names bins
add() { [ -x "$2" ] && { names+=("$1"); bins+=("$2"); } || echo "instr.sh: $1 not built ($2)" >&2; }
add ipkit-lib "$build/bench/inmem/ipkit-inmem"
add ipkit-unity "$build/bench/inmem/ipkit-inmem-unity"
add lwip "$build/bench-peers/lwip/lwip-inmem"
add smoltcp "$build/bench-peers/smoltcp/smoltcp-inmem"

# instructions of one run: callgrind's total
irefs() {
	local out=$1; shift
	valgrind --tool=callgrind --callgrind-out-file="$out" "$@" -q -t 3600 >/dev/null 2>"$out.log"
	grep -E 'Collected' "$out.log" | awk '{print $4}'
}

# name bin workload-label per-unit-divisor args-for-N1 args-for-N2 (args: -n or -b value)
measure() {
	local name=$1 bin=$2 label=$3 unit=$4 a1=$5 a2=$6 d=$7; shift 7
	local i1 i2 per
	i1=$(irefs "$tmp/$name-$label-1.out" "$bin" "$@" $a1)
	i2=$(irefs "$tmp/$name-$label-2.out" "$bin" "$@" $a2)
	per=$(awk -v a="$i1" -v b="$i2" -v d="$d" 'BEGIN { printf "%.0f", (b - a) / d }')
	printf '%-12s %-22s %8s instructions/%s\n' "$name" "$label" "$per" "$unit"
	[ -z "$json" ] || printf '{"tool":"instr","stack":"%s","workload":"%s","unit":"%s","instructions":%s,"i1":%s,"i2":%s}\n' \
		"$name" "$label" "$unit" "$per" "$i1" "$i2" >>"$json"
}

for k in "${!names[@]}"; do
	name=${names[$k]} bin=${bins[$k]}
	measure "$name" "$bin" pingpong-c1-sw request "-n $n1" "-n $n2" $((n2 - n1))
	measure "$name" "$bin" pingpong-c1-offload request "-n $n1" "-n $n2" $((n2 - n1)) -p offload
	measure "$name" "$bin" pingpong-c32-sw request "-n $n1" "-n $n2" $((n2 - n1)) -c 32
	measure "$name" "$bin" bulk-sw 1460B "-b $b1" "-b $b2" "$(( (b2 - b1) / 1460 ))" -w bulk
	measure "$name" "$bin" bulk-offload 1460B "-b $b1" "-b $b2" "$(( (b2 - b1) / 1460 ))" -w bulk -p offload
	case $name in ipkit-*) # ipkit's zero-copy send (ipk_tcp_send of packets over the pattern)
		measure "$name" "$bin" bulk-offload-zerocopy 1460B "-b $b1" "-b $b2" \
			"$(( (b2 - b1) / 1460 ))" -w bulk -p offload --zerocopy ;;
	esac
done

for k in "${!names[@]}"; do
	echo
	echo "== ${names[$k]}: top functions, 1-connection sw ping-pong ($n2 requests, inclusive of nothing: self cost)"
	callgrind_annotate "$tmp/${names[$k]}-pingpong-c1-sw-2.out" 2>/dev/null |
		grep -E '^ *[0-9,]+ +\(' | sed -n "2,$((top + 1))p" |
		sed -E 's#/[^ :]*/##; s# \[[^]]*\]$##'
done
