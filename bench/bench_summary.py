#!/usr/bin/env python3
"""ipkit-bench / ipkit-bench-linux --json lines on stdin -> one line
"req/s p50_us p99_us tx_Gbit/s" from the last summary object; "0 0 0 0" when there is
none or it counted errors. Shared by bench/io_pairs.sh and bench/mc_figures.sh."""
import json
import sys

last = None
for line in sys.stdin:
    try:
        j = json.loads(line)
    except ValueError:
        continue
    if isinstance(j, dict) and j.get("type") == "summary":
        last = j
if last is None or last.get("errors", 1):
    print("0 0 0 0")
else:
    lat = last.get("lat_us", {})
    print("%d %.0f %.0f %.2f" % (last["req_per_s"], lat.get("p50", 0), lat.get("p99", 0),
                                 last["tx_gbps"]))
