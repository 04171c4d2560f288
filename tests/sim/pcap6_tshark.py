"""Run test_sim_ip6's echo case with a pcap file and read it back with tshark: the
simulator's IPv6 frames (ND, MLDv2, echo, UDP, fragments) must decode cleanly, with
right checksums, as Wireshark sees them. Exit 77 (skip) without tshark."""
import os
import shutil
import subprocess
import sys
import tempfile


def count(pcap, flt):
    r = subprocess.run(["tshark", "-n", "-r", pcap, "-o", "udp.check_checksum:TRUE",
                        "-Y", flt, "-T", "fields", "-e", "frame.number"],
                       capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        sys.exit("tshark failed on %r: %s" % (flt, r.stderr))
    return len([ln for ln in r.stdout.splitlines() if ln.strip()])


def main():
    if not shutil.which("tshark"):
        print("tshark not installed: skipped")
        return 77
    with tempfile.TemporaryDirectory(prefix="ipk6pcap") as d:
        pcap = os.path.join(d, "ip6.pcap")
        r = subprocess.run([sys.argv[1], pcap], capture_output=True, text=True, timeout=60)
        print(r.stdout + r.stderr)
        if r.returncode != 0:
            return 1
        must = {
            "ipv6": 20,
            "icmpv6.type == 135": 1,             # NS (DAD and resolution)
            "icmpv6.type == 136": 1,             # NA
            "icmpv6.type == 143": 1,             # MLDv2 report
            "icmpv6.type == 128": 2,             # echo request
            "icmpv6.type == 129": 2,             # echo reply
            "udp.dstport == 7": 21,              # the echo requests (reassembled)
            "ipv6.fraghdr": 6,                   # fragments, both ways
            "icmpv6.checksum.status == 1": 10,   # verified good
            "udp.checksum.status == 1": 21,
        }
        never = ["_ws.malformed", "icmpv6.checksum.status == 0",
                 "udp.checksum.status == 0", "_ws.expert.severity >= 8388608"]
        bad = []
        for flt, least in must.items():
            n = count(pcap, flt)
            print("%-32s %d (at least %d)" % (flt, n, least))
            if n < least:
                bad.append(flt)
        for flt in never:
            n = count(pcap, flt)
            print("%-32s %d (must be 0)" % (flt, n))
            if n:
                bad.append(flt)
        if bad:
            print("FAIL: " + ", ".join(bad))
            return 1
        return 0


if __name__ == "__main__":
    sys.exit(main())
