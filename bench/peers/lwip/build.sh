#!/bin/bash
# Build bench/peers/lwip's harness: OUT/lwip-inmem and OUT/lwip-inmem-stats (default
# OUT build/bench-peers/lwip).
# lwIP 2.1.3 comes from Debian's source package, fetched with `apt-get source` under a
# private apt configuration in OUT/apt (its own deb-src line, lists and caches): the
# machine's apt configuration is neither read for sources nor changed. Nothing of
# lwIP is committed.
#
# Built the way lwIP's users build for speed (bench/inmem/README.md, "How each peer is
# built"): CFLAGS default to -O3 -flto=auto -g (ipkit is measured with the same flags
# in build-rel, beside its -O2 default; LTO runs across all of lwIP and the instance
# file at the partial link), byte swaps as compiler builtins (arch/cc.h), statistics
# off, checksum algorithm #2 (lwipopts.h). lwip-inmem-stats is the same with
# LWIP_STATS, TCP_STATS and MIB2_STATS on: it counts checksum drops and
# retransmissions, for --corrupt.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
# --apt-uris OUT: only write the private apt configuration and print the index URIs
# `apt-get update` would fetch with it (no network; bench/peers/test_private_apt.sh)
uris=""
[ "${1:-}" = --apt-uris ] && { uris=1; shift; }
out=${1:-$root/build/bench-peers/lwip}
cc=${CC:-cc}
cflags=${CFLAGS:--O3 -flto=auto -g}
mkdir -p "$out"
out=$(cd "$out" && pwd)

# apt with a private configuration under OUT/apt: its own source list (one deb-src
# line for bookworm, Debian's archive key), package lists and caches. Nothing under
# /etc/apt, /var/lib/apt or /var/cache/apt is read for sources or written.
papt() {
	local d="$out/apt"
	"$@" -o Dir::Etc::sourcelist="$d/sources.list" -o Dir::Etc::sourceparts=- \
		-o Dir::State::Lists="$d/lists" -o Dir::Cache="$d/cache" \
		-o Dir::Cache::pkgcache= -o Dir::Cache::srcpkgcache="$d/cache/srcpkgcache.bin"
}

apt_config() {
	local d="$out/apt"
	mkdir -p "$d/lists/partial" "$d/cache/archives/partial"
	echo "deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] ${LWIP_MIRROR:-http://deb.debian.org/debian} bookworm main" \
		>"$d/sources.list"
}

fetch() {
	local src="$out/src" d="$out/apt"
	[ -f "$src/src/core/tcp_in.c" ] && return 0
	command -v dpkg-source >/dev/null || { echo "bench-peers: dpkg-source not found (apt-get install dpkg-dev)"; exit 1; }
	apt_config
	[ -n "$(ls "$d/lists" | grep -v partial)" ] || papt apt-get update -q >/dev/null
	rm -rf "$out/dl" && mkdir -p "$out/dl"
	(cd "$out/dl" && papt apt-get source --download-only -q lwip=2.1.3+dfsg1-2 >/dev/null 2>&1 ||
		papt apt-get source --download-only -q lwip)
	rm -rf "$src"
	dpkg-source -x "$out"/dl/lwip_2.1.3*.dsc "$src" >/dev/null 2>&1
}

if [ -n "$uris" ]; then
	apt_config
	papt apt-get update --print-uris
	exit 0
fi
fetch
lw="$out/src/src"
files="$lw/core/init.c $lw/core/def.c $lw/core/inet_chksum.c $lw/core/ip.c $lw/core/mem.c
$lw/core/memp.c $lw/core/netif.c $lw/core/pbuf.c $lw/core/stats.c $lw/core/sys.c $lw/core/tcp.c
$lw/core/tcp_in.c $lw/core/tcp_out.c $lw/core/timeouts.c $lw/core/ipv4/etharp.c
$lw/core/ipv4/icmp.c $lw/core/ipv4/ip4.c $lw/core/ipv4/ip4_addr.c $lw/core/ipv4/ip4_frag.c
$lw/netif/ethernet.c"
inc="-I$here -I$root/bench/inmem -I$lw/include"
# One instance: lwIP and lw_inst.c compiled with hidden visibility, partially linked
# into one object (LTO runs here: -r with -flinker-output=nolto-rel gives a normal
# object), then made local so two instances can share a program.
instance() { # name object extra-cflags
	local obj="$out/obj-$1" f
	rm -rf "$obj" && mkdir -p "$obj"
	for f in $files "$here/lw_inst.c"; do
		$cc $cflags $3 -fvisibility=hidden -DLWI_API=lwi_${1:0:1}_api $inc -c "$f" \
			-o "$obj/$(basename "$f" .c).o"
	done
	case " $cflags " in
	*" -flto"*) $cc $cflags -r -flinker-output=nolto-rel -nostdlib -o "$2" "$obj"/*.o ;;
	*) ld -r -o "$2" "$obj"/*.o ;;
	esac
	objcopy --localize-hidden "$2"
}
for v in "" -stats; do
	extra=""
	[ -z "$v" ] || extra=-DIM_LWIP_STATS=1
	instance "a$v" "$out/lwip_a$v.o" "$extra"
	instance "b$v" "$out/lwip_b$v.o" "$extra"
	$cc $cflags $extra -D_GNU_SOURCE -I"$root/bench/inmem" -I"$here" -o "$out/lwip-inmem$v" \
		"$here/lwip-inmem.c" "$root/bench/inmem/im_common.c" "$out/lwip_a$v.o" "$out/lwip_b$v.o"
	echo "bench-peers: built $out/lwip-inmem$v"
done
