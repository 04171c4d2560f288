#!/bin/bash
# Issue 20, item 4: instructions per echo request, iip API (the adapter) vs ipkit's
# native API, same harness (tests/compat/iip_echo_bench.c), same run, under
# valgrind --tool=callgrind: (I(N2) - I(N1)) / (N2 - N1), set-up cancels.
#   tests/compat/iip_figure.sh [BUILD] [SIZE]     (default build, 64-byte requests)
set -euo pipefail
build=${1:-build} size=${2:-64} n1=2000 n2=4000
command -v valgrind >/dev/null || { echo "iip_figure.sh: valgrind not installed" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
ir() { valgrind --tool=callgrind --callgrind-out-file="$tmp/cg" "$@" 2>&1 >/dev/null |
	awk '/Collected/ {print $4}'; }
declare -A per
for v in iip_echo_bench iip_echo_bench_native; do
	bin=$build/tests/compat/$v
	[ -x "$bin" ] || { echo "iip_figure.sh: $bin not built" >&2; exit 1; }
	i1=$(ir "$bin" $n1 "$size"); i2=$(ir "$bin" $n2 "$size")
	per[$v]=$(( (i2 - i1) / (n2 - n1) ))
	printf '%-22s %6d instructions/request (%d-byte echo; I(%d)=%d I(%d)=%d)\n' \
		"$v" "${per[$v]}" "$size" $n1 "$i1" $n2 "$i2"
done
awk -v a="${per[iip_echo_bench]}" -v b="${per[iip_echo_bench_native]}" \
	'BEGIN { printf "adapter / native: %.3f (%+.1f%%; target <= +5%%)\n", a / b, (a / b - 1) * 100 }'
