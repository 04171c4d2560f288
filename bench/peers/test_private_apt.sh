#!/bin/bash
# make bench-peers fetches lwIP's source with a private apt configuration: the index
# URIs apt would fetch with it are Debian bookworm's deb-src ones only (no source of
# the machine's own configuration), and nothing in /etc/apt or /etc/apt/sources.list.d
# changes (the old fetch added a deb-src entry there; the lists and caches go to OUT/apt,
# and their system directories are left out of the check only because a concurrent
# `apt-get update` elsewhere would change them). No network: --print-uris only prints.
# Exit 77 (skipped) where apt-get is absent.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
command -v apt-get >/dev/null || exit 77
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
state() { ls -la --time-style=+%s /etc/apt /etc/apt/sources.list.d 2>/dev/null | md5sum; }
before=$(state)
bash "$here/lwip/build.sh" --apt-uris "$tmp/lwip" >"$tmp/uris"
after=$(state)
cat "$tmp/uris"
[ "$before" = "$after" ] || { echo "FAIL: the machine's apt directories changed"; exit 1; }
n=$(grep -c "^'http" "$tmp/uris" || true)
[ "$n" -ge 1 ] || { echo "FAIL: no URI printed"; exit 1; }
bad=$(grep "^'http" "$tmp/uris" | grep -v -E "^'http://[^']*/dists/bookworm/(InRelease|Release|main/source/)" || true)
[ -z "$bad" ] || { echo "FAIL: URIs outside bookworm's deb-src: $bad"; exit 1; }
grep -q "main/source/Sources" "$tmp/uris" || { echo "FAIL: no deb-src index"; exit 1; }
[ -f "$tmp/lwip/apt/sources.list" ] || { echo "FAIL: no private source list"; exit 1; }
echo "ok: private apt configuration, $n URIs, machine's apt untouched"
