#!/bin/bash
# Issue 20, item 4: instructions per echo request, iip API (the adapter) vs ipkit's
# native API, same harness (tests/compat/iip_echo_bench.c), same run, under
# valgrind --tool=callgrind: (I(N2) - I(N1)) / (N2 - N1), set-up cancels.
#   tests/compat/iip_figure.sh [BUILD] [SIZE]     (default build, 64-byte requests)
# BASE_REV=<git revision> also measures the adapter as it was at that revision (the
# bench built here from `git archive`, with the flags meson's debugoptimized build
# uses), in the same run: a before/after of a change to compat/iip.
set -euo pipefail
build=${1:-build} size=${2:-64} n1=2000 n2=4000
command -v valgrind >/dev/null || { echo "iip_figure.sh: valgrind not installed" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
ir() { valgrind --tool=callgrind --callgrind-out-file="$tmp/cg" "$@" 2>&1 >/dev/null |
	awk '/Collected/ {print $4}'; }
declare -A per
bins=(iip_echo_bench iip_echo_bench_native)
declare -A path=([iip_echo_bench]=$build/tests/compat/iip_echo_bench
	[iip_echo_bench_native]=$build/tests/compat/iip_echo_bench_native)
if [ -n "${BASE_REV:-}" ]; then
	root=$(git -C "$(dirname "$0")" rev-parse --show-toplevel)
	mkdir "$tmp/base"
	git -C "$root" archive "$BASE_REV" compat include core tests/compat | tar -x -C "$tmp/base"
	cc -I"$tmp/base/include" -I"$tmp/base/core" -I"$tmp/base" -std=c99 -O2 -g \
		-D_FILE_OFFSET_BITS=64 -D_GNU_SOURCE -o "$tmp/iip_echo_bench_base" \
		"$tmp/base/tests/compat/iip_echo_bench.c"
	bins+=(iip_echo_bench_base)
	path[iip_echo_bench_base]=$tmp/iip_echo_bench_base
fi
for v in "${bins[@]}"; do
	bin=${path[$v]}
	[ -x "$bin" ] || { echo "iip_figure.sh: $bin not built" >&2; exit 1; }
	i1=$(ir "$bin" $n1 "$size"); i2=$(ir "$bin" $n2 "$size")
	per[$v]=$(( (i2 - i1) / (n2 - n1) ))
	printf '%-22s %6d instructions/request (%d-byte echo; I(%d)=%d I(%d)=%d)\n' \
		"$v" "${per[$v]}" "$size" $n1 "$i1" $n2 "$i2"
done
awk -v a="${per[iip_echo_bench]}" -v b="${per[iip_echo_bench_native]}" \
	'BEGIN { printf "adapter / native: %.3f (%+.1f%%; target <= +5%%)\n", a / b, (a / b - 1) * 100 }'
if [ -n "${BASE_REV:-}" ]; then
	awk -v a="${per[iip_echo_bench_base]}" -v b="${per[iip_echo_bench_native]}" -v r="$BASE_REV" \
		'BEGIN { printf "adapter at %s / native: %.3f\n", r, a / b }'
fi
