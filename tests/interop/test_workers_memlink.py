"""Queue steering (IPK_STEER_QUEUES) on a real multi-queue link: memlink with 2 queue
pairs. The side that opens all queues (ipkit-nc, single-node ipkit-echo) plays the
receiving RSS NIC: it puts each frame on queue reta[toeplitz % 128] (symmetric key,
reta i % 2), and ARP on queue 0. The other side is ipkit-echo --workers 2 --steer
queues, worker i on queue i.

What is proved:
  - passive opens: several ipkit-nc connections, 4 MiB each way, SHA-256 equal;
  - active opens from both workers (RSS-aware local ports) all complete;
  - no worker ever receives a frame of another worker's flow (wrong_queue 0);
  - ARP forwarding between workers is what makes this work: ARP replies and
    requests only ever arrive on queue 0, so without it worker 1 never learns the
    peer's MAC and its connections fail (checked by hand when written: 20 of 40
    active opens, and the nc runs whose flows hash to worker 1 get nothing).

No root, no devices: the regions are /dev/shm/ipkit-ml-ipkQ<hex>.q<Q>, removed at the end.
"""
import glob
import os
import re
import secrets
import subprocess

import pytest

from conftest import backend_built, prog, stop_procs
from test_workers import STAT

pytestmark = pytest.mark.skipif(not backend_built("memlink"), reason="memlink not built")


class MemLink:
    """Processes on both ends of one 2-queue memlink; everything ends at close."""

    def __init__(self):
        self.name = "ipkQ" + secrets.token_hex(3)
        self.procs = []

    def spec(self, role):
        return "memlink:%s,role=%s,queues=2" % (self.name, role)

    def start(self, *args):
        p = subprocess.Popen([prog(args[0])] + list(args[1:]), stdin=subprocess.DEVNULL,
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        self.procs.append(p)
        return p

    def close(self):
        stop_procs(self.procs)
        for f in glob.glob("/dev/shm/ipkit-ml-%s*" % self.name):
            try:
                os.unlink(f)
            except OSError:
                pass


@pytest.fixture
def mlink():
    for exe in ("ipkit-echo", "ipkit-nc"):
        if not os.path.exists(prog(exe)):
            pytest.skip("examples not built")
    lk = MemLink()
    yield lk
    lk.close()


def worker_stats(err):
    assert b"Sanitizer" not in err, err
    stats = {}
    for m in STAT.finditer(err):
        w, rx, wrong, acc, conn, closed = (int(x) for x in m.groups())
        stats[w] = dict(rx=rx, wrong=wrong, accepted=acc, connected=conn, closed=closed)
    assert set(stats) == {0, 1}, err
    return stats


def test_queue_steering_passive_opens_sha256(mlink):
    srv = mlink.start("ipkit-echo", "--workers", "2", "--steer", "queues",
                      "--io", mlink.spec("a"), "--ip", "10.9.0.1/24")
    runs, size = 4, 4 << 20
    for i in range(runs):
        r = subprocess.run([prog("ipkit-nc"), "--io", mlink.spec("b"), "--ip", "10.9.0.2/24",
                            "--send-size", str(size), "--no-output", "--sha256",
                            "--timeout", "10", "10.9.0.1", "7"],
                           capture_output=True, timeout=30)
        err = r.stderr.decode()
        assert r.returncode == 0, (i, err)
        s = re.search(r"^sent (\d+) sha256 (\w+)$", err, re.M)
        g = re.search(r"^received (\d+) sha256 (\w+)$", err, re.M)
        assert s and g and int(s.group(1)) == size and s.groups() == g.groups(), (i, err)
    srv.terminate()
    _, err = srv.communicate(timeout=15)
    stats = worker_stats(err)
    assert stats[0]["accepted"] + stats[1]["accepted"] == runs, err
    assert stats[0]["wrong"] == 0 and stats[1]["wrong"] == 0, err


def test_queue_steering_active_opens_from_both_workers(mlink):
    peer = mlink.start("ipkit-echo", "--io", mlink.spec("a"), "--ip", "10.9.0.2/24")
    cli = mlink.start("ipkit-echo", "--workers", "2", "--steer", "queues", "--port", "0",
                      "--io", mlink.spec("b"), "--ip", "10.9.0.1/24",
                      "--connect", "10.9.0.2:7", "--conns", "20", "--timeout", "15")
    _, err = cli.communicate(timeout=30)
    assert cli.returncode == 0, err
    assert b"active opens ok 40 of 40" in err, err
    stats = worker_stats(err)
    for w in (0, 1):
        assert stats[w]["connected"] == 20, err
        assert stats[w]["wrong"] == 0, err
    assert peer.poll() is None  # the single-node side served them all
