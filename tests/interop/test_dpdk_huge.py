"""ipkit on DPDK with hugepages (issue 5: "works with and without hugepages").

Every other DPDK test runs with --no-huge. This one reserves 2 MiB hugepages
(vm.nr_hugepages raised by what it needs, set back at teardown, also on failure),
mounts a private hugetlbfs in the test's temp dir (unmounted at teardown), and runs two
ipkit processes over net_memif with EAL memory from those pages: 64 MiB each way,
SHA-256 verified. It also checks that EAL really mapped hugepage files there and took
pages from the pool. EAL leaves its page files behind on exit (no --huge-unlink), so the
pages go back when teardown unmounts the hugetlbfs. Skipped when the kernel cannot give
the pages.
"""
import os
import subprocess

import pytest

from conftest import backend_built, sh
from test_dpdk import Dpdk, memif_pair_transfer

pytestmark = pytest.mark.skipif(not backend_built("dpdk"),
                                reason="DPDK backend not built (no libdpdk found by pkg-config)")

PAGES = 320  # 2 MiB pages: two processes with EAL's -m 256 each, plus slack
NR = "/proc/sys/vm/nr_hugepages"


def meminfo(key):
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return 0


class HugeDpdk(Dpdk):
    """Dpdk whose EAL arguments take memory from a private hugetlbfs mount."""

    def __init__(self, tmp_path, huge_dir):
        super().__init__(tmp_path)
        self.huge_dir = huge_dir

    def eal(self, vdev):
        args = super().eal(vdev)
        i = args.index("--no-huge")
        # the same -m 256 per process, from the 2 MiB pages of our own mount
        return args[:i] + ["--huge-dir", str(self.huge_dir)] + args[i + 1:]


@pytest.fixture
def huge(tmp_path):
    if meminfo("Hugepagesize") != 2048:
        pytest.skip("default hugepage size is not 2 MiB")
    with open(NR) as f:
        old = int(f.read())
    mnt = tmp_path / "huge"
    mnt.mkdir()
    mounted = False
    try:
        with open(NR, "w") as f:
            f.write(str(old + PAGES))
        if meminfo("HugePages_Free") < PAGES:
            pytest.skip("the kernel gave fewer than %d free 2 MiB pages" % PAGES)
        sh("mount", "-t", "hugetlbfs", "-o", "pagesize=2M", "none", str(mnt))
        mounted = True
        d = HugeDpdk(tmp_path, mnt)
        try:
            yield d
        finally:
            d.close()
    finally:
        if mounted:
            subprocess.run(["umount", str(mnt)], check=False)
        with open(NR, "w") as f:
            f.write(str(old))


def test_dpdk_memif_pair_on_hugepages_64M_each_way_sha256(huge):
    free0 = meminfo("HugePages_Free")

    def on_hugepages(d):
        # EAL backs its memory with files in --huge-dir and takes pages from the pool.
        assert any(os.scandir(d.huge_dir)), "EAL mapped no hugepage file in %s" % d.huge_dir
        assert meminfo("HugePages_Free") < free0

    memif_pair_transfer(huge, 64, on_serving=on_hugepages, timeout=120)
