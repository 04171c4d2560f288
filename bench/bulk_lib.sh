# Sourced by bench/tap_bulk.sh and bench/afxdp_bulk.sh: their shared prologue (the
# arguments, the programs, the namespaces and their removal) and the Linux row's veth
# pair; bench/io_pairs.sh takes the tap bridge from here too. Not a program of its own.

# bulk_args NAME DEFAULT_MTU [BUILD_DIR] [SECONDS] [ROUNDS]: sets build, secs, rounds,
# mtu (env MTU, else DEFAULT_MTU), B and L (ipkit-bench and its Linux twin); exits 2
# with a one-line message on a bad value or a program not built.
bulk_args() {
	local name=$1 v b
	build=${3:-build}
	secs=${4:-10}
	rounds=${5:-3}
	mtu=${MTU:-$2}
	for v in "$secs" "$rounds" "$mtu"; do
		case $v in '' | *[!0-9]*) echo "$name: '$v' is not a number" >&2; exit 2 ;; esac
	done
	[ "$secs" -ge 4 ] || { echo "$name: SECONDS must be at least 4" >&2; exit 2; }
	B=$build/bench/ipkit-bench
	L=$build/bench/ipkit-bench-linux
	for b in "$B" "$L"; do
		[ -x "$b" ] || { echo "$name: $b is not built (make)" >&2; exit 2; }
	done
}

# bulk_netns PREFIX: two namespaces ${tag}n and ${tag}p (tag = PREFIX + 4 random hex
# digits) with loopback up, X and Y to run a command in each, tmpd, pids; all removed
# (and the pids ended) on exit, also on failure or Ctrl-C.
bulk_netns() {
	tag=$1$(od -An -N2 -tx1 /dev/urandom | tr -d ' \n')
	ns=${tag}n
	ns2=${tag}p
	tmpd=$(mktemp -d)
	pids=()
	trap bulk_cleanup EXIT
	trap 'exit 130' INT TERM
	ip netns add "$ns"
	ip netns add "$ns2"
	X ip link set lo up
	Y ip link set lo up
}
X() { ip netns exec "$ns" "$@"; }
Y() { ip netns exec "$ns2" "$@"; }
bulk_cleanup() {
	local p
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
	ip netns del "$ns" 2>/dev/null || true
	ip netns del "$ns2" 2>/dev/null || true
	rm -rf "$tmpd"
}

# bulk_linux_link NET: the Linux row's veth pair ${tag}c (NET.1 in ns) - ${tag}d (NET.2
# in ns2), both at the MTU, up.
bulk_linux_link() {
	X ip link add "${tag}c" type veth peer name "${tag}d" netns "$ns2"
	X ip link set "${tag}c" mtu "$mtu"
	Y ip link set "${tag}d" mtu "$mtu"
	X ip addr add "$1.1/24" dev "${tag}c"
	X ip link set "${tag}c" up
	Y ip addr add "$1.2/24" dev "${tag}d"
	Y ip link set "${tag}d" up
}

# bulk_tap_bridge: TAP devices ${tag}t1 and ${tag}t2 (IFF_VNET_HDR) on a bridge ${tag}br
# in ns (STP off: ports forward at once), all up.
bulk_tap_bridge() {
	local t
	X ip link add "${tag}br" type bridge stp_state 0 forward_delay 0
	# br_netfilter, when loaded on the host, would run every bridged frame through
	# the (empty) iptables hooks of this namespace: a cost the veth rows never pay
	X sysctl -qw net.bridge.bridge-nf-call-iptables=0 net.bridge.bridge-nf-call-ip6tables=0 \
		net.bridge.bridge-nf-call-arptables=0 2>/dev/null || true
	X ip link set "${tag}br" up
	for t in t1 t2; do
		X ip tuntap add dev "${tag}$t" mode tap vnet_hdr
		X ip link set "${tag}$t" master "${tag}br"
		X ip link set "${tag}$t" up
	done
}
