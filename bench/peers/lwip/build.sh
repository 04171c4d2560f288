#!/bin/bash
# Build bench/peers/lwip's harness: lwip-inmem in OUT (default build/bench-peers/lwip).
# lwIP 2.1.3 comes from Debian's source package: a deb-src entry for bookworm is added
# (same mirror and key as the existing sources) when apt has none, then
# `apt-get source lwip` unpacks it into OUT/src. Nothing of lwIP is committed.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
out=${1:-$root/build/bench-peers/lwip}
cc=${CC:-cc}
cflags=${CFLAGS:--O2 -g}
mkdir -p "$out"
out=$(cd "$out" && pwd)

fetch() {
	local src="$out/src"
	[ -f "$src/src/core/tcp_in.c" ] && return 0
	if ! apt-get source --download-only --print-uris lwip >/dev/null 2>&1; then
		local list=/etc/apt/sources.list.d/ipkit-deb-src.sources
		local sudo=""
		[ "$(id -u)" = 0 ] || sudo=sudo
		echo "bench-peers: adding a deb-src entry for bookworm ($list)"
		printf '%s\n' 'Types: deb-src' 'URIs: http://deb.debian.org/debian' \
			'Suites: bookworm' 'Components: main' \
			'Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg' | $sudo tee "$list" >/dev/null
		$sudo apt-get update -q
	fi
	command -v dpkg-source >/dev/null || { [ "$(id -u)" = 0 ] && apt-get install -y -q dpkg-dev || sudo apt-get install -y -q dpkg-dev; }
	rm -rf "$out/dl" && mkdir -p "$out/dl"
	(cd "$out/dl" && apt-get source --download-only lwip=2.1.3+dfsg1-2 >/dev/null 2>&1 || \
		(cd "$out/dl" && apt-get source --download-only lwip))
	rm -rf "$src"
	dpkg-source -x "$out"/dl/lwip_2.1.3*.dsc "$src" >/dev/null 2>&1
}

fetch
lw="$out/src/src"
files="$lw/core/init.c $lw/core/def.c $lw/core/inet_chksum.c $lw/core/ip.c $lw/core/mem.c
$lw/core/memp.c $lw/core/netif.c $lw/core/pbuf.c $lw/core/stats.c $lw/core/sys.c $lw/core/tcp.c
$lw/core/tcp_in.c $lw/core/tcp_out.c $lw/core/timeouts.c $lw/core/ipv4/etharp.c
$lw/core/ipv4/icmp.c $lw/core/ipv4/ip4.c $lw/core/ipv4/ip4_addr.c $lw/core/ipv4/ip4_frag.c
$lw/netif/ethernet.c"
inc="-I$here -I$root/bench/inmem -I$lw/include"
for inst in a b; do
	obj="$out/obj-$inst"
	rm -rf "$obj" && mkdir -p "$obj"
	for f in $files "$here/lw_inst.c"; do
		$cc $cflags -fvisibility=hidden -DLWI_API=lwi_${inst}_api $inc -c "$f" \
			-o "$obj/$(basename "$f" .c).o"
	done
	ld -r -o "$out/lwip_$inst.o" "$obj"/*.o
	objcopy --localize-hidden "$out/lwip_$inst.o"
done
$cc $cflags -D_GNU_SOURCE -I"$root/bench/inmem" -I"$here" -o "$out/lwip-inmem" \
	"$here/lwip-inmem.c" "$root/bench/inmem/im_common.c" "$out/lwip_a.o" "$out/lwip_b.o"
echo "bench-peers: built $out/lwip-inmem"
