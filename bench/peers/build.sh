#!/bin/bash
# make bench-peers: the lwIP and smoltcp in-memory harnesses in OUT/{lwip,smoltcp}.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-build/bench-peers}
mkdir -p "$out"
bash "$here/lwip/build.sh" "$out/lwip"
bash "$here/smoltcp/build.sh" "$out/smoltcp"
