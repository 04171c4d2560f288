#!/usr/bin/env bash
# ipkit-bench on the multi-core runtime (-T 2, --model MODEL), server and client over
# a memlink pair, a TCP burst with sends in flight when the run ends: both must exit
# 0. Under the sanitizer build LeakSanitizer turns a send buffer or a connection's
# state left behind at ipk_workers_stop into a non-zero exit (docs/fuzzing.md, item 3
# of the hardening brief). Usage: workers_stop.sh IPKIT_BENCH MODEL [MODE: -g, 2 burst
# (default) or 1 ping-pong]
set -u
bench=$1
model=$2
name="wst$$${model:0:1}"
dir=$(mktemp -d)
srv=
cleanup() {
	[ -n "$srv" ] && kill -INT "$srv" 2>/dev/null
	rm -rf "$dir"
}
trap cleanup EXIT
timeout 120 "$bench" --io "memlink:$name,role=a" --ip 10.77.0.1/24 -T 2 --model "$model" -g "${3:-2}" \
	>"$dir/srv.out" 2>"$dir/srv.err" &
srv=$!
# the server says so once its workers listen (bounded: 60 s)
for _ in $(seq 600); do
	grep -q "serving on" "$dir/srv.err" && break
	kill -0 "$srv" 2>/dev/null || break
	sleep 0.1
done
grep -q "serving on" "$dir/srv.err" || { echo "server did not start"; cat "$dir/srv.err"; exit 1; }
timeout 120 "$bench" --io "memlink:$name,role=b" --ip 10.77.0.2/24 -s 10.77.0.1 -T 2 \
	--model "$model" -g "${3:-2}" -c 4 -l 20000 -t 2 >"$dir/cli.out" 2>"$dir/cli.err"
crc=$?
kill -INT "$srv"
wait "$srv"
src=$?
srv=
echo "client exit $crc, server exit $src"
grep summary "$dir/cli.out"
if [ "$crc" != 0 ] || [ "$src" != 0 ] || ! grep -q "^summary" "$dir/cli.out"; then
	echo "--- client stderr"; tail -n 40 "$dir/cli.err"
	echo "--- server stderr"; tail -n 40 "$dir/srv.err"
	exit 1
fi
exit 0
