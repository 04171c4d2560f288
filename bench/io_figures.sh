#!/usr/bin/env bash
# Benchmark run (not a test): ipkit over each Linux backend against Linux<->Linux over
# veth, all measured side by side in one run (the machine is noisy: compare rows of
# the same run, not runs).
#
#   ping-pong: 1-byte TCP requests/s and p50/p99 latency at 1 and 32 connections, for
#              each server in three variants: unpinned blocking, pinned blocking
#              (server on CPU 1, client on CPU 0), pinned busy-poll (ipkit --busy-poll;
#              the Linux server spins on epoll_wait with a zero timeout)
#   bulk:      one connection, the sender streams BULK bytes to a sink; Gbit/s
#              unpinned and pinned
#
# Clients: the Linux ping-pong client is bench/linux's ipkit-bench-linux when it is
# built in BUILD_DIR, else bench/pingpong.py (python epoll; it caps every row alike).
# memlink has no kernel to put a Linux client on: its rows use ipkit-bench (ipkit on
# both ends) when built, and ipkit-nc for bulk.
#
#   bench/io_figures.sh [BUILD_DIR] [SECONDS] [BULK_BYTES]
# Needs root (network namespaces). Everything it creates is named ipkF<4 hex>... and
# removed on exit, also on failure or Ctrl-C.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
build=${1:-build}
secs=${2:-3}
bulk_bytes=${3:-268435456}
ex=$build/examples
blin=$build/bench/ipkit-bench-linux
bipk=$build/bench/ipkit-bench
tag=ipkF$(od -An -N2 -tx1 /dev/urandom | tr -d ' \n')
ns=${tag}n   # ipkit's devices and the Linux client
ns2=${tag}p  # the Linux server for Linux<->Linux
ml=${tag}m   # memlink name
pids=()
cleanup() {
	local p
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
	ip netns del "$ns" 2>/dev/null || true
	ip netns del "$ns2" 2>/dev/null || true
	rm -f /dev/shm/ipkit-ml-"$ml"* 2>/dev/null || true
}
trap cleanup EXIT
trap 'exit 130' INT TERM
# Foreground only: started in the background, a function is a subshell and $! would
# not be the process to end (background launches call ip netns exec directly).
X() { ip netns exec "$ns" "$@"; }
Y() { ip netns exec "$ns2" "$@"; }

have_afxdp=0
grep -q IPK_IO_HAVE_AFXDP "$build/compile_commands.json" 2>/dev/null && have_afxdp=1
have_memlink=0
grep -q IPK_IO_HAVE_MEMLINK "$build/compile_commands.json" 2>/dev/null && have_memlink=1

# ---------------------------------------------------------------- topology
ip netns add "$ns"; ip netns add "$ns2"
X ip link set lo up; Y ip link set lo up
X sysctl -qw net.ipv6.conf.all.disable_ipv6=1
X sysctl -qw net.ipv6.conf.default.disable_ipv6=1
# tap: Linux owns the kernel side
X ip tuntap add dev "${tag}t" mode tap vnet_hdr
X ip addr add 10.78.0.1/24 dev "${tag}t"; X ip link set "${tag}t" up
# afpacket: a veth pair, Linux on a, ipkit on b (Linux keeps TSO/GSO: ipkit takes them)
X ip link add "${tag}a" type veth peer name "${tag}b"
X ip addr add 10.79.0.1/24 dev "${tag}a"; X ip link set "${tag}a" up; X ip link set "${tag}b" up
# afxdp: its own veth pair; AF_XDP gets raw frames, so the Linux end sends complete
# ones (no checksum offload, no TSO/GSO), as in the interop tests
X ip link add "${tag}x" type veth peer name "${tag}y"
X ip addr add 10.81.0.1/24 dev "${tag}x"; X ip link set "${tag}x" up; X ip link set "${tag}y" up
X ethtool -K "${tag}x" tx off rx off tso off gso off gro off >/dev/null 2>&1 || true
# Linux<->Linux: a veth into the second namespace
X ip link add "${tag}c" type veth peer name "${tag}d" netns "$ns2"
X ip addr add 10.80.0.1/24 dev "${tag}c"; X ip link set "${tag}c" up
Y ip addr add 10.80.0.2/24 dev "${tag}d"; Y ip link set "${tag}d" up

# ---------------------------------------------------------------- helpers
# The variant decides the CPUs: "" unpinned, else server on 1 and client on 0.
srv_pin() { [ "$1" = unpinned ] && return; echo "taskset -c 1"; }
cli_pin() { [ "$1" = unpinned ] && return; echo "taskset -c 0"; }

wait_ping() { # ip: bounded wait until the server answers
	local i
	for i in $(seq 50); do X ping -c 1 -W 1 "$1" >/dev/null 2>&1 && return 0; sleep 0.1; done
	return 1
}
wait_port() { # netns-cmd ip port: bounded wait until a TCP listener answers
	local i
	for i in $(seq 50); do
		"$1" timeout 1 bash -c "exec 3<>/dev/tcp/$2/$3" 2>/dev/null && return 0
		sleep 0.1
	done
	return 1
}
stop_last() {
	kill "${pids[-1]}" 2>/dev/null || true
	wait "${pids[-1]}" 2>/dev/null || true
	unset 'pids[-1]'
}

# ping-pong client: prints "req/s p50 p99" (µs)
pp_linux() { # variant ip port conns
	local pin
	pin=$(cli_pin "$1")
	if [ -x "$blin" ]; then
		X $pin timeout $((secs + 20)) "$blin" -s "$2" -p "$3" -c "$4" -t "$secs" -l 1 -g 1 --json |
			json_summary
	else
		X $pin timeout $((secs + 20)) python3 bench/pingpong.py client "$2" "$3" "$secs" "$4"
	fi
}

cell() { tr ' ' '/' <<<"$1"; }

# ipkit-bench(-linux) --json -> "req/s p50 p99" (bench/bench_summary.py, without its
# Gbit/s field; "0 0 0" when there is no summary or it counted errors)
json_summary() { python3 bench/bench_summary.py | cut -d' ' -f1-3; }

# server_start kind variant: start the echo server of one row; sets srv_ip. The server
# is ipkit-bench / ipkit-bench-linux when built (twins: same loop, ipkit vs kernel
# sockets), else ipkit-echo / pingpong.py.
srv_port=7
server_start() {
	local kind=$1 var=$2 pin bp="" spec
	pin=$(srv_pin "$var")
	[ "$var" = busypoll ] && bp=--busy-poll
	case $kind in
	tap) srv_ip=10.78.0.2; spec="tap:${tag}t" ;;
	afpacket) srv_ip=10.79.0.2; spec="afpacket:${tag}b" ;;
	afpacket-v3) srv_ip=10.79.0.2; spec="afpacket:${tag}b,rx=v3" ;;
	afxdp) srv_ip=10.81.0.2; spec="afxdp:${tag}y,mode=skb" ;;
	linux) srv_ip=10.80.0.2 ;;
	esac
	if [ "$kind" = linux ] && [ -x "$blin" ]; then
		ip netns exec "$ns2" $pin "$blin" --ip $srv_ip -p 7 $bp >/dev/null 2>&1 &
	elif [ "$kind" = linux ]; then
		[ "$var" = busypoll ] && bp=--spin
		ip netns exec "$ns2" $pin python3 bench/pingpong.py server $srv_ip 7 $bp &
	elif [ -x "$bipk" ]; then
		ip netns exec "$ns" $pin "$bipk" --io "$spec" --ip $srv_ip/24 -p 7 $bp >/dev/null 2>&1 &
	else
		ip netns exec "$ns" $pin "$ex/ipkit-echo" --io "$spec" --ip $srv_ip/24 $bp 2>/dev/null &
	fi
	pids+=($!)
	if [ "$kind" = linux ]; then wait_port X $srv_ip 7; else sleep 0.3; wait_ping $srv_ip; fi
}

pp_row() { # kind variant label
	local r1 r32
	if ! server_start "$1" "$2"; then
		printf '| %-34s | %-8s | failed to start | |\n' "$3" "$2"
		stop_last
		return
	fi
	r1=$(pp_linux "$2" "$srv_ip" "$srv_port" 1 || echo "0 0 0")
	r32=$(pp_linux "$2" "$srv_ip" "$srv_port" 32 || echo "0 0 0")
	printf '| %-34s | %-9s | %s | %s |\n' "$3" "$2" "$(cell "$r1")" "$(cell "$r32")"
	stop_last
}

# memlink: ipkit-bench server on role a, ipkit-bench client on role b (no kernel, so
# no Linux client possible)
pp_memlink_row() { # variant
	local var=$1 bp="" mbp="" pin cpin r1 r32
	pin=$(srv_pin "$var"); cpin=$(cli_pin "$var")
	if [ ! -x "$bipk" ]; then
		printf '| %-34s | %-9s | needs ipkit-bench | needs ipkit-bench |\n' "ipkit over memlink" "$var"
		return
	fi
	[ "$var" = busypoll ] && { bp=--busy-poll; mbp=,busypoll=1; }
	$pin "$bipk" --io "memlink:$ml,role=a$mbp" --ip 10.9.0.1/24 -p 7 $bp >/dev/null 2>&1 &
	pids+=($!); sleep 0.3
	r1=$($cpin timeout $((secs + 20)) "$bipk" --io "memlink:$ml,role=b$mbp" --ip 10.9.0.2/24 $bp \
		-s 10.9.0.1 -p 7 -c 1 -t "$secs" -l 1 -g 1 --json | json_summary || echo "0 0 0")
	r32=$($cpin timeout $((secs + 20)) "$bipk" --io "memlink:$ml,role=b$mbp" --ip 10.9.0.2/24 $bp \
		-s 10.9.0.1 -p 7 -c 32 -t "$secs" -l 1 -g 1 --json | json_summary || echo "0 0 0")
	printf '| %-34s | %-9s | %s | %s |\n' "ipkit over memlink, ipkit client" "$var" \
		"$(cell "$r1")" "$(cell "$r32")"
	stop_last
	rm -f /dev/shm/ipkit-ml-"$ml"* 2>/dev/null || true
}

gbits() { awk -v ns="$1" -v b="$bulk_bytes" 'BEGIN {printf "%.2f", b * 8 / ns}'; }

# bulk: Linux (socat) sends bulk_bytes to a sink at ip:5009; prints Gbit/s
bulk_from_linux() { # variant ip
	local t0 t1 pin
	pin=$(cli_pin "$1")
	t0=$(date +%s%N)
	X $pin timeout 120 socat -u OPEN:/dev/zero,readbytes="$bulk_bytes" \
		"TCP:$2:5009,retry=20,interval=0.1" || { echo "failed"; return; }
	t1=$(date +%s%N)
	gbits $((t1 - t0))
}

bulk_row() { # kind variant label
	local kind=$1 var=$2 pin spec ip r
	pin=$(srv_pin "$var")
	case $kind in
	tap) spec="tap:${tag}t"; ip=10.78.0.2 ;;
	tap-off) spec="tap:${tag}t,offload=0"; ip=10.78.0.2 ;;
	afpacket) spec="afpacket:${tag}b"; ip=10.79.0.2 ;;
	afxdp) spec="afxdp:${tag}y,mode=skb"; ip=10.81.0.2 ;;
	linux) ip=10.80.0.2 ;;
	esac
	if [ "$kind" = linux ]; then
		# no readiness probe: the listener takes one connection; socat retries instead
		ip netns exec "$ns2" $pin timeout 150 socat -u TCP-LISTEN:5009,reuseaddr OPEN:/dev/null &
		pids+=($!); sleep 0.3
	else
		ip netns exec "$ns" $pin timeout 150 "$ex/ipkit-nc" --io "$spec" --ip $ip/24 -l 5009 --no-output 2>/dev/null &
		pids+=($!); sleep 0.3; wait_ping $ip || true
	fi
	r=$(bulk_from_linux "$var" "$ip")
	printf '| %-34s | %-9s | %s |\n' "$3" "$var" "$r"
	wait "${pids[-1]}" 2>/dev/null || true; unset 'pids[-1]'
}

bulk_memlink_row() { # variant
	local var=$1 pin cpin t0 t1
	pin=$(srv_pin "$var"); cpin=$(cli_pin "$var")
	$pin timeout 150 "$ex/ipkit-nc" --io "memlink:$ml,role=a" --ip 10.9.0.1/24 -l 5009 --no-output 2>/dev/null &
	pids+=($!); sleep 0.3
	t0=$(date +%s%N)
	$cpin timeout 120 "$ex/ipkit-nc" --io "memlink:$ml,role=b" --ip 10.9.0.2/24 \
		--send-size "$bulk_bytes" --no-output 10.9.0.1 5009 2>/dev/null || true
	t1=$(date +%s%N)
	wait "${pids[-1]}" 2>/dev/null || true; unset 'pids[-1]'
	printf '| %-34s | %-9s | %s |\n' "ipkit-nc -> ipkit-nc over memlink" "$var" "$(gbits $((t1 - t0)))"
	rm -f /dev/shm/ipkit-ml-"$ml"* 2>/dev/null || true
}

# ---------------------------------------------------------------- run
client_name="python epoll (bench/pingpong.py); servers ipkit-echo and pingpong.py"
[ -x "$blin" ] && client_name="C epoll (ipkit-bench-linux); servers ipkit-bench and ipkit-bench-linux"
echo "ping-pong, 1-byte TCP, Linux client: $client_name, ${secs}s per cell:"
echo "requests/s / p50 µs / p99 µs"
echo
echo "| server                             | variant   | 1 connection | 32 connections |"
echo "|---|---|---|---|"
kinds=(tap afpacket afpacket-v3)
[ $have_afxdp = 1 ] && kinds+=(afxdp)
for var in unpinned pinned busypoll; do
	for kind in "${kinds[@]}"; do
		label="ipkit over $kind"
		[ $kind = afpacket-v3 ] && label="ipkit over afpacket,rx=v3"
		[ $kind = afxdp ] && label="ipkit over afxdp (copy, skb)"
		pp_row $kind $var "$label"
	done
	pp_row linux $var "Linux over veth"
	[ $have_memlink = 1 ] && pp_memlink_row $var
done

echo
echo "one-connection bulk, $bulk_bytes bytes, Linux (socat) sends unless noted; Gbit/s"
echo
echo "| receiver                           | variant   | Gbit/s |"
echo "|---|---|---|"
bkinds=(tap tap-off afpacket)
[ $have_afxdp = 1 ] && bkinds+=(afxdp)
for var in unpinned pinned; do
	for kind in "${bkinds[@]}"; do
		label="ipkit-nc over $kind"
		[ $kind = tap-off ] && label="ipkit-nc over tap,offload=0"
		[ $kind = afxdp ] && label="ipkit-nc over afxdp (copy, skb)"
		bulk_row $kind $var "$label"
	done
	bulk_row linux $var "Linux over veth"
	[ $have_memlink = 1 ] && bulk_memlink_row $var
done
