#!/bin/sh
# Issue 18's figures (root): wrk against Debian's nginx (1 and 2 workers) and
# redis-benchmark against Debian's redis-server, under libipkit-preload over ipkitd
# on TAP and on Linux's sockets over veth; the client in its own namespace in both.
# Needs: ninja -C build (or IPKIT_BUILD=DIR), bash tests/preload/debroot.sh, wrk.
# FIG_DUR (wrk seconds, default 5) and FIG_N (redis requests, default 100000).
set -e
cd "$(dirname "$0")/../.."
export IPKIT_BUILD="${IPKIT_BUILD:-build}"
exec /usr/bin/python3 tests/preload/figures.py
