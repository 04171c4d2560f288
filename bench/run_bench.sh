#!/usr/bin/env bash
# make bench: the standard ipkit-bench suite, ipkit next to the Linux baseline measured
# in the same run, then bench/report.py writes the Markdown table and the plots.
#
#   bench/run_bench.sh [BUILD_DIR] [SECONDS_PER_CASE] [OUT_DIR]
#
# Topology (namespaces ipkB<hex>n and ipkB<hex>p, removed on exit, also on failure):
#   ipkit:  ipkit-bench on a TAP device in ns n; the Linux twin in ns n is its peer
#           through the kernel side of the TAP (10.N.0.1 <-> 10.N.0.2)
#   Linux:  ipkit-bench-linux in ns p, the same twin client in ns n, over a veth pair
# The client is the same program (the twin, C + epoll) in every row, so rows differ
# only in the server's stack; ratios are ipkit / Linux from this run. A benchmark,
# never a test: the machine is shared and the numbers move from run to run.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
build=${1:-build}
secs=${2:-3}
out=${3:-bench/results/$(date -u +%Y-%m-%d)}
bench=$build/bench/ipkit-bench
twin=$build/bench/ipkit-bench-linux
for p in "$bench" "$twin"; do
	[ -x "$p" ] || { echo "run_bench: $p not built (make)" >&2; exit 2; }
done
[ "$(id -u)" = 0 ] || { echo "run_bench: needs root (network namespaces)" >&2; exit 2; }

tag=ipkB$(od -An -N2 -tx1 /dev/urandom | tr -d ' \n')
ns=${tag}n ns2=${tag}p
tmp=$(mktemp -d)
pids=()
cleanup() { # every server we started (by PID), both namespaces, the scratch folder
	if [ ${#pids[@]} -gt 0 ]; then
		kill "${pids[@]}" 2>/dev/null || true
		wait "${pids[@]}" 2>/dev/null || true
	fi
	for n in "$ns" "$ns2"; do ip netns del "$n" 2>/dev/null || true; done
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
X() { ip netns exec "$ns" "$@"; }
Y() { ip netns exec "$ns2" "$@"; }

ip netns add "$ns"; ip netns add "$ns2"
for n in "$ns" "$ns2"; do
	ip netns exec "$n" ip link set lo up
	ip netns exec "$n" sysctl -qw net.ipv6.conf.all.disable_ipv6=1
	ip netns exec "$n" sysctl -qw net.ipv6.conf.default.disable_ipv6=1
done
X ip tuntap add dev "${tag}t" mode tap vnet_hdr
X ip addr add 10.81.0.1/24 dev "${tag}t"; X ip link set "${tag}t" up
X ip link add "${tag}a" type veth peer name "${tag}b" netns "$ns2"
X ip addr add 10.82.0.1/24 dev "${tag}a"; X ip link set "${tag}a" up
Y ip addr add 10.82.0.2/24 dev "${tag}b"; Y ip link set "${tag}b" up
ipk_ip=10.81.0.2 linux_ip=10.82.0.2
# arrays, not the X/Y functions: a background function would be a subshell, and the
# server must be the PID we end (ip netns exec execs the program in place)
ipk_srv=(ip netns exec "$ns" "$bench" --io "tap:${tag}t" --ip "$ipk_ip/24")
lx_srv=(ip netns exec "$ns2" "$twin" --ip "$linux_ip")

mkdir -p "$out"
raw=$out/raw.jsonl
: >"$raw"
start_server() { # args...: start in the background, wait for its ready line
	"$@" >/dev/null 2>"$tmp/srv.err" &
	pids+=($!)
	for _ in $(seq 100); do
		grep -q "serving on" "$tmp/srv.err" && return 0
		kill -0 "${pids[-1]}" 2>/dev/null || break
		sleep 0.05
	done
	echo "run_bench: server did not start: $(cat "$tmp/srv.err")" >&2
	exit 1
}
stop_server() {
	kill "${pids[-1]}" 2>/dev/null || true
	wait "${pids[-1]}" 2>/dev/null || true
	unset 'pids[-1]'
}
case_() { # series system x server_ip client-args...: one client run, one raw line
	local series=$1 system=$2 x=$3 ip=$4 line
	shift 4
	line=$(X timeout $((secs + 30)) "$twin" -s "$ip" --json -t "$secs" "$@" | grep '"summary"' || true)
	[ -n "$line" ] || line='{"type":"summary","errors":-1,"requests":0}'
	printf '{"series":"%s","system":"%s","x":%s,"args":"%s","summary":%s}\n' \
		"$series" "$system" "$x" "$*" "$line" >>"$raw"
	printf '  %-10s %-6s x=%-6s %s\n' "$series" "$system" "$x" \
		"$(sed -E 's/.*"req_per_s":([0-9.]+).*"tx_gbps":([0-9.]+).*"errors":(-?[0-9]+).*/\1 req\/s, tx \2 Gbit\/s, errors \3/' <<<"$line")"
}
each_system() { # server-args -- function: run function for ipkit and Linux servers
	local fn=$1
	shift
	start_server "${ipk_srv[@]}" "$@"; "$fn" ipkit "$ipk_ip"; stop_server
	start_server "${lx_srv[@]}" "$@"; "$fn" linux "$linux_ip"; stop_server
}

echo "run_bench: ${secs}s per case, results in $out"
# the machine is shared: the load around the run goes into the report
printf '{"series":"load_start","note":"%s"}\n' "$(cut -d' ' -f1-3 /proc/loadavg)" >>"$raw"
conns_series() { local c; for c in 1 4 16 32 64; do case_ conns "$1" "$c" "$2" -p 10000 -c "$c" -l 1; done; }
rate_series() {
	local r
	for r in 1000 5000 10000 20000 40000 0; do
		case_ rate "$1" "$r" "$2" -p 10000 -c 8 -l 64 -r "$r"
	done
}
bulk_series() { local l; for l in 64 512 1460 16384 65536; do case_ bulk "$1" "$l" "$2" -p 10000 -g 2 -l "$l"; done; }
udp_series() { local c; for c in 1 8; do case_ udp "$1" "$c" "$2" -p 10001 -n 17 -c "$c" -l 64; done; }
each_system conns_series -p 10000 -l 1
each_system rate_series -p 10000 -l 64
each_system bulk_series -p 10000 -g 2
each_system udp_series -p 10001 -n 17

# Thread models: ipkit-bench -T 2 under each model of the multi-core runtime against
# the twin's -T 2 (SO_REUSEPORT), 16 connections; skipped (with the reason in the
# report) when this build has no multi-core runtime.
if ip netns exec "$ns" "$bench" --io "tap:${tag}t" --ip "$ipk_ip/24" -T 2 -n 17 2>&1 |
	grep -q "not available yet"; then
	printf '{"series":"models","note":"ipkit-bench was built without the multi-core runtime (-T 2 refused), so no thread-model figures"}\n' >>"$raw"
else
	for m in unified merge split; do
		start_server "${ipk_srv[@]}" -p 10000 -T 2 --model "$m"
		case_ models "ipkit-$m" 16 "$ipk_ip" -p 10000 -c 16 -l 64 -T 2
		stop_server
	done
	start_server "${lx_srv[@]}" -p 10000 -T 2
	case_ models linux 16 "$linux_ip" -p 10000 -c 16 -l 64 -T 2
	stop_server
fi

# In-memory harness (bench/inmem, helper inmem's; see its --help): when this build has
# it, the same four workloads for every *-inmem program found (ipkit, its unity build,
# and lwIP/smoltcp peers when make bench-peers built them), as series "inmem".
mapfile -t inmems < <(find "$build/bench" "$build/bench-peers" -name '*-inmem*' -type f -perm -u+x -not -name '*-stats' -not -path '*/target/*' 2>/dev/null | sort)
if [ ${#inmems[@]} -gt 0 ]; then
	for prog in "${inmems[@]}"; do
		for args in "-w pingpong -c 1 -n 200000" "-w pingpong -c 32 -n 200000" \
			"-w bulk -b 268435456 -p sw" "-w bulk -b 268435456 -p offload"; do
			# shellcheck disable=SC2086
			"$prog" $args -q --json - 2>/dev/null | grep '^{' |
				sed 's/^/{"series":"inmem","summary":/; s/$/}/' >>"$raw" || true
		done
	done
else
	printf '{"series":"inmem","note":"HOOK: the in-memory harness (bench/inmem) is not in this build; when it is, run_bench.sh runs every *-inmem program it finds and this section lists them"}\n' >>"$raw"
fi

# Instructions per request / per 1460 B under callgrind for the same programs
# (bench/inmem/instr.sh --quick: both wires, a few minutes), as series "instr": the figure that
# does not depend on the machine's load.
if [ ${#inmems[@]} -gt 0 ] && command -v valgrind >/dev/null; then
	bash bench/inmem/instr.sh --quick --build "$build" --json "$raw.instr" >/dev/null 2>&1 || true
	[ -f "$raw.instr" ] && sed 's/^/{"series":"instr","summary":/; s/$/}/' "$raw.instr" >>"$raw"
	rm -f "$raw.instr"
fi

printf '{"series":"load_end","note":"%s"}\n' "$(cut -d' ' -f1-3 /proc/loadavg)" >>"$raw"
printf '{"series":"command","note":"%s"}\n' "bench/run_bench.sh $build $secs" >>"$raw"
/usr/bin/python3 bench/report.py "$raw" "$out"
echo "run_bench: wrote $out/report.md"
