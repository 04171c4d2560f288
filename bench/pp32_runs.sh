#!/usr/bin/env bash
# Issue 4's 32-connection target, run after run: the 1-byte ping-pong cells of ipkit
# over AF_XDP (veth, copy mode; skb and drv XDP; blocking and busy-poll) and, in the
# same round, Linux over veth (epoll) in the same variant, ROUNDS times. Prints one
# line per cell and per round the ratio of each afxdp cell to that round's Linux cell,
# then the minimum and median ratios: the target is >= 3x in every run, so the
# minimum is the figure. A benchmark run, not a test. Needs root.
#
#   [MTU=N] [VARIANTS="blocking busy-poll"] [KINDS="skb drv"] \
#   [BLOCK_ARGS="--spin-us 50"] [BLOCK_ARGS_B="..."] [LX_BLOCK_ARGS="--spin-us 50"] \
#     bash bench/pp32_runs.sh [BUILD_DIR] [SECONDS] [ROUNDS] [BUILD_B]
#
# Defaults: build, 8 s cells, 6 rounds, MTU 1500. Both ends pinned as in
# bench/io_pairs.sh (client CPU 0, server CPU 1). With BUILD_B or BLOCK_ARGS_B, every
# ipkit cell runs twice per round, A and B (alternating which goes first), for an A/B
# on a shared machine: B is BUILD_B's ipkit-bench (default: BUILD_DIR's), and its
# blocking cells take BLOCK_ARGS_B instead of BLOCK_ARGS (extra ipkit-bench arguments
# for both ends of the blocking cells; BLOCK_ARGS defaults to --spin-us 50 as in
# bench/io_pairs.sh, so BLOCK_ARGS_B="--spin-us 0" compares with the pure event loop;
# the Linux twin's blocking cell takes LX_BLOCK_ARGS, by default the same 50 us window).
# Each ipkit end runs with --stats: its loop and backend counters per request go to the
# cell's line (server / client).
# Everything it creates is named ixr<4 hex>... and removed on exit, also on failure.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
. bench/bulk_lib.sh
bulk_args pp32_runs 1500 "${1:-build}" "${2:-8}" "${3:-6}"
build_b=${4:-}
ab=""
[ -n "$build_b" ] || [ -n "${BLOCK_ARGS_B+x}" ] && ab=1
if [ -n "$build_b" ] && [ ! -x "$build_b/bench/ipkit-bench" ]; then
	echo "pp32_runs: $build_b/bench/ipkit-bench is not built" >&2
	exit 2
fi
read -r -a variants <<<"${VARIANTS:-blocking busy-poll}"
read -r -a kinds <<<"${KINDS:-skb drv}"
xf=""
[ "$mtu" -gt 1774 ] && xf=,frame=4096
[ "$mtu" -gt 3822 ] && xf=,frame=4096,sg=1
bulk_netns ixr
X ip link add "${tag}x1" type veth peer name "${tag}x2"
for d in x1 x2; do X ip link set "${tag}$d" mtu "$mtu" up; done
bulk_linux_link 10.81.0

# (Servers start with ip netns exec itself in the background, not through X: the pid
# must be the server's, so that stop_srv's SIGTERM reaches it.)
# One cell's client summary "req/s p50 p99" (bench/bench_summary.py) and its --stats
# line; the server's --stats line comes from its stderr once it is stopped.
run_cell() { # out-prefix command...
	local o=$1
	shift
	timeout $((secs + 30)) "$@" >"$o.json" 2>"$o.err" || true
	python3 bench/bench_summary.py <"$o.json" | awk '{print $1, $2, $3}'
}
stop_srv() {
	kill "${pids[-1]}" 2>/dev/null || true
	wait "${pids[-1]}" 2>/dev/null || true
	unset 'pids[-1]'
}
stats_of() { grep -h "^ipkit-bench: stats:" "$1" 2>/dev/null | cut -d: -f3- | tr "\n" " " || true; }

linux_cell() { # variant round -> req/s (blocking: LX_BLOCK_ARGS, the same spin window)
	local bp=${LX_BLOCK_ARGS---spin-us 50} r
	[ "$1" = busy-poll ] && bp=--busy-poll
	ip netns exec "$ns2" taskset -c 1 "$L" --ip 10.81.0.2 -p 7 $bp >/dev/null 2>&1 &
	pids+=($!)
	sleep 0.5
	r=$(run_cell "$tmpd/l" ip netns exec "$ns" taskset -c 0 "$L" -s 10.81.0.2 -p 7 -t "$secs" --json -c 32 \
		-l 1 -g 1 $bp)
	stop_srv
	echo "$r"
}
ipk_cell() { # bench kind variant A|B -> "req/s p50 p99 | server stats | client stats"
	local bench=$1 spec="afxdp:${tag}x1,mode=$2$xf" spec2="afxdp:${tag}x2,mode=$2$xf" bp r
	bp=${BLOCK_ARGS---spin-us 50}
	[ "$4" = B ] && bp=${BLOCK_ARGS_B:-}
	[ "$3" = busy-poll ] && bp=--busy-poll
	ip netns exec "$ns" taskset -c 1 "$bench" --io "$spec" --ip 10.9.0.1/24 -p 7 $bp --stats \
		>/dev/null 2>"$tmpd/s.err" &
	pids+=($!)
	sleep 0.5
	r=$(run_cell "$tmpd/c" ip netns exec "$ns" taskset -c 0 "$bench" --io "$spec2" --ip 10.9.0.2/24 \
		-s 10.9.0.1 -p 7 -t "$secs" --json -c 32 -l 1 -g 1 $bp --stats)
	stop_srv
	echo "$r | srv$(stats_of "$tmpd/s.err") | cli$(stats_of "$tmpd/c.err")"
}

echo "pp32_runs: MTU $mtu, ${secs} s cells, $rounds rounds, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "pp32_runs: A = $build ${BLOCK_ARGS---spin-us 50}${ab:+, B = ${build_b:-$build} ${BLOCK_ARGS_B:-}}"
: >"$tmpd/ratios"
for ((i = 1; i <= rounds; i++)); do
	for var in "${variants[@]}"; do
		lx=$(linux_cell "$var")
		echo "round $i $var linux: $lx"
		for k in "${kinds[@]}"; do
			order=(A)
			[ -n "$ab" ] && { if ((i % 2)); then order=(A B); else order=(B A); fi; }
			for which in "${order[@]}"; do
				b=$B
				[ "$which" = B ] && [ -n "$build_b" ] && b=$build_b/bench/ipkit-bench
				r=$(ipk_cell "$b" "$k" "$var" "$which")
				ratio=$(awk -v a="${r%% *}" -v l="${lx%% *}" \
					'BEGIN {if (l > 0) printf "%.2f", a / l; else print "n/a"}')
				echo "round $i $var $k $which: $r | ${ratio}x"
				echo "$var $k $which $ratio" >>"$tmpd/ratios"
			done
		done
	done
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "ratio to the same round's Linux cell (min / median / max):"
sort -k1,3 "$tmpd/ratios" | awk '
	function flush() { if (n) { asort_n(); printf "  %s: %.2f / %.2f / %.2f (%d runs)\n", key, v[1], (n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2), v[n], n } }
	function asort_n(  i, j, t) { for (i = 2; i <= n; i++) for (j = i; j > 1 && v[j - 1] > v[j]; j--) { t = v[j]; v[j] = v[j - 1]; v[j - 1] = t } }
	{ k = $1 " " $2 " " $3; if (k != key) { flush(); key = k; n = 0 } v[++n] = $4 + 0 }
	END { flush() }'
