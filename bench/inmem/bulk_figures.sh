#!/bin/bash
# Bulk Gbit/s, best and median of N rounds, every stack in each round (run on a quiet
# machine; single runs of one binary swing by up to 1.8x on the development VM):
# ipkit unity and lib (copying ipk_tcp_write; unity also --zerocopy), lwIP, smoltcp; sw
# and offload profiles, 1 GiB per run, default message size (16384) and -m 65536, over
# each wire (--wire copy, every harness's default, and handoff).
#
#   bench/inmem/bulk_figures.sh [--build DIR] [--peers DIR] [--wire copy|handoff|both]
#                               [--rounds N] [--json FILE]
# Peers come from `make bench-peers` (--peers, default DIR/bench-peers); missing ones
# are skipped. ipkit at the peers' flags: --build build-rel (see pingpong_rounds.sh).
set -euo pipefail
build=build peers="" wires="copy handoff" rounds=3 json=""
while [ $# -gt 0 ]; do
	case $1 in
	--build) build=$2; shift ;;
	--peers) peers=$2; shift ;;
	--wire) case $2 in both) wires="copy handoff" ;; *) wires=$2 ;; esac; shift ;;
	--rounds) rounds=$2; shift ;;
	--json) json=$2; shift ;;
	-h|--help) sed -n 2,10p "$0"; exit 0 ;;
	*) echo "bulk_figures.sh: unknown option $1" >&2; exit 2 ;;
	esac
	shift
done
peers=${peers:-$build/bench-peers}
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT

# label binary args...
runs=(
	"ipkit-unity|$build/bench/inmem/ipkit-inmem-unity|"
	"ipkit-unity-zc|$build/bench/inmem/ipkit-inmem-unity|--zerocopy"
	"ipkit-lib|$build/bench/inmem/ipkit-inmem|"
	"lwip|$peers/lwip/lwip-inmem|"
	"smoltcp|$peers/smoltcp/smoltcp-inmem|"
)
for r in $(seq "$rounds"); do
	for w in $wires; do
	for spec in "${runs[@]}"; do
		IFS='|' read -r label bin extra <<<"$spec"
		[ -x "$bin" ] || continue
		for prof in sw offload; do
			for m in 16384 65536; do
				# shellcheck disable=SC2086
				g=$("$bin" -w bulk -p "$prof" -m "$m" -b 1073741824 --wire "$w" -q --json - $extra |
					sed -E 's/.*"gbit_s":([0-9.]+).*"verified":(true|false).*/\1 \2/')
				echo "$label/$w $prof $m $g" >>"$tmp"
			done
		done
	done
	done
done
[ -z "$json" ] || cp "$tmp" "$json"
printf '%-24s %-8s %6s %10s %10s\n' stack profile msg 'best Gbit/s' 'median'
awk '$5 == "true" { k = $1 " " $2 " " $3; v[k] = v[k] " " $4 }
     $5 != "true" { bad[$1 " " $2 " " $3] = 1 }
     END { for (k in v) { n = split(substr(v[k], 2), g, " ");
             for (i = 2; i <= n; i++) for (j = i; j > 1 && g[j] < g[j - 1]; j--) { t = g[j]; g[j] = g[j - 1]; g[j - 1] = t }
             med = (n % 2) ? g[(n + 1) / 2] : (g[n / 2] + g[n / 2 + 1]) / 2;
             split(k, a, " ");
             printf "%-24s %-8s %6s %10.2f %10.2f%s\n", a[1], a[2], a[3], g[n], med,
               (k in bad) ? "  (a run failed)" : "" } }' "$tmp" | sort
