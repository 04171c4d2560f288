# ipkit: the front door for newcomers.
#
#   make          build (meson + ninja, debugoptimized) in build/
#   make test     unit + sim tests, the same under ASan+UBSan, the portability gate,
#                 a short libFuzzer run; ends with "N passed, N failed"
#   make demo     ipkit-httpd in a private namespace: Linux curls, pings; ipkit-bench vs its Linux twin
#   make sim-demo run the simulator demo and check its pcap with tshark
#   make sim-matrix  the TCP simulation matrix alone (also part of make test), a line per cell
#   make tcp-figures TCP goodput/recovery figures in the simulator -> docs/tcp-figures.md
#   make bench-peers  lwIP and smoltcp in-memory peer harnesses (bench/peers) in build/bench-peers
#   make bench    ipkit-bench vs the Linux twin (a few minutes, root) -> bench/results/<date>/
#   make io-figures  issue 4's ipkit<->ipkit vs Linux<->Linux figures (root, ~10 min) -> docs/io-figures.md
#   make mc-figures  issue 5's thread-model figures (root, ~15 min; MC_SECONDS, default 10) -> docs/mc-figures.md
#   make ns3-figures issue 22's ipkit-inside-ns-3 figures (~6 CPU min) -> docs/ns3-figures.md
#   make fuzz     libFuzzer run of every fuzz target, FUZZ_SECONDS (default 600) spread
#                 over them (docs/fuzzing.md)
#   make install  meson install (PREFIX, default /usr/local; DESTDIR honoured)
#   make deps     install missing build/test tools with apt-get (Debian 12)
#   make clean    remove the build directories
#
# Every target checks the tools first (a fast no-op when all are present).

SHELL := /bin/bash
.DEFAULT_GOAL := build

BUILD ?= build
SANBUILD ?= build-san
PREFIX ?= /usr/local
FUZZ_SECONDS ?= 600
FUZZ_TEST_SECONDS ?= 60

# Debian packages the build, the tests and the demo need. gcc-multilib is left out
# on purpose: on Debian 12 it conflicts with the cross compilers; 32-bit x86 builds
# use i686-linux-gnu-gcc -static instead.
DEB_PKGS := meson ninja-build gcc g++ clang libclang-rt-14-dev tshark \
            gcc-i686-linux-gnu libc6-dev-i386-cross gcc-s390x-linux-gnu \
            libc6-dev-s390x-cross qemu-user binutils pkg-config python3 \
            libxdp-dev libbpf-dev python3-pytest socat iperf3 curl iproute2 ethtool \
            iputils-ping wrk xdp-tools tcpdump libdpdk-dev dpdk-dev python3-scapy \
            netcat-openbsd libns3-dev libgsl-dev libsqlite3-dev \
            qemu-system-x86 busybox-static nodejs

# Only `make bench` needs these (plots); make test does not.
BENCH_PKGS := python3-matplotlib
BENCH_SECONDS ?= 3

SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
APT_ENV := env DEBIAN_FRONTEND=noninteractive

.PHONY: build all deps debroot test demo sim-demo fuzz install clean sim-matrix tcp-figures bench-peers bench io-figures mc-figures ns3-figures

all: build

deps:
	@missing=""; \
	if ! command -v dpkg-query >/dev/null 2>&1; then \
		echo "deps: not a Debian system; install by hand: $(DEB_PKGS)"; exit 0; \
	fi; \
	for p in $(DEB_PKGS); do \
		s=$$(dpkg-query -W -f='$${db:Status-Status}' $$p 2>/dev/null || true); \
		[ "$$s" = installed ] || missing="$$missing $$p"; \
	done; \
	if [ -z "$$missing" ]; then exit 0; fi; \
	echo "deps: installing:$$missing"; \
	echo "wireshark-common wireshark-common/install-setuid boolean false" \
		| $(SUDO) debconf-set-selections; \
	$(SUDO) $(APT_ENV) apt-get update -q && \
	$(SUDO) $(APT_ENV) apt-get install -y -q --no-install-recommends $$missing

$(BUILD)/build.ninja: | deps
	meson setup $(BUILD) --buildtype=debugoptimized --prefix=$(PREFIX)

build: deps $(BUILD)/build.ninja
	ninja -C $(BUILD)

# Debian's nginx and redis for the preload suite, unpacked, not installed (the script says why)
debroot: deps
	@bash tests/preload/debroot.sh

test: deps debroot
	@bash tests/port/run_all.sh --build $(BUILD) --san $(SANBUILD) \
		--fuzz-seconds $(FUZZ_TEST_SECONDS)

demo: build
	@bash tests/port/demo_check.sh $(BUILD)

sim-demo: build
	@bash tests/port/sim_demo_check.sh $(BUILD)

# One shard per core; a failing cell prints its seed and the command that reruns it.
sim-matrix: build
	@n=$$(nproc); pids=(); \
	for k in $$(seq 0 $$((n - 1))); do \
		$(BUILD)/tests/sim/test_sim_matrix --shard $$k/$$n \
			>$(BUILD)/sim-matrix-$$k.log 2>&1 & pids+=($$!); \
	done; rc=0; for p in "$${pids[@]}"; do wait $$p || rc=1; done; \
	cat $(BUILD)/sim-matrix-*.log | grep -E '^[0-9]+[MG]-' | sort; \
	grep -h -A3 ' FAIL ' $(BUILD)/sim-matrix-*.log || true; \
	grep -h 'cells,' $(BUILD)/sim-matrix-*.log; exit $$rc

tcp-figures: build
	@mkdir -p docs
	$(BUILD)/bench/ipkit-tcp-figures --out docs/tcp-figures.md

# Not part of make test: fetches lwIP (apt-get source) and smoltcp (cargo).
bench-peers: build
	@bash bench/peers/build.sh $(BUILD)/bench-peers

# ipkit-bench and its Linux twin side by side: raw JSON, report.md and PNG plots.
bench: build
	@$(MAKE) --no-print-directory deps DEB_PKGS="$(BENCH_PKGS)"
	@$(SUDO) bash bench/run_bench.sh $(BUILD) $(BENCH_SECONDS)

io-figures: build
	@$(SUDO) bash bench/io_pairs.sh $(BUILD) 10 1073741824 docs/io-figures.md

MC_SECONDS ?= 10
mc-figures: build
	@$(SUDO) bash bench/mc_figures.sh $(BUILD) $(MC_SECONDS) docs/mc-figures.md

# ns-3 (libns3-dev) is optional for `make`; this target needs it (meson -Dns3=auto found it).
ns3-figures: build
	@test -x $(BUILD)/ns3/ipkit-ns3-figures || { echo "ns3-figures: ns-3 not found at configure time (libns3-dev)"; exit 1; }
	@mkdir -p docs
	$(BUILD)/ns3/ipkit-ns3-figures --out=docs/ns3-figures.md

fuzz: deps
	@bash tests/port/run_all.sh --san $(SANBUILD) --only-fuzz \
		--fuzz-seconds $(FUZZ_SECONDS)

install: build
	meson configure $(BUILD) -Dprefix=$(PREFIX)
	meson install -C $(BUILD) $(if $(DESTDIR),--destdir $(DESTDIR))

clean:
	rm -rf $(BUILD) $(SANBUILD) build-port ipkit-demo.pcap build-debroot
