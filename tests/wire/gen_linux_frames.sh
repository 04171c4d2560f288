#!/usr/bin/env bash
# Regenerates tests/wire/linux_frames.h from traffic between two Linux network
# namespaces: ARP, ping (echo request + reply) and an HTTP GET (python3 http.server,
# curl) whose handshake carries MSS / SACK-permitted / timestamps / window scale.
# Captured with dumpcap on one end of a veth pair; transmit checksum offload is turned
# off on both ends so the captured checksums are the final ones.
#
# Needs root, ip, ethtool, dumpcap, tshark, curl, python3. Touches only the namespaces
# and devices it creates (prefix ipkw<pid>), removes them on exit, also on failure.
# Not run by the tests: run it by hand and commit the header it writes.
#   usage: tests/wire/gen_linux_frames.sh [output.h]
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
out=${1:-$here/linux_frames.h}
p=ipkw$$
nsa=${p}a nsb=${p}b
va=${p}x vb=${p}y
ipa=10.199.77.1 ipb=10.199.77.2
maca=02:00:5e:00:77:01 macb=02:00:5e:00:77:02
port=8080
tmp=$(mktemp -d /tmp/${p}.XXXXXX)
cap_pid= srv_pid=

cleanup() {
	set +e
	[ -n "$srv_pid" ] && kill "$srv_pid" 2>/dev/null && wait "$srv_pid" 2>/dev/null
	[ -n "$cap_pid" ] && kill "$cap_pid" 2>/dev/null && wait "$cap_pid" 2>/dev/null
	ip netns del "$nsa" 2>/dev/null
	ip netns del "$nsb" 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

inns() { ns=$1; shift; ip netns exec "$ns" "$@"; }

# Polls a command up to n times, 0.1 s apart.
wait_for() {
	n=$1; shift
	for _ in $(seq "$n"); do "$@" >/dev/null 2>&1 && return 0; sleep 0.1; done
	echo "timed out waiting for: $*" >&2
	return 1
}

ip netns add "$nsa"
ip netns add "$nsb"
ip link add "$va" netns "$nsa" address "$maca" type veth peer name "$vb" netns "$nsb" address "$macb"
for side in "$nsa $va $ipa" "$nsb $vb $ipb"; do
	set -- $side
	inns "$1" ethtool -K "$2" tx off rx off tso off gso off gro off >/dev/null 2>&1 || true
	inns "$1" ip addr add "$3/24" dev "$2"
	inns "$1" ip link set "$2" up
	inns "$1" ip link set lo up
done

inns "$nsb" timeout 30 python3 -m http.server "$port" --bind "$ipb" --directory "$tmp" \
	>/dev/null 2>&1 &
srv_pid=$!
echo "hello from linux" >"$tmp/hello.txt"
wait_for 50 sh -c "ip netns exec $nsb ss -ltn | grep -q ':$port'"

inns "$nsa" timeout 30 dumpcap -P -i "$va" -w "$tmp/cap.pcap" -a duration:25 \
	2>"$tmp/dumpcap.log" &
cap_pid=$!
wait_for 50 grep -q "Capturing on" "$tmp/dumpcap.log" || wait_for 20 test -s "$tmp/cap.pcap"
sleep 0.3

inns "$nsa" timeout 5 ping -c 1 -W 2 "$ipb" >/dev/null
inns "$nsa" timeout 10 curl -s -o /dev/null --max-time 8 "http://$ipb:$port/hello.txt"
sleep 0.5
kill "$cap_pid"; wait "$cap_pid" 2>/dev/null || true
cap_pid=

python3 "$here/linux_frames_to_c.py" "$tmp/cap.pcap" "$out"
echo "wrote $out"
