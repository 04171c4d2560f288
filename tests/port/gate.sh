#!/usr/bin/env bash
# Portability gate: the promises DESIGN.md makes about the core, checked by building it
# the ways integrators will. One "ok <check>" or "FAIL <check>" line per check; exits
# non-zero when any check failed.
#
#   gate.sh [--build DIR]   DIR: a meson build dir to discover unit tests from
#                           (default build/; configured here when missing)
#
# Checks:
#   freestanding  core/*.c + core/wire/*.c with gcc and clang at -O0 and -O2,
#                 -std=c99 -Wall -Wextra -Werror -pedantic -ffreestanding -nostdlib,
#                 linked with -r; nm -u may list only memcpy/memset/memmove/memcmp
#   i686          the same core for 32-bit x86 (libgcc's 64-bit division helpers allowed)
#   c++17         every core file as C++17 with g++ and clang++
#   unity         core/ipkit_unity.c includes every core .c file and compiles alone;
#                 examples/unity_static_ops.c (ops bound at compile time) builds and runs
#   readme        the code README.md quotes still matches examples/tcp_embed.c and every
#                 file README.md names exists (tests/port/readme_sync.py)
#   docs          every public function and ops member in include/ipkit/*.h has a doc
#                 comment (tests/port/doc_check.py), and the checker fails on a planted
#                 undocumented declaration
#   cross         every suite-'unit' test, built -static for i686 (run natively) and
#                 s390x (run under qemu-s390x, big-endian)
#   install       tests/port/install_check.sh: meson install into a temporary
#                 directory, then an out-of-tree program built with
#                 `pkg-config --cflags --libs ipkit-runtime` runs (issue 14 item 16)
set -uo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
build=build
while [ $# -gt 0 ]; do
	case "$1" in
	--build) build=$2; shift 2 ;;
	*) echo "gate.sh: unknown argument $1" >&2; exit 2 ;;
	esac
done

fails=0
tmp=$(mktemp -d /tmp/ipkit-gate.XXXXXX)
trap 'rm -rf "$tmp"' EXIT

ok() { echo "ok $*"; }
fail() { echo "FAIL $*"; fails=$((fails + 1)); }
have() { command -v "$1" >/dev/null 2>&1; }
# indent a log so it reads as the detail of the line above
show() { sed 's/^/    /' "$1" | head -n 60; }

mapfile -t core_srcs < <(ls core/*.c core/wire/*.c 2>/dev/null | grep -v '/ipkit_unity\.c$')
if [ "${#core_srcs[@]}" = 0 ]; then
	fail "core sources present (none found under core/)"
	exit 1
fi

CFLAGS_FREE=(-std=c99 -Wall -Wextra -Werror -pedantic -ffreestanding -nostdlib
	-Iinclude -Icore)
ALLOWED_LIBC='^(memcpy|memset|memmove|memcmp)$'
LIBGCC_DIV='^(__udivdi3|__umoddi3|__divdi3|__moddi3|__udivmoddi4|__divmoddi4)$'

# compile_core CC OUTDIR FLAGS...: every core file to an object; log in OUTDIR/log
compile_core() {
	local cc=$1 out=$2 src obj
	shift 2
	mkdir -p "$out"
	: >"$out/log"
	for src in "${core_srcs[@]}"; do
		obj="$out/$(echo "$src" | tr / _).o"
		"$cc" "$@" -c "$src" -o "$obj" >>"$out/log" 2>&1 || return 1
	done
}

# undefined_check CC OUTDIR ALLOWED_RE: link objects with -r and list foreign symbols
undefined_check() {
	local cc=$1 out=$2 allowed=$3 nm=nm
	case "$cc" in *-linux-gnu-gcc) nm=${cc%gcc}nm ;; esac
	"$cc" -nostdlib -r -o "$out/core.ro" "$out"/*.o >>"$out/log" 2>&1 || return 1
	"$nm" -u "$out/core.ro" | awk '{print $NF}' | sort -u >"$out/undef"
	grep -Ev "$allowed" "$out/undef" >"$out/bad" || true
	[ ! -s "$out/bad" ]
}

check_freestanding() {
	local cc opt out
	for cc in gcc clang; do
		for opt in -O0 -O2; do
			out="$tmp/free-$cc$opt"
			if ! have "$cc"; then fail "freestanding $cc $opt ($cc not installed)"; continue; fi
			if ! compile_core "$cc" "$out" "${CFLAGS_FREE[@]}" "$opt"; then
				fail "freestanding $cc $opt (compile)"; show "$out/log"; continue
			fi
			if undefined_check "$cc" "$out" "$ALLOWED_LIBC"; then
				ok "freestanding $cc $opt (undefined: $(tr '\n' ' ' <"$out/undef"))"
			else
				fail "freestanding $cc $opt (links against: $(tr '\n' ' ' <"$out/bad"))"
				show "$out/log"
			fi
		done
	done
}

check_i686() {
	local cc=i686-linux-gnu-gcc out="$tmp/free-i686"
	if ! have "$cc"; then fail "freestanding i686 ($cc not installed)"; return; fi
	if ! compile_core "$cc" "$out" "${CFLAGS_FREE[@]}" -O2; then
		fail "freestanding i686 -O2 (compile)"; show "$out/log"; return
	fi
	# Debian's i686 compiler builds PIE by default: the GOT symbol is the linker's
	if undefined_check "$cc" "$out" "$ALLOWED_LIBC|$LIBGCC_DIV|^_GLOBAL_OFFSET_TABLE_\$"; then
		ok "freestanding i686 -O2 (undefined: $(tr '\n' ' ' <"$out/undef"))"
	else
		fail "freestanding i686 -O2 (links against: $(tr '\n' ' ' <"$out/bad"))"
	fi
}

check_cxx() {
	local cxx out
	for cxx in g++ clang++; do
		out="$tmp/cxx-$cxx"
		if ! have "$cxx"; then fail "c++17 $cxx (not installed)"; continue; fi
		if compile_core "$cxx" "$out" -x c++ -std=c++17 -Wall -Wextra -Werror -pedantic \
			-Iinclude -Icore; then
			ok "c++17 $cxx"
		else
			fail "c++17 $cxx"; show "$out/log"
		fi
	done
}

check_unity() {
	local src missing=() cc out="$tmp/unity"
	mkdir -p "$out"
	if [ ! -f core/ipkit_unity.c ]; then fail "unity covers core (no core/ipkit_unity.c)"; return; fi
	for src in "${core_srcs[@]}"; do
		grep -q "^#include \"${src#core/}\"" core/ipkit_unity.c || missing+=("$src")
	done
	if [ "${#missing[@]}" = 0 ]; then
		ok "unity covers every core file (${#core_srcs[@]})"
	else
		fail "unity covers every core file (missing: ${missing[*]})"
	fi
	for cc in gcc clang; do
		if "$cc" "${CFLAGS_FREE[@]}" -O2 -c core/ipkit_unity.c -o "$out/u-$cc.o" \
			>"$out/log-$cc" 2>&1; then
			ok "unity compiles alone with $cc"
		else
			fail "unity compiles alone with $cc"
			# two core files defining the same static helper collide here
			grep -E 'redefinition|redeclar|conflicting' "$out/log-$cc" | head -n 20 | sed 's/^/    /'
			show "$out/log-$cc"
		fi
		if "$cc" -std=c99 -Wall -Wextra -Werror -pedantic -O2 -Iinclude -Icore \
			examples/unity_static_ops.c -o "$out/static-ops-$cc" >"$out/slog-$cc" 2>&1 &&
			"$out/static-ops-$cc" >"$out/run-$cc" 2>&1; then
			ok "unity static ops example builds and runs with $cc"
		else
			fail "unity static ops example builds and runs with $cc"
			show "$out/slog-$cc"; [ -f "$out/run-$cc" ] && show "$out/run-$cc"
		fi
	done
}

check_readme() {
	if python3 tests/port/readme_sync.py README.md examples/tcp_embed.c \
		examples/minimal_embed.c >"$tmp/readme" 2>&1; then
		ok "README quotes examples/tcp_embed.c as it is and names only files that exist"
	else
		fail "README quotes examples/tcp_embed.c as it is and names only files that exist"
		show "$tmp/readme"
	fi
}

# Every public function and ops member documented (doc_check.py's rule), and the
# checker itself still catches a planted undocumented declaration (a checker that
# cannot fail proves nothing).
check_docs() {
	local planted="$tmp/planted.h"
	if ! python3 tests/port/doc_check.py >"$tmp/docs" 2>&1; then
		fail "public headers document every function"; show "$tmp/docs"
		return
	fi
	{ cat include/ipkit/core.h; printf '\nint ipk_planted_undocumented(int x);\n'; } >"$planted"
	if python3 tests/port/doc_check.py "$planted" >"$tmp/docs-planted" 2>&1 ||
		! grep -q 'ipk_planted_undocumented' "$tmp/docs-planted"; then
		fail "public headers document every function (checker missed a planted declaration)"
		show "$tmp/docs-planted"
		return
	fi
	ok "public headers document every function ($(tail -n 1 "$tmp/docs"))"
}

check_cross() {
	local arch need
	if [ ! -f "$build/build.ninja" ]; then
		build=build-port
		[ -f "$build/build.ninja" ] || meson setup "$build" >/dev/null 2>&1 ||
			{ fail "cross (cannot configure a meson build dir)"; return; }
	fi
	for arch in i686 s390x; do
		need=$arch-linux-gnu-gcc
		[ "$arch" = s390x ] && ! have qemu-s390x && need=qemu-s390x
		if ! have "$arch-linux-gnu-gcc" || ! have "$need"; then
			fail "cross $arch ($need not installed)"; continue
		fi
		python3 tests/port/cross_units.py "$build" "$arch" | tee "$tmp/cross-$arch"
		# cross_units prints its own ok/FAIL lines; count its failures here too
		fails=$((fails + $(grep -c '^FAIL ' "$tmp/cross-$arch" || true)))
	done
}

# Prints its own "ok install ..." / "FAIL install ..." lines; its failures count here.
check_install() {
	bash tests/port/install_check.sh --build "$build" | tee "$tmp/install"
	fails=$((fails + $(grep -c '^FAIL ' "$tmp/install" || true)))
}

check_freestanding
check_i686
check_cxx
check_unity
check_readme
check_docs
check_cross
check_install

[ "$fails" = 0 ]
