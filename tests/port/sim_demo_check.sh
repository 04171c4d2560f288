#!/usr/bin/env bash
# `make sim-demo`: run the simulator demo, then make sure tshark reads its pcap cleanly.
#
#   demo_check.sh [BUILD_DIR]
#
# The demo (sim/demo.c) prints its own summary and writes ipkit-demo.pcap in its
# working directory, which is BUILD_DIR here. The check passes when tshark exits 0,
# reads at least one frame, reports no damaged or cut-short file and dissects no
# frame as malformed.
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
build=${1:-build}

demo=$(find "$build" -type f -name ipkit-sim-demo -perm -u+x 2>/dev/null | head -n 1)
if [ -z "$demo" ]; then
	echo "demo: FAIL: ipkit-sim-demo was not built (sim/demo.c missing or broken?)"
	exit 1
fi
demo=$(cd "$(dirname "$demo")" && pwd)/$(basename "$demo")

rm -f "$build/ipkit-demo.pcap"
(cd "$build" && timeout 300 "$demo") || { echo "demo: FAIL: ipkit-sim-demo exited $?"; exit 1; }

pcap=$build/ipkit-demo.pcap
if [ ! -s "$pcap" ]; then
	echo "demo: FAIL: $pcap was not written"
	exit 1
fi

err=$(mktemp)
trap 'rm -f "$err"' EXIT
# tshark warns on stderr when run as root; that warning is not an error
status=0
frames=$(tshark -n -r "$pcap" 2>"$err" | wc -l) || status=$?
malformed=$(tshark -n -r "$pcap" -Y _ws.malformed 2>/dev/null | wc -l) || true

problems=""
[ "$status" = 0 ] || problems="$problems tshark-exit=$status"
if grep -Eq 'appears to be damaged|cut short' "$err"; then
	problems="$problems damaged:$(grep -E 'appears to be damaged|cut short' "$err" | head -n 1)"
fi
[ "$frames" -gt 0 ] || problems="$problems no-frames"
[ "$malformed" = 0 ] || problems="$problems malformed=$malformed"

if [ -z "$problems" ]; then
	echo "demo: ok: tshark read $frames frames from $pcap, 0 malformed, no errors"
else
	echo "demo: FAIL: tshark on $pcap: $frames frames;$problems"
	sed 's/^/    /' "$err" | grep -v 'Running as user' || true
	exit 1
fi
