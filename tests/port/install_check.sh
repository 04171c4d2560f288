#!/usr/bin/env bash
# Install check (issue 14 item 16): a program outside the tree builds against an
# installed copy of ipkit with one pkg-config line and runs.
#
#   install_check.sh [--build DIR]    DIR: a configured meson build dir (default build/)
#
# Installs DIR into a temporary prefix (meson install --destdir), then:
#   headers   every installed header compiles alone with only the installed include
#             directory (no uninstalled internals leak into the public headers), as C
#             and as C++
#   link      `pkg-config --cflags --libs ipkit-runtime` builds a small runtime user
#             that needs symbols from all three libraries (node config, io spec
#             parsing, the pool, the core's drop names) and it runs with
#             LD_LIBRARY_PATH, and again built with -Wl,-rpath instead
#   symbols   every function the installed headers declare is exported by one of the
#             installed shared libraries (static inline helpers aside)
#   client    `pkg-config --cflags --libs ipkit-client` builds a libipkit-client
#             program that links nothing else of ipkit; it talks to the installed
#             ipkitd (on a memlink with nobody at the other end, no root): one NOP
#             round trip through a socket's rings
#   ns-3      (when ns-3 is present and the build has the ns3 layer) the headers under
#             ipkit/ns3/ compile alone as C++17 only (they include ns-3's C++ headers;
#             the C99 check above is for the C headers), with the flags of
#             `pkg-config --cflags ipkit-ns3`; libipkit-ns3.so exports no C symbol (the
#             simulator's pool and SHA-256 inside it stay local); and an out-of-tree
#             copy of ns3/examples/ipkit-minimal.cc builds with one
#             `pkg-config --cflags --libs ipkit-ns3` line and runs: 10 MiB over ipkit
#             TCP in ns-3, the receiver's SHA-256 equal to the sender's. Without ns-3
#             (or with -Dns3=disabled) one "skip install ns-3: <reason>" line.
# One "ok install ..." or "FAIL install ..." line per check; exit status non-zero when
# any failed. Needs no root and touches no network.
set -uo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
build=build
while [ $# -gt 0 ]; do
	case "$1" in
	--build) build=$2; shift 2 ;;
	*) echo "install_check.sh: unknown argument $1" >&2; exit 2 ;;
	esac
done

fails=0
tmp=$(mktemp -d /tmp/ipkit-install.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
ok() { echo "ok install $*"; }
fail() { echo "FAIL install $*"; fails=$((fails + 1)); }
show() { sed 's/^/    /' "$1" | head -n 40; }

if [ ! -f "$build/build.ninja" ]; then
	meson setup "$build" --buildtype=debugoptimized >"$tmp/setup.log" 2>&1 ||
		{ fail "(cannot configure $build)"; show "$tmp/setup.log"; exit 1; }
fi
if ! meson install -C "$build" --destdir "$tmp/dest" >"$tmp/install.log" 2>&1; then
	fail "meson install --destdir"; show "$tmp/install.log"; exit 1
fi
prefix=$(meson introspect "$build" --buildoptions |
	python3 -c 'import json,sys; print(next(o["value"] for o in json.load(sys.stdin) if o["name"] == "prefix"))')
inst=$tmp/dest$prefix
pcfile=$(find "$inst" -name ipkit-runtime.pc | head -n 1)
if [ -z "$pcfile" ]; then
	fail "ipkit-runtime.pc installed (not found under $inst)"; exit 1
fi
pcdir=$(dirname "$pcfile")
libdir=$(dirname "$pcdir")
for f in ipkit.pc ipkit-io.pc ipkit-runtime.pc ipkit-client.pc; do
	[ -f "$pcdir/$f" ] || fail "$f installed in $pcdir"
done
ok "pkg-config files in ${pcdir#"$tmp/dest"}"

# The .pc files say prefix=$prefix; the copy under the destdir is what an install
# with --prefix=$inst would hold, so point their prefix there (every other path in
# them is relative to it).
for f in "$pcdir"/ipkit*.pc; do
	sed -i "s|^prefix=.*|prefix=$inst|" "$f"
done
pc() { PKG_CONFIG_PATH=$pcdir pkg-config "$@"; }

check_headers() {
	local h bad=0
	for h in core io runtime svc; do
		printf '#include <ipkit/%s.h>\nint main(void) { return 0; }\n' "$h" >"$tmp/h_$h.c"
		if ! cc -std=c99 -Wall -Wextra -Werror -pedantic -I"$inst/include" \
			-c "$tmp/h_$h.c" -o "$tmp/h_$h.o" >"$tmp/h_$h.log" 2>&1; then
			fail "header ipkit/$h.h compiles alone (C99)"; show "$tmp/h_$h.log"; bad=1
		fi
		if ! c++ -std=c++17 -Wall -Wextra -Werror -pedantic -I"$inst/include" -x c++ \
			-c "$tmp/h_$h.c" -o "$tmp/h_$h.o" >"$tmp/h_$h.log" 2>&1; then
			fail "header ipkit/$h.h compiles alone (C++17)"; show "$tmp/h_$h.log"; bad=1
		fi
	done
	# iip's API alone compiles as the library's declarations only (the header's
	# comment above IIP_API says why)
	printf '#include <ipkit/compat/iip.h>\nint main(void) { return 0; }\n' >"$tmp/h_iip.c"
	if ! cc -std=c99 -Wall -Wextra -Werror -pedantic -DIIP_COMPAT_LIBRARY -I"$inst/include" \
		-c "$tmp/h_iip.c" -o "$tmp/h_iip.o" >"$tmp/h_iip.log" 2>&1 ||
		! c++ -std=c++17 -Wall -Wextra -Werror -pedantic -DIIP_COMPAT_LIBRARY -I"$inst/include" \
		-x c++ -c "$tmp/h_iip.c" -o "$tmp/h_iip.o" >>"$tmp/h_iip.log" 2>&1; then
		fail "header ipkit/compat/iip.h compiles alone (-DIIP_COMPAT_LIBRARY, C99 and C++17)"
		show "$tmp/h_iip.log"; bad=1
	fi
	[ "$bad" = 0 ] && ok "headers compile alone from the installed include dir (C99, C++17; compat/iip.h with IIP_COMPAT_LIBRARY)"
}

# A runtime user: needs ipk_node_cfg_default (runtime), ipk_io_spec_buf_size and the
# pool (io), ipk_drop_name (core). ipk_node_create on a memlink spec with no creator
# must fail cleanly with a message (no root, no device).
write_program() {
	cat >"$tmp/user.c" <<'EOF'
#include <ipkit/runtime.h>
#include <stdio.h>
#include <string.h>

int main(void)
{
	struct ipk_node_cfg cfg;
	struct ipk_pool_cfg pc;
	struct ipk_pool *pool;
	struct ipk_node *n;
	char err[256] = "";
	const char *dn = ipk_drop_name((enum ipk_drop)0);

	ipk_node_cfg_default(&cfg);
	ipk_pool_cfg_default(&pc);
	pool = ipk_pool_create(&pc, err, sizeof err);
	if (!pool || !dn || !*dn || ipk_io_spec_buf_size("afxdp:x,frame=4096") != 4096) {
		fprintf(stderr, "setup: %s\n", err);
		return 1;
	}
	ipk_pool_destroy(pool);
	cfg.io_spec = "memlink:ipkit-install-check-none,role=b,wait=0";
	cfg.ip4_be = IPK_IP4(10, 0, 0, 2);
	n = ipk_node_create(&cfg, err, sizeof err);
	if (n || !err[0]) {
		fprintf(stderr, "ipk_node_create on a missing memlink succeeded\n");
		return 1;
	}
	printf("drop 0 = %s; expected error: %s\n", dn, err);
	return 0;
}
EOF
}

check_link() {
	local flags
	write_program
	if ! flags=$(pc --cflags --libs ipkit-runtime 2>"$tmp/pc.log"); then
		fail "pkg-config --cflags --libs ipkit-runtime"; show "$tmp/pc.log"; return
	fi
	# shellcheck disable=SC2086
	if ! cc -std=c99 -Wall -Wextra -Werror "$tmp/user.c" -o "$tmp/user" $flags \
		>"$tmp/cc.log" 2>&1; then
		fail "out-of-tree program links with: pkg-config ipkit-runtime ($flags)"
		show "$tmp/cc.log"; return
	fi
	if LD_LIBRARY_PATH=$libdir "$tmp/user" >"$tmp/run.log" 2>&1; then
		ok "out-of-tree program links with one pkg-config line and runs (LD_LIBRARY_PATH)"
	else
		fail "out-of-tree program runs with LD_LIBRARY_PATH=$libdir"; show "$tmp/run.log"
	fi
	# shellcheck disable=SC2086
	if cc -std=c99 "$tmp/user.c" -o "$tmp/user-rpath" $flags -Wl,-rpath,"$libdir" \
		>"$tmp/cc.log" 2>&1 && env -u LD_LIBRARY_PATH "$tmp/user-rpath" >"$tmp/run.log" 2>&1; then
		ok "out-of-tree program runs with -Wl,-rpath"
	else
		fail "out-of-tree program runs with -Wl,-rpath"; show "$tmp/cc.log"; show "$tmp/run.log"
	fi
}

# Every ipk_ function a header declares (not static inline) is defined in a library.
check_symbols() {
	local missing
	for h in core io runtime svc; do
		grep -v 'static inline' "$inst/include/ipkit/$h.h" | grep -oE '\bipk_[a-z0-9_]+ *\(' |
			tr -d ' (' 
	done | sort -u >"$tmp/decl"
	grep -ohE 'static inline [^(]*\bipk_[a-z0-9_]+ *\(' "$inst"/include/ipkit/*.h |
		grep -oE 'ipk_[a-z0-9_]+ *\($' | tr -d ' (' | sort -u >"$tmp/inline"
	grep -ohE '#define (ipk_[a-z0-9_]+)\(' "$inst"/include/ipkit/*.h |
		grep -oE 'ipk_[a-z0-9_]+' | sort -u >>"$tmp/inline"
	nm -D --defined-only "$libdir"/libipkit*.so | awk '{print $3}' | sed 's/@.*//' |
		sort -u >"$tmp/syms"
	missing=$(comm -23 "$tmp/decl" "$tmp/syms" | comm -23 - <(sort -u "$tmp/inline") | tr '\n' ' ')
	if [ -z "$missing" ]; then
		ok "every function the installed headers declare is exported"
	else
		fail "functions declared but not in any installed library: $missing"
	fi
}

# A libipkit-client program built from ipkit-client.pc alone, run against the
# installed ipkitd: open, socket, one NOP, close.
check_client() {
	local flags d i rc
	cat >"$tmp/client.c" <<'EOF'
#include <ipkit/svc.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv)
{
	struct ipk_svc_sock *so;
	struct ipk_svc_sqe *e;
	struct ipk_svc_cqe *c;
	int err = 0, rc;
	struct ipk_svc *svc = ipk_svc_open(argc > 1 ? argv[1] : NULL, NULL, &err);
	if (!svc) {
		fprintf(stderr, "ipk_svc_open: %s\n", strerror(-err));
		return 1;
	}
	if (ipk_svc_socket(svc, IPK_SVC_TCP, 8, 16, &so) < 0 || !(e = ipk_svc_get_sqe(so)))
		return 1;
	ipk_svc_prep_nop(e);
	ipk_svc_sqe_set_data(e, 42);
	ipk_svc_submit(so);
	rc = ipk_svc_wait_cqe(so, &c, 5000000000LL);
	if (rc < 0 || c->user_data != 42 || c->res != 0)
		return 1;
	ipk_svc_cqe_seen(so, c);
	ipk_svc_close(so);
	ipk_svc_close_all(svc);
	printf("nop ok\n");
	return 0;
}
EOF
	if ! flags=$(pc --cflags --libs ipkit-client 2>"$tmp/pc.log"); then
		fail "pkg-config --cflags --libs ipkit-client"; show "$tmp/pc.log"; return
	fi
	# shellcheck disable=SC2086
	if ! cc -std=c99 -Wall -Wextra -Werror "$tmp/client.c" -o "$tmp/client" $flags \
		-Wl,-rpath,"$libdir" >"$tmp/cc.log" 2>&1; then
		fail "client program links with: pkg-config ipkit-client ($flags)"
		show "$tmp/cc.log"; return
	fi
	if ldd "$tmp/client" | grep -E 'libipkit(-io|-runtime)?\.so' >"$tmp/ldd.log"; then
		fail "the client links only libipkit-client"; show "$tmp/ldd.log"; return
	fi
	LD_LIBRARY_PATH=$libdir "$inst/bin/ipkitd" --io "memlink:ipkinst$$,role=a" \
		--ip 10.9.8.2/24 --socket "$tmp/ipkitd.sock" 2>"$tmp/ipkitd.log" &
	d=$!
	for i in $(seq 100); do [ -S "$tmp/ipkitd.sock" ] && break; sleep 0.05; done
	timeout 20 "$tmp/client" "$tmp/ipkitd.sock" >"$tmp/client.log" 2>&1
	rc=$?
	kill "$d" 2>/dev/null
	wait "$d" 2>/dev/null
	if [ "$rc" = 0 ] && grep -q "nop ok" "$tmp/client.log"; then
		ok "client built from ipkit-client.pc alone runs a NOP through the installed ipkitd"
	else
		fail "client against the installed ipkitd"; show "$tmp/client.log"; show "$tmp/ipkitd.log"
	fi
}

# The ns-3 layer (issue 22), when ns-3 is installed and the build has it.
ns3_option() {
	meson introspect "$build" --buildoptions | python3 -c \
		'import json,sys; print(next((o["value"] for o in json.load(sys.stdin) if o["name"] == "ns3"), "none"))'
}

check_ns3() {
	local h flags bad=0 exported
	if ! pkg-config --exists ns3-core; then
		echo "skip install ns-3: ns-3 not installed (pkg-config ns3-core; Debian: libns3-dev)"
		return
	fi
	if [ "$(ns3_option)" = disabled ]; then
		echo "skip install ns-3: $build is configured with -Dns3=disabled"
		return
	fi
	if [ ! -f "$pcdir/ipkit-ns3.pc" ]; then
		fail "ipkit-ns3.pc installed (ns-3 is present and the ns3 option is $(ns3_option))"
		return
	fi
	if ! flags=$(pc --cflags ipkit-ns3 2>"$tmp/pc.log"); then
		fail "pkg-config --cflags ipkit-ns3"; show "$tmp/pc.log"; return
	fi
	# C++ only: these headers include ns-3's, which are C++.
	for h in "$inst"/include/ipkit/ns3/*.h; do
		[ -f "$h" ] || { fail "headers installed under include/ipkit/ns3/"; return; }
		printf '#include <ipkit/ns3/%s>\nint main() { return 0; }\n' "${h##*/}" >"$tmp/ns3h.cc"
		# shellcheck disable=SC2086
		if ! c++ -std=c++17 -Wall -Wextra -Werror -pedantic $flags \
			-c "$tmp/ns3h.cc" -o "$tmp/ns3h.o" >"$tmp/ns3h.log" 2>&1; then
			fail "header ipkit/ns3/${h##*/} compiles alone (C++17, pkg-config ipkit-ns3)"
			show "$tmp/ns3h.log"; bad=1
		fi
	done
	[ "$bad" = 0 ] && ok "ns-3 headers compile alone as C++17 with pkg-config ipkit-ns3's flags"
	exported=$(nm -D --defined-only "$libdir/libipkit-ns3.so" | awk '$3 !~ /^_Z/ {print $3}' |
		tr '\n' ' ')
	if [ -z "$exported" ]; then
		ok "libipkit-ns3.so exports only C++ symbols (the sim pool and SHA-256 inside stay local)"
	else
		fail "libipkit-ns3.so exports C symbols: $exported"
	fi
	check_ns3_scenario
}

# A user's scenario outside the tree: a copy of ns3/examples/ipkit-minimal.cc, built
# against the installed tree only and run where it can write its pcaps.
check_ns3_scenario() {
	local flags
	mkdir -p "$tmp/ns3run"
	cp ns3/examples/ipkit-minimal.cc "$tmp/ns3run/scenario.cc"
	if ! flags=$(pc --cflags --libs ipkit-ns3 2>"$tmp/pc.log"); then
		fail "pkg-config --cflags --libs ipkit-ns3"; show "$tmp/pc.log"; return
	fi
	# shellcheck disable=SC2086
	if ! c++ -std=c++17 -Wall -Wextra -Werror "$tmp/ns3run/scenario.cc" \
		-o "$tmp/ns3run/scenario" $flags >"$tmp/ns3cc.log" 2>&1; then
		fail "ns-3 scenario builds with: pkg-config --cflags --libs ipkit-ns3 ($flags)"
		show "$tmp/ns3cc.log"; return
	fi
	LD_LIBRARY_PATH=$libdir ldd "$tmp/ns3run/scenario" >"$tmp/ldd.log" 2>&1
	if ! grep -q "libipkit-ns3\.so[^ ]* => $libdir/" "$tmp/ldd.log"; then
		fail "ns-3 scenario loads the installed libipkit-ns3.so"; show "$tmp/ldd.log"; return
	fi
	# Runs in about a second here; the bound only stops a hung run.
	if (cd "$tmp/ns3run" && LD_LIBRARY_PATH=$libdir timeout 600 ./scenario) \
		>"$tmp/ns3run.log" 2>&1 && grep -q 'sha256 [0-9a-f]\{64\} matches' "$tmp/ns3run.log"; then
		ok "out-of-tree ns-3 scenario builds with one pkg-config line and runs:" \
			"$(grep -o 'sent [0-9]* bytes' "$tmp/ns3run.log"), SHA-256 matches"
	else
		fail "out-of-tree ns-3 scenario runs and its SHA-256 matches"; show "$tmp/ns3run.log"
	fi
}

check_headers
check_link
check_symbols
check_client
check_ns3
[ "$fails" = 0 ]
