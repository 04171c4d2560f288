#!/usr/bin/env bash
# Regenerates tests/wire/linux_frames6.h from IPv6 traffic between two Linux network
# namespaces: the DAD NS and MLDv2 reports of a link-local address coming up, a router
# solicitation, the NS/NA of address resolution, ping -6 (echo request + reply), a
# ping -6 -s 3000 sent in fragments, a TCP handshake (curl to python3 http.server,
# MSS / SACK-permitted / timestamps / window scale), and a UDP datagram to a closed
# port with the ICMPv6 port unreachable it draws.
# Captured with dumpcap on one end of a veth pair; transmit checksum offload is turned
# off on both ends so the captured checksums are the final ones. IPv6 is enabled on
# the captured end only once dumpcap runs, so the address's first frames are seen.
#
# Needs root, ip, ethtool, dumpcap, tshark, curl, python3, socat. Touches only the
# namespaces and devices it creates (prefix ipk6w<pid>), removes them on exit, also on
# failure. Not run by the tests: run it by hand and commit the header it writes.
#   usage: tests/wire/gen_linux_frames6.sh [output.h]
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
out=${1:-$here/linux_frames6.h}
p=ipk6w$$
nsa=${p}a nsb=${p}b
va=${p}x vb=${p}y
ipa=fd00:77::1 ipb=fd00:77::2
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
inns "$nsa" sysctl -qw "net.ipv6.conf.$va.disable_ipv6=1"
for side in "$nsa $va" "$nsb $vb"; do
	set -- $side
	inns "$1" ethtool -K "$2" tx off rx off tso off gso off gro off >/dev/null 2>&1 || true
	inns "$1" ip link set "$2" up
	inns "$1" ip link set lo up
done
inns "$nsb" ip addr add "$ipb/64" dev "$vb" nodad
wait_for 50 sh -c "ip netns exec $nsb ip -6 addr show dev $vb | grep -q 'scope link' && ! ip netns exec $nsb ip -6 addr show dev $vb | grep -q tentative"

inns "$nsb" timeout 40 python3 -m http.server "$port" --bind "$ipb" --directory "$tmp" \
	>/dev/null 2>&1 &
srv_pid=$!
echo "hello from linux" >"$tmp/hello.txt"
wait_for 50 sh -c "ip netns exec $nsb ss -ltn | grep -q ':$port'"

inns "$nsa" timeout 40 dumpcap -P -i "$va" -w "$tmp/cap.pcap" -a duration:35 \
	2>"$tmp/dumpcap.log" &
cap_pid=$!
wait_for 50 grep -q "Capturing on" "$tmp/dumpcap.log" || wait_for 20 test -s "$tmp/cap.pcap"
sleep 0.3

# The link-local address: DAD NS from ::, MLDv2 reports, then a router solicitation.
inns "$nsa" sysctl -qw "net.ipv6.conf.$va.disable_ipv6=0"
inns "$nsa" ip addr add "$ipa/64" dev "$va" nodad
wait_for 100 sh -c "ip netns exec $nsa ip -6 addr show dev $va | grep 'scope link' | grep -vq tentative"
sleep 1.5 # RFC 4861 §6.3.7: up to 1 s of random delay before the first RS

inns "$nsa" timeout 5 ping -6 -c 1 -W 2 "$ipb" >/dev/null
inns "$nsa" timeout 5 ping -6 -c 1 -W 2 -s 3000 "$ipb" >/dev/null
inns "$nsa" timeout 10 curl -s -g -o /dev/null --max-time 8 "http://[$ipb]:$port/hello.txt"
echo "ipkit udp over ipv6" | inns "$nsa" timeout 5 socat - "UDP6-SENDTO:[$ipb]:9999" || true
sleep 0.5
kill "$cap_pid"; wait "$cap_pid" 2>/dev/null || true
cap_pid=

[ -n "${KEEP_PCAP:-}" ] && cp "$tmp/cap.pcap" "$KEEP_PCAP"
python3 "$here/linux_frames6_to_c.py" "$tmp/cap.pcap" "$out"
echo "wrote $out"
