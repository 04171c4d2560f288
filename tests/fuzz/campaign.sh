#!/usr/bin/env bash
# A fuzzing campaign: every libFuzzer target of a build, one after the other (one
# process at a time: the machines are shared), each for its own number of seconds,
# at nice 19. The corpus of each target lives in OUT/<target> (seeded from
# tests/fuzz/corpus/<target> when empty), so running the script again with the same
# OUT continues the campaign. Crashes go to OUT/artifacts/. The summary (one line per
# target: seconds, executions, executions per second, edges covered, features,
# corpus size, crashes) is printed at the end and written to OUT/summary.txt.
#
#   tests/fuzz/campaign.sh BUILD OUT name=seconds...
#   e.g. tests/fuzz/campaign.sh build-fz /var/tmp/ipkit-fuzz fuzz_wire=120 fuzz_tcp=900
#
# BUILD: a clang build (CC=clang meson setup BUILD); without sanitizers for speed,
# or with -Db_sanitize=address,undefined for depth of checking.
set -uo pipefail

[ $# -ge 3 ] || { sed -n 2,14p "$0"; exit 2; }
build=$1
out=$2
shift 2
root=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$out/artifacts"
summary=()
for spec in "$@"; do
	name=${spec%%=*}
	secs=${spec#*=}
	bin="$build/tests/fuzz/$name"
	[ -x "$bin" ] || { echo "campaign: no $bin" >&2; exit 1; }
	mkdir -p "$out/$name"
	if [ -z "$(ls -A "$out/$name")" ] && [ -d "$root/tests/fuzz/corpus/$name" ]; then
		cp -r "$root/tests/fuzz/corpus/$name/." "$out/$name/"
	fi
	before=$(ls "$out/artifacts" | grep -c "^$name-" || true)
	echo "$(date -u +%H:%M:%S) $name: ${secs} s"
	nice -n 19 "$bin" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 \
		-print_final_stats=1 -artifact_prefix="$out/artifacts/$name-" \
		"$out/$name" >"$out/$name.log" 2>&1
	rc=$?
	after=$(ls "$out/artifacts" | grep -c "^$name-" || true)
	execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$out/$name.log")
	rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$out/$name.log")
	last=$(grep -E '^#[0-9]+[[:space:]]+(DONE|NEW|REDUCE|pulse|INITED)' "$out/$name.log" | tail -n 1)
	cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$last")
	ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$last")
	corp=$(sed -n 's/.* corp: \([0-9]*\).*/\1/p' <<<"$last")
	line=$(printf '%-14s %6ss %12s execs %9s/s  cov %5s  ft %6s  corpus %5s  crashes %s  rc %s' \
		"$name" "$secs" "${execs:-?}" "${rate:-?}" "${cov:-?}" "${ft:-?}" "${corp:-?}" \
		"$((after - before))" "$rc")
	echo "$line"
	summary+=("$line")
done
printf '%s\n' "${summary[@]}" | tee -a "$out/summary.txt"
