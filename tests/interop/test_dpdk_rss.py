"""Queue steering on DPDK ports by the RSS the port really applies (io/dpdk/dpdk_rss.h,
runtime/wio.c): after configuring the port, ipkit reads back its key, hash types and
redirection table and gives the workers' cores exactly that; a port without usable RSS
makes the workers fall back to software steering, and the program says which.

  net_null  the one vdev of DPDK 22.11 here that answers rte_eth_dev_rss_hash_conf_get
            and rte_eth_dev_rss_reta_query: ipkit-echo --workers 2 --steer queues reads
            a 128-entry table and runs queue steering (no traffic worth checking: it
            receives zero-filled frames, which are not IPv4)
  net_tap   answers neither (no multiq qdisc here): --steer queues falls back to the
            software path over one queue, and 40 connections from Linux land on the
            workers their Toeplitz hash names, wrong_queue 0

A real NIC's values (ixgbe, i40e) are covered by tests/runtime/test_dpdk_rss.c.
Names: ipkD<hex> (test_dpdk.py's fixture), removed at teardown, also on failure.
"""
import os
import re

import pytest

from conftest import backend_built, prog
from test_dpdk import connections_land_by_hash, dpdk  # noqa: F401  (dpdk: the fixture)

pytestmark = pytest.mark.skipif(not backend_built("dpdk"),
                                reason="DPDK backend not built (no libdpdk found by pkg-config)")


def test_dpdk_null_queue_steering_uses_the_ports_rss(dpdk):  # noqa: F811
    from test_workers import stop_and_stats
    p = dpdk.start([prog("ipkit-echo")] + dpdk.eal("net_null0") +
                   ["--io", "dpdk:net_null0,queues=2", "--ip", "10.%d.0.2/24" % dpdk.net,
                    "--workers", "2", "--steer", "queues"])
    p.early = dpdk.wait_line(p, "workers (")
    os.set_blocking(p.stderr.fileno(), True)
    stats, err = stop_and_stats(p)
    text = err.decode(errors="replace")
    # IPv6 too (issue 19): ipkit asks for the IPv6 hash types and net_null applies them
    assert re.search(r"queues=2 rss=port \(key and 128-entry table read back, hashes ip4 "
                     r"tcp4 udp4 ip6 tcp6 udp6\)", text), text[-1500:]
    assert "workers: queue steering by the port's RSS (key and 128-entry table" in text, \
        text[-1500:]
    assert "software steering" not in text, text[-1500:]
    assert "2 workers (unified model, queue steering)" in text, text[-1500:]
    assert stats[0]["wrong"] == 0 and stats[1]["wrong"] == 0, text[-1500:]


def test_dpdk_tap_queue_steering_falls_back_to_software(dpdk):  # noqa: F811
    dev = dpdk.tag + "r"
    linux_ip, ipk_ip = "10.%d.0.1" % dpdk.net, "10.%d.0.2" % dpdk.net
    # the hot-plug form: the fallback closes the 2-queue port (which removes the vdev)
    # and probes it again with one queue
    prefix = dpdk.eal("x")[6]  # registers a file prefix for the teardown
    p = dpdk.start([prog("ipkit-echo"), "--no-huge", "-m", "256", "--no-pci",
                    "--no-telemetry", prefix, "--", "--io",
                    "dpdk:net_tap0,iface=%s,queues=2" % dev, "--ip", ipk_ip + "/24",
                    "--workers", "2", "--steer", "queues", "--model", "merge"])
    p.early = dpdk.wait_line(p, "workers (")
    text = p.early.decode(errors="replace")
    assert re.search(r"queues=2 rss=off \(rss_hash_conf_get: ", text), text[-1500:]
    assert re.search(r"the port has no usable RSS .*; software steering", text), text[-1500:]
    assert "queues=1 rss=off (one queue)" in text, text[-1500:]
    assert "2 workers (merge model, software steering)" in text, text[-1500:]
    connections_land_by_hash(dpdk, p, dev, linux_ip, ipk_ip, 40)
