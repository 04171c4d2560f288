#!/usr/bin/env bash
# Unpacks Debian's own nginx and redis (server, cli, benchmark) and the two libraries
# redis needs that a base system lacks into DIR (default build-debroot at the repo's
# root), for the preload suite's nginx and redis cases (issue 18: Debian's binaries,
# nothing recompiled). `apt-get download` + `dpkg-deb -x`, not `apt-get install`:
# installing would start nginx and redis as services on this machine's own ports.
# The tests find DIR by itself (tests/preload/test_preload.py) or by $IPKIT_NGINX_DIR
# and $IPKIT_REDIS_DIR. Idempotent: does nothing when the binaries are there.
# Exit 0 also when the packages cannot be had (the two cases then skip, saying why).
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
dir=${1:-$root/build-debroot}
pkgs="nginx redis-server redis-tools libjemalloc2 liblzf1"

if [ -x "$dir/usr/sbin/nginx" ] && [ -x "$dir/usr/bin/redis-server" ]; then
	exit 0
fi
command -v apt-get >/dev/null 2>&1 || { echo "debroot: no apt-get; nginx/redis cases will skip"; exit 0; }
mkdir -p "$dir/.debs"
cd "$dir/.debs"
# apt-get download runs as the _apt user where it can; a directory root owns is fine
# for root (the sandbox is dropped with a warning only).
if ! apt-get download -q $pkgs >/dev/null 2>"$dir/.debs/download.log"; then
	echo "debroot: apt-get download $pkgs failed ($(tail -n 1 "$dir/.debs/download.log")); nginx/redis cases will skip"
	exit 0
fi
for d in ./*.deb; do
	dpkg-deb -x "$d" "$dir"
done
echo "debroot: nginx and redis unpacked into $dir"
