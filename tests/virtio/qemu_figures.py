#!/usr/bin/env python3
"""Figures for the virtio PCI driver (issue 21), side by side in one QEMU guest.

    sudo /usr/bin/python3 tests/virtio/qemu_figures.py [--seconds 10] [--rounds 2]

One TCG guest with a modern virtio-net-pci device (TAP-backed, namespace pci<pid>).
Each round runs the same ipkit-bench-linux client in the host namespace against two
servers in the guest, one after the other:
  ipkit   ipkit-bench on ipkit's user-space PCI driver (virtio:pci=ADDR)
  linux   ipkit-bench-linux on the guest kernel's own virtio_net driver and TCP
and prints a markdown table: TCP ping-pong (1 connection, 64-byte requests:
requests/s and latency percentiles) and bulk into the guest (-g 2, 64 KiB writes:
Gbit/s). A benchmark, never a test: the figures are noisy (TCG, a shared machine)
and only a ratio measured in the same run means anything.
"""
import argparse
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import qemu_guest as qg  # noqa: E402

NS = "pcif%d" % os.getpid()
NIC = {"mode": "modern", "tap": "pcif%d" % os.getpid(), "slot": 5,
       "mac": "52:54:00:21:00:05", "addr": "0000:00:05.0", "net": "10.121.5"}
BENCH_LINUX = os.path.join(qg.BUILD, "bench", "ipkit-bench-linux")


def host(*args, timeout=120, check=True):
    return subprocess.run(["ip", "netns", "exec", NS] + list(args), check=check,
                          timeout=timeout, capture_output=True, text=True)


def client(gip, seconds, extra):
    r = host(BENCH_LINUX, "-s", gip, "-t", str(seconds), "--json", *extra,
             timeout=seconds + 120, check=False)
    for line in r.stdout.splitlines():
        if '"type":"summary"' in line:
            return json.loads(line)
    raise RuntimeError("no summary from the client: " + r.stdout[-500:] + r.stderr[-500:])


def wait_port(guest, port):
    for _ in range(100):
        if host("bash", "-c", "exec 3<>/dev/tcp/%s.2/%d" % (NIC["net"], port),
                check=False, timeout=10).returncode == 0:
            return
        time.sleep(0.2)
    raise RuntimeError("server in the guest never listened: " +
                       guest.run("cat /tmp/srv.log")[1][-800:])


def run_server(guest, cmd, seconds):
    """Start a server in the guest, measure ping-pong then bulk, stop it."""
    guest.check("%s > /tmp/srv.log 2>&1 & echo $! > /tmp/srv.pid" % cmd)
    try:
        wait_port(guest, 10000)
        pp = client(NIC["net"] + ".2", seconds, ["-c", "1", "-g", "1", "-l", "64"])
        bulk = client(NIC["net"] + ".2", seconds, ["-c", "1", "-g", "2", "-l", "65536"])
    finally:
        guest.run("kill $(cat /tmp/srv.pid); for i in $(seq 100); do"
                  " kill -0 $(cat /tmp/srv.pid) 2>/dev/null || break; sleep 0.1; done")
    return pp, bulk


def set_kernel_driver(guest, on):
    a = NIC["addr"]
    if on:
        guest.check("test -e /sys/bus/pci/devices/%s/driver ||"
                    " echo %s > /sys/bus/pci/drivers/virtio-pci/bind" % (a, a))
        guest.check("d=$(ls /sys/bus/pci/devices/%s/virtio*/net); ip addr flush dev $d;"
                    " ip addr add %s.2/24 dev $d; ip link set $d up" % (a, NIC["net"]))
    else:
        guest.check("test ! -e /sys/bus/pci/devices/%s/driver ||"
                    " echo %s > /sys/bus/pci/devices/%s/driver/unbind" % (a, a, a))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("qemu_figures: needs root")
    qg.GUEST_TOOLS += ["bench/ipkit-bench", "bench/ipkit-bench-linux"]
    if not os.path.exists(BENCH_LINUX):
        sys.exit("qemu_figures: build first (%s missing)" % BENCH_LINUX)
    subprocess.run(["ip", "netns", "add", NS], check=True, timeout=30)
    g = None
    rows = []
    try:
        host("ip", "link", "set", "lo", "up")
        host("ip", "tuntap", "add", "dev", NIC["tap"], "mode", "tap", "vnet_hdr")
        host("ip", "addr", "add", NIC["net"] + ".1/24", "dev", NIC["tap"])
        host("ip", "link", "set", NIC["tap"], "up")
        g = qg.Guest(NS, [NIC])
        g.start()
        print("guest booted in %.1f s" % g.boot_seconds, file=sys.stderr)
        for rnd in range(args.rounds):
            set_kernel_driver(g, False)
            host("ip", "neigh", "flush", "dev", NIC["tap"], check=False)
            rows.append(("ipkit", rnd) + run_server(
                g, "ipkit-bench --io virtio:pci=%s --ip %s.2/24 -p 10000" % (
                    NIC["addr"], NIC["net"]), args.seconds))
            set_kernel_driver(g, True)
            host("ip", "neigh", "flush", "dev", NIC["tap"], check=False)
            rows.append(("linux", rnd) + run_server(
                g, "ipkit-bench-linux -p 10000", args.seconds))
    finally:
        if g is not None:
            g.stop()
        subprocess.run(["ip", "netns", "del", NS], check=False, timeout=30)
    print("| round | guest side | ping-pong req/s | p50 us | p99 us | bulk into guest Gbit/s |")
    print("| --- | --- | --- | --- | --- | --- |")
    for who, rnd, pp, bulk in rows:
        lat = pp.get("lat_us", {})
        print("| %d | %s | %s | %.0f | %.0f | %.3f |" % (
            rnd + 1, "ipkit, virtio:pci (user space)" if who == "ipkit"
            else "Linux virtio_net + TCP", pp["req_per_s"], lat.get("p50", 0),
            lat.get("p99", 0), bulk["tx_gbps"]))


if __name__ == "__main__":
    main()
