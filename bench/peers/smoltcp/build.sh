#!/bin/bash
# Build bench/peers/smoltcp's harness with cargo (smoltcp pinned in Cargo.toml, exact
# versions in Cargo.lock): OUT/smoltcp-inmem (default build/bench-peers/smoltcp).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-$here/../../../build/bench-peers/smoltcp}
mkdir -p "$out"
out=$(cd "$out" && pwd)
command -v cargo >/dev/null || { echo "bench-peers: cargo not found (install rustup's stable toolchain)"; exit 1; }
CARGO_TARGET_DIR="$out/target" cargo build --release --locked --quiet --manifest-path "$here/Cargo.toml"
cp "$out/target/release/smoltcp-inmem" "$out/smoltcp-inmem"
echo "bench-peers: built $out/smoltcp-inmem"
