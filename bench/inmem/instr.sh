#!/bin/bash
# Instructions per request (ping-pong) or per 1460 payload bytes (bulk) under
# valgrind --tool=callgrind: two run lengths N1 < N2, (I(N2) - I(N1)) / (N2 - N1), so
# set-up (contexts, handshakes, pools) cancels. For every stack found:
#   ipkit lib / unity (BUILD/bench/inmem), lwip and smoltcp (PEERS, default
#   BUILD/bench-peers, from `make bench-peers`; skipped when absent).
# Every workload runs over both wires (--wire copy, the default of every harness, and
# --wire handoff: rows "-handoff"), or only one with --wire.
# Also the harness's own share of 1-connection sw ping-pong (self cost of the code in
# the harness's source files, inlined parts included), then one table (workloads x
# stacks) and the top functions of 1-connection sw ping-pong for each stack.
#
#   bench/inmem/instr.sh [--build DIR] [--peers DIR] [--wire copy|handoff|both]
#                        [--json FILE] [--top N] [--quick]
# For ipkit at the peers' flags (-O3, LTO): meson setup build-rel --buildtype=release
# -Db_lto=true, then --build build-rel --peers build/bench-peers.
# Output: one line per stack x workload, the table; --json appends JSON objects (tool
# "instr"; workload "harness-pingpong-c1-sw" is the harness's share).
set -euo pipefail
build=build peers="" wires="copy handoff" json="" top=15 n1=20000 n2=40000 b1=8000000 b2=16000000
while [ $# -gt 0 ]; do
	case $1 in
	--build) build=$2; shift ;;
	--peers) peers=$2; shift ;;
	--wire) case $2 in both) wires="copy handoff" ;; copy|handoff) wires=$2 ;;
		*) echo "instr.sh: --wire copy, handoff or both" >&2; exit 2 ;; esac; shift ;;
	--json) json=$2; shift ;;
	--top) top=$2; shift ;;
	--quick) n1=2000 n2=4000 b1=1000000 b2=2000000 ;;
	-h|--help) sed -n 2,18p "$0"; exit 0 ;;
	*) echo "instr.sh: unknown option $1" >&2; exit 2 ;;
	esac
	shift
done
peers=${peers:-$build/bench-peers}
command -v valgrind >/dev/null || { echo "instr.sh: valgrind not installed" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# name, program, and the source files that are the harness's (not the stack's)
declare -a names bins own
add() { [ -x "$2" ] && { names+=("$1"); bins+=("$2"); own+=("$3"); } || echo "instr.sh: $1 not built ($2)" >&2; }
add ipkit-lib "$build/bench/inmem/ipkit-inmem" 'bench/inmem/'
add ipkit-unity "$build/bench/inmem/ipkit-inmem-unity" 'bench/inmem/'
add lwip "$peers/lwip/lwip-inmem" 'bench/peers/lwip/|bench/inmem/'
add smoltcp "$peers/smoltcp/smoltcp-inmem" 'bench/peers/smoltcp/'
workloads="pingpong-c1-sw pingpong-c1-offload pingpong-c32-sw bulk-sw bulk-offload bulk-offload-zerocopy pingpong-c1-sw-ip6 pingpong-c32-sw-ip6 bulk-sw-ip6"

# instructions of one run: callgrind's total
irefs() {
	local out=$1; shift
	valgrind --tool=callgrind --callgrind-out-file="$out" "$@" -q -t 3600 >/dev/null 2>"$out.log"
	grep -E 'Collected' "$out.log" | awk '{print $4}'
}

emit() { # name label unit per i1 i2
	printf '%-12s %-24s %8s instructions/%s\n' "$1" "$2" "$4" "$3"
	echo "$1 $2 $4" >>"$tmp/table"
	[ -z "$json" ] || printf '{"tool":"instr","stack":"%s","workload":"%s","unit":"%s","instructions":%s,"i1":%s,"i2":%s}\n' \
		"$1" "$2" "$3" "$4" "$5" "$6" >>"$json"
}

# name bin workload-label per-unit-divisor args-for-N1 args-for-N2 (args: -n or -b value)
measure() {
	local name=$1 bin=$2 label=$3 unit=$4 a1=$5 a2=$6 d=$7; shift 7
	local i1 i2
	i1=$(irefs "$tmp/$name-$label-1.out" "$bin" "$@" $a1)
	i2=$(irefs "$tmp/$name-$label-2.out" "$bin" "$@" $a2)
	emit "$name" "$label" "$unit" "$(awk -v a="$i1" -v b="$i2" -v d="$d" 'BEGIN { printf "%.0f", (b - a) / d }')" "$i1" "$i2"
}

# self cost of the (file:function) entries whose file matches regex $2 in profile $1
own_cost() {
	callgrind_annotate --auto=no --threshold=100 "$1" 2>/dev/null |
		grep -E '^ *[0-9,]+ +\(' | sed -E 's# \[[^]]*\]$##; s#:[^:]*$##' | { grep -E "$2" || true; } |
		awk '{ gsub(",", "", $1); s += $1 } END { print s + 0 }'
}

wl=""
for wire in $wires; do
	sfx=""
	[ "$wire" = copy ] || sfx=-$wire
	for w in $workloads harness-pingpong-c1-sw; do wl="$wl $w$sfx"; done
	for k in "${!names[@]}"; do
		name=${names[$k]} bin=${bins[$k]}
		measure "$name" "$bin" pingpong-c1-sw$sfx request "-n $n1" "-n $n2" $((n2 - n1)) --wire $wire
		measure "$name" "$bin" pingpong-c1-offload$sfx request "-n $n1" "-n $n2" $((n2 - n1)) -p offload --wire $wire
		measure "$name" "$bin" pingpong-c32-sw$sfx request "-n $n1" "-n $n2" $((n2 - n1)) -c 32 --wire $wire
		measure "$name" "$bin" bulk-sw$sfx 1460B "-b $b1" "-b $b2" "$(( (b2 - b1) / 1460 ))" -w bulk --wire $wire
		measure "$name" "$bin" bulk-offload$sfx 1460B "-b $b1" "-b $b2" "$(( (b2 - b1) / 1460 ))" -w bulk -p offload --wire $wire
		case $name in ipkit-*) # ipkit's zero-copy send (ipk_tcp_send of packets over the pattern)
			measure "$name" "$bin" bulk-offload-zerocopy$sfx 1460B "-b $b1" "-b $b2" \
				"$(( (b2 - b1) / 1460 ))" -w bulk -p offload --zerocopy --wire $wire
			# TCP over IPv6 (issue 19), sw profile: beside the IPv4 rows of the same run
			measure "$name" "$bin" pingpong-c1-sw-ip6$sfx request "-n $n1" "-n $n2" $((n2 - n1)) --ip6 --wire $wire
			measure "$name" "$bin" pingpong-c32-sw-ip6$sfx request "-n $n1" "-n $n2" $((n2 - n1)) -c 32 --ip6 --wire $wire
			measure "$name" "$bin" bulk-sw-ip6$sfx 1460B "-b $b1" "-b $b2" "$(( (b2 - b1) / 1460 ))" -w bulk --ip6 --wire $wire ;;
		esac
		h1=$(own_cost "$tmp/$name-pingpong-c1-sw$sfx-1.out" "${own[$k]}")
		h2=$(own_cost "$tmp/$name-pingpong-c1-sw$sfx-2.out" "${own[$k]}")
		emit "$name" harness-pingpong-c1-sw$sfx request \
			"$(awk -v a="$h1" -v b="$h2" -v d=$((n2 - n1)) 'BEGIN { printf "%.0f", (b - a) / d }')" "$h1" "$h2"
	done
done

# One table: a row per workload, a column per stack (- = not run for that stack).
echo
printf '| workload (instructions per request / per 1460 B) |'
for name in "${names[@]}"; do printf ' %s |' "$name"; done
printf '\n| --- |'
for name in "${names[@]}"; do printf ' ---: |'; done
echo
for w in $wl; do
	printf '| %s |' "$w"
	for name in "${names[@]}"; do
		printf ' %s |' "$(awk -v n="$name" -v w="$w" '$1 == n && $2 == w { v = $3 } END { print (v == "" ? "-" : v) }' "$tmp/table")"
	done
	echo
done

for k in "${!names[@]}"; do
	echo
	echo "== ${names[$k]}: top functions, 1-connection sw ping-pong ($n2 requests, inclusive of nothing: self cost)"
	f=$tmp/${names[$k]}-pingpong-c1-sw-2.out
	[ -f "$f" ] || f=$tmp/${names[$k]}-pingpong-c1-sw-handoff-2.out
	callgrind_annotate "$f" 2>/dev/null |
		grep -E '^ *[0-9,]+ +\(' | sed -n "2,$((top + 1))p" |
		sed -E 's#/[^ :]*/##; s# \[[^]]*\]$##'
done
