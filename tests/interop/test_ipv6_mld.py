"""MLDv2 with a snooping Linux bridge as the switch (issue 19, RFC 3810): ipkit on a
TAP port of a bridge with multicast snooping and its own MLDv2 querier (query
every 1 s, membership timeout 3 s). The bridge forwards a group only to ports whose
listeners reported it, and forgets a report after the membership timeout, so
ipkit's solicited-node groups stay in the bridge's table after several timeouts
only if ipkit answers the queries (its join reports alone age out after 3 s);
ping -6 from the bridge to ipkit (the NS goes to ipkit's solicited-node group)
works at the end. ipkit-echo -v reports the queries it answered.

Namespace ipk<hex>m, removed at teardown (also on failure); processes ended by PID;
every wait bounded.
"""
import ipaddress
import os
import re
import secrets
import subprocess
import time

import pytest

from conftest import available_kinds, prog, sh, stop_procs

pytestmark = pytest.mark.skipif("tap" not in available_kinds(), reason="tap backend not built")


def solicited_node(addr):
    """ff02::1:ffXX:XXXX for an IPv6 address given as text, as iproute2 prints it."""
    b = ipaddress.IPv6Address(addr).packed
    return str(ipaddress.IPv6Address(bytes.fromhex("ff0200000000000000000001ff") + b[13:]))


@pytest.fixture
def mldnet():
    if os.geteuid() != 0:
        pytest.skip("interop tests need root (network namespaces)")
    tag = "ipk" + secrets.token_hex(2)
    ns = tag + "m"
    procs = []
    sh("ip", "netns", "add", ns)
    try:
        yield ns, tag, procs
    finally:
        stop_procs(procs, grace=3)
        sh("ip", "netns", "del", ns, check=False)


@pytest.mark.parametrize("version", [2, 1])
def test_mld_snooping_bridge_keeps_ipkit_groups_and_delivers_ns(mldnet, version):
    """version 1: the bridge's querier speaks MLDv1 (RFC 2710); ipkit hears its
    24-byte queries, enters MLDv1 compatibility mode (RFC 3810 §8) and answers with
    MLDv1 reports, which are what keeps its groups in the bridge's table then."""
    ns, tag, procs = mldnet
    br, tap = tag + "b", tag + "t"
    pfx = "fd%02x:%x::" % (secrets.randbelow(256), secrets.randbelow(65536))
    ipk6 = pfx + "2"

    def run(*a, check=True):
        return subprocess.run(["ip", "netns", "exec", ns] + list(a), check=check,
                              capture_output=True, timeout=30)

    run("ip", "link", "set", "lo", "up")
    # times in centiseconds: queries every 1 s (answers within 0.5 s), forgotten
    # after 3 s without a report
    run("ip", "link", "add", br, "type", "bridge", "mcast_snooping", "1", "mcast_querier",
        "1", "mcast_mld_version", str(version), "mcast_query_interval", "100",
        "mcast_query_response_interval", "50", "mcast_membership_interval", "300",
        "mcast_startup_query_interval", "100")
    run("sysctl", "-qw", "net.ipv6.conf.%s.disable_ipv6=0" % br)
    run("ip", "-6", "addr", "add", pfx + "1/64", "dev", br, "nodad")
    run("ip", "link", "set", br, "up")
    p = subprocess.Popen(["ip", "netns", "exec", ns, prog("ipkit-echo"), "-v", "--io",
                          "tap:" + tap, "--ip", "10.%d.0.2/24" % (100 + secrets.randbelow(100)),
                          "--ip6", ipk6 + "/64"],
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE)
    procs.append(p)
    for _ in range(100):
        if run("ip", "link", "show", tap, check=False).returncode == 0:
            break
        time.sleep(0.05)
    run("sysctl", "-qw", "net.ipv6.conf.%s.disable_ipv6=1" % tap)
    run("ip", "link", "set", tap, "master", br)
    run("ip", "link", "set", tap, "up")
    group = solicited_node(ipk6)
    # three membership timeouts: only answered queries keep the entry
    time.sleep(10)
    mdb = run("bridge", "mdb", "show").stdout.decode()
    assert re.search(r"port %s grp %s\b" % (tap, re.escape(group)), mdb), mdb
    r = run("ping", "-6", "-c", "3", "-i", "0.2", "-W", "2", ipk6, check=False)
    assert r.returncode == 0, r.stdout.decode()
    stop_procs([p], grace=5)
    err = p.stderr.read().decode(errors="replace")
    m = re.search(r"mld_tx=(\d+) mld_queries=(\d+) .*mld1_tx=(\d+) mld1_queries=(\d+)", err)
    assert m, err[-800:]
    assert int(m.group(2)) >= 3, err[-800:]  # ~9 queries in the 10 s
    if version == 1:
        # every query was an MLDv1 one, answered with MLDv1 reports
        assert int(m.group(4)) >= 3 and int(m.group(4)) == int(m.group(2)), err[-800:]
        assert int(m.group(3)) >= 3, err[-800:]
    else:
        assert int(m.group(3)) == 0 and int(m.group(4)) == 0, err[-800:]
