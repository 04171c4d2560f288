#!/usr/bin/env bash
# The whole test run behind `make test` (and `make fuzz` with --only-fuzz).
#
# Stages, each timed:
#   1. build/     debugoptimized build, `meson test` of every suite
#      (suites unit, sim and matrix: the simulation matrix runs here only; suite
#      ns3, ipkit inside ns-3, also runs here only, when libns3-dev is installed)
#   2. build-san/ the same C tests under ASan + UBSan (halt on error, leaks
#      detected), except the matrix suite, which would take too long there, and
#      ns3/ (-Dns3=disabled: ns-3's libraries are not instrumented)
#   2b. build-tsan/ suite svc (ipkitd, libipkit-client's callback thread) under
#      ThreadSanitizer: only the three programs it needs are built (~25 s)
#   3. portability gate (tests/port/gate.sh): freestanding, C++17, i686, s390x, unity
#   4. interop: pytest in tests/interop and tests/virtio (QEMU guest, issue 21) with Linux
#      as the peer (namespaces, bounded)
#   5. a bounded libFuzzer run of every fuzz target (clang), the time spread over them
# A test program counts once per stage it runs in; each gate check and the fuzz run
# count as one test; a build or setup failure counts as one failed test. The last
# line is "N passed, N failed"; the exit status is non-zero when anything failed.
set -uo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"

build=build
san=build-san
fuzz_seconds=60
only_fuzz=0
while [ $# -gt 0 ]; do
	case "$1" in
	--build) build=$2; shift 2 ;;
	--san) san=$2; shift 2 ;;
	--fuzz-seconds) fuzz_seconds=$2; shift 2 ;;
	--only-fuzz) only_fuzz=1; shift ;;
	*) echo "run_all.sh: unknown argument $1" >&2; exit 2 ;;
	esac
done

passed=0
failed=0
summary=()

note() { printf '\n=== %s\n' "$*"; }

# stage_end NAME START PASS FAIL
stage_end() {
	local secs=$(($(date +%s) - $2))
	passed=$((passed + $3))
	failed=$((failed + $4))
	summary+=("$(printf '%-10s %4d passed %4d failed %5ds' "$1" "$3" "$4" "$secs")")
	printf -- '--- %s: %d passed, %d failed (%ds)\n' "$1" "$3" "$4" "$secs"
}

# meson_stage NAME DIR SETUP_ARGS...: configure (once), build, test, count testlog.json.
# MESON_NO_SUITES (space-separated) leaves those suites out; empty runs all.
meson_stage() {
	local name=$1 dir=$2 t0 s suites=()
	shift 2
	for s in ${MESON_NO_SUITES:-}; do suites+=(--no-suite "$s"); done
	t0=$(date +%s)
	note "$name: $dir"
	if [ ! -f "$dir/build.ninja" ] && ! meson setup "$dir" "$@"; then
		stage_end "$name" "$t0" 0 1
		return
	fi
	if ! ninja -C "$dir"; then
		echo "FAIL $name: build"
		stage_end "$name" "$t0" 0 1
		return
	fi
	rm -f "$dir/meson-logs/testlog.json"
	meson test -C "$dir" ${suites[@]+"${suites[@]}"} --print-errorlogs --num-processes "$(nproc)" \
		--timeout-multiplier "${TIMEOUT_MULT:-1}" || true
	local counts
	counts=$(python3 tests/port/testlog_count.py "$dir/meson-logs/testlog.json")
	stage_end "$name" "$t0" "${counts% *}" "${counts#* }"
}

# The sanitizer runtime for libFuzzer ships with clang; prefer it, fall back to gcc.
san_compilers() {
	if command -v clang >/dev/null && command -v clang++ >/dev/null; then
		echo "CC=clang CXX=clang++"
	else
		echo "CC=gcc CXX=g++"
	fi
}

# ns3_off DIR: make sure DIR is configured with -Dns3=disabled (a build dir set up
# before the option existed, or with it on, is reconfigured once).
ns3_off() {
	local v
	v=$(meson introspect "$1" --buildoptions 2>/dev/null | python3 -c \
		'import json,sys; print(next((o["value"] for o in json.load(sys.stdin) if o["name"] == "ns3"), "none"))' \
		2>/dev/null)
	[ "$v" = disabled ] || meson setup --reconfigure "$1" -Dns3=disabled >/dev/null 2>&1 || true
}

san_setup_args=(--buildtype=debug -Db_sanitize=address,undefined -Db_lundef=false -Dns3=disabled
	"-Dc_args=-fno-sanitize-recover=all -fno-omit-frame-pointer"
	"-Dcpp_args=-fno-sanitize-recover=all -fno-omit-frame-pointer")

san_stage() {
	export ASAN_OPTIONS=halt_on_error=1:abort_on_error=1:detect_leaks=1:print_summary=1
	export UBSAN_OPTIONS=halt_on_error=1:abort_on_error=1:print_stacktrace=1:print_summary=1
	if [ ! -f "$san/build.ninja" ]; then
		# shellcheck disable=SC2046
		env $(san_compilers) meson setup "$san" "${san_setup_args[@]}" ||
			{ stage_end sanitize "$(date +%s)" 0 1; return; }
	fi
	ns3_off "$san"
	TIMEOUT_MULT=3 MESON_NO_SUITES=matrix meson_stage sanitize "$san"
}

# ThreadSanitizer over suite svc (issue 17): ipkitd, svc_tool (the client library,
# with its callback thread) and ipkit-echo only, not the whole tree.
tsan_stage() {
	local t0 dir="${san%-san}-tsan" counts
	[ "$dir" = "$san" ] && dir="$san-tsan"
	t0=$(date +%s)
	note "tsan: $dir (suite svc)"
	if [ ! -f "$dir/build.ninja" ]; then
		# shellcheck disable=SC2046
		env $(san_compilers) meson setup "$dir" --buildtype=debug -Db_sanitize=thread \
			-Db_lundef=false -Dns3=disabled >/dev/null || { stage_end tsan "$t0" 0 1; return; }
	fi
	ns3_off "$dir"
	if ! ninja -C "$dir" svc/ipkitd tests/svc/svc_tool examples/ipkit-echo examples/ipkit-nc; then
		echo "FAIL tsan: build"
		stage_end tsan "$t0" 0 1
		return
	fi
	rm -f "$dir/meson-logs/testlog.json"
	TSAN_OPTIONS=halt_on_error=1:exitcode=66 IPKIT_TIME_MULT=4 meson test -C "$dir" --no-rebuild --suite svc \
		--print-errorlogs --num-processes "$(nproc)" --timeout-multiplier 3 || true
	counts=$(python3 tests/port/testlog_count.py "$dir/meson-logs/testlog.json")
	stage_end tsan "$t0" "${counts% *}" "${counts#* }"
}

gate_stage() {
	local t0 out p f
	t0=$(date +%s)
	note "portability gate"
	out=$(mktemp)
	bash tests/port/gate.sh --build "$build" 2>&1 | tee "$out"
	p=$(grep -c '^ok ' "$out" || true)
	f=$(grep -c '^FAIL ' "$out" || true)
	rm -f "$out"
	if [ "$p" = 0 ] && [ "$f" = 0 ]; then f=1; fi
	stage_end gate "$t0" "$p" "$f"
}

# fuzz_stage SECONDS: every libFuzzer target in the sanitizer build, one after the
# other, SECONDS spread evenly over them (at least 1 s each). Each starts from a
# copy of its seed corpus (tests/fuzz/corpus/<name>) in a temporary directory, so
# a run never writes into the repository; a crash is kept in fuzz-artifacts/.
fuzz_stage() {
	local t0 secs=$1 p=0 f=0 bin name work per help
	local bins=()
	t0=$(date +%s)
	if [ ! -f "$san/build.ninja" ]; then
		env $(san_compilers) meson setup "$san" "${san_setup_args[@]}" >/dev/null ||
			{ stage_end fuzz "$t0" 0 1; return; }
	fi
	ninja -C "$san" >/dev/null 2>&1 || true
	for bin in "$san"/tests/fuzz/fuzz_*; do
		[ -x "$bin" ] && [ -f "$bin" ] || continue
		case "$bin" in *_replay) continue ;; esac
		# libFuzzer targets accept -help=1; plain corpus replayers do not
		# (captured whole: grep -q closing the pipe early would fail it under pipefail)
		help=$(timeout 10 "$bin" -help=1 2>&1 || true)
		[[ $help == *max_total_time* ]] && bins+=("$bin")
	done
	if [ ${#bins[@]} -eq 0 ]; then
		note "libFuzzer"
		echo "no libFuzzer target built (needs clang); skipped"
		stage_end fuzz "$t0" 0 0
		return
	fi
	per=$((secs / ${#bins[@]}))
	[ "$per" -ge 1 ] || per=1
	note "libFuzzer, ${#bins[@]} targets, ${per}s each (${secs}s in all)"
	mkdir -p "$san/fuzz-artifacts"
	for bin in "${bins[@]}"; do
		name=$(basename "$bin")
		work=$(mktemp -d)
		if [ -d "tests/fuzz/corpus/$name" ]; then
			cp -r "tests/fuzz/corpus/$name/." "$work/"
		fi
		echo "$name: ${per} s (artifacts in $san/fuzz-artifacts/)"
		# -entropic=0: in a run this short, under the sanitizers, libFuzzer's entropic
		# scheduler spends most of the time updating feature frequencies (perf: 69% in
		# InputCorpus::UpdateFeatureFrequency for fuzz_tcp); without it the same 10 s
		# run makes 8 times the executions and reaches more edges
		if "$bin" -max_total_time="$per" -timeout=10 -rss_limit_mb=2048 -entropic=0 \
			-print_final_stats=1 -artifact_prefix="$san/fuzz-artifacts/$name-" \
			"$work" >"$work.log" 2>&1; then
			echo "ok fuzz $name"; p=$((p + 1))
			grep -E '^(stat::(number_of_executed_units|average_exec_per_sec)|#[0-9]+[[:space:]]+DONE)' \
				"$work.log" || true
		else
			echo "FAIL fuzz $name"; f=$((f + 1))
			tail -n 40 "$work.log"
		fi
		rm -rf "$work" "$work.log"
	done
	stage_end fuzz "$t0" "$p" "$f"
}

# interop_stage: pytest with Linux as the peer (tests/interop, tests/virtio); each test counts once.
# Needs root for namespaces; bounded by INTEROP_TIMEOUT seconds (default 1200; the
# stage takes ~9 min on a quiet 2-core machine with the QEMU guest).
interop_stage() {
	local t0 out p f s rc limit=${INTEROP_TIMEOUT:-1200}
	t0=$(date +%s)
	note "interop: pytest, Linux as the peer"
	if ! /usr/bin/python3 -c 'import pytest' 2>/dev/null; then
		echo "FAIL interop: /usr/bin/python3 has no pytest (apt-get install python3-pytest)"
		stage_end interop "$t0" 0 1
		return
	fi
	out=$(mktemp)
	ns_before=$(ip netns list 2>/dev/null | awk '{print $1}' | sort)
	# SIGINT first: pytest takes it as KeyboardInterrupt and runs the fixtures'
	# teardown, so a stage stopped by the bound still removes its namespaces and
	# processes (SIGTERM killed Python outright and left them behind).
	IPKIT_BUILD="$build" timeout --signal=INT -k 60 "$limit" \
		/usr/bin/python3 -m pytest -q -p no:cacheprovider tests/interop tests/virtio 2>&1 | tee "$out"
	rc=${PIPESTATUS[0]}
	p=$(tail -n 3 "$out" | grep -Eo '[0-9]+ passed' | awk '{s += $1} END {print s + 0}')
	f=$(tail -n 3 "$out" | grep -Eo '[0-9]+ (failed|errors?)' | awk '{s += $1} END {print s + 0}')
	s=$(tail -n 3 "$out" | grep -Eo '[0-9]+ skipped' | awk '{s += $1} END {print s + 0}')
	if [ "$p" = 0 ] && [ "$f" = 0 ]; then f=1; fi
	# An interrupted run prints a summary of what it got through: stopping counts
	# as a failure whatever that summary says.
	if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
		echo "FAIL interop: stopped by the ${limit} s bound (INTEROP_TIMEOUT)"
		f=$((f + 1))
	fi
	echo "interop: $p passed, $f failed, $s skipped"
	# A namespace that appeared during the stage and is still there is a teardown
	# defect: name it so the test can be found (not removed here: on a shared
	# machine it may belong to another run).
	local left
	left=$(comm -13 <(echo "$ns_before") \
		<(ip netns list 2>/dev/null | awk '{print $1}' | sort) | tr '\n' ' ')
	if [ -n "${left// /}" ]; then
		echo "interop: namespaces left behind: $left"
	fi
	rm -f "$out"
	stage_end interop "$t0" "$p" "$f"
}

rm -f "$build/test-summary.txt"
t_all=$(date +%s)
if [ "$only_fuzz" = 1 ]; then
	fuzz_stage "$fuzz_seconds"
else
	meson_stage unit+sim+matrix "$build" --buildtype=debugoptimized
	san_stage
	tsan_stage
	gate_stage
	interop_stage
	if [ "$fuzz_seconds" -gt 0 ]; then fuzz_stage "$fuzz_seconds"; fi
fi

printf '\n=== summary (%ds total)\n' "$(($(date +%s) - t_all))"
printf '%s\n' "${summary[@]}"
echo "$passed passed, $failed failed"
if [ "$only_fuzz" = 0 ] && [ -d "$build" ]; then
	echo "$passed passed, $failed failed" >"$build/test-summary.txt"
fi
[ "$failed" = 0 ] && [ "$passed" -gt 0 ]
