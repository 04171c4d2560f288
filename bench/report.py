#!/usr/bin/env python3
"""Turn bench/run_bench.sh's raw.jsonl into report.md and PNG plots (matplotlib).

    report.py RAW_JSONL OUT_DIR

Each raw line is {"series", "system" (ipkit | linux), "x", "args", "summary"} where
summary is the client's --json summary line; lines with "note" explain a series that
did not run. Ratios are ipkit / Linux from the same run.
"""
import json
import os
import platform
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

SYSTEMS = ("ipkit", "linux")
LABEL = {"ipkit": "ipkit (TAP)", "linux": "Linux (veth)"}
SERIES = {
    "conns": ("TCP ping-pong, 1-byte requests, depth 1: requests/s vs connections",
              "connections"),
    "rate": ("TCP ping-pong, 64-byte requests, 8 connections, target rate per thread "
             "(0 = unlimited): latency vs throughput", "target req/s"),
    "bulk": ("TCP burst (client sends, server only consumes), one connection: "
             "throughput vs request size", "bytes/request"),
    "udp": ("UDP ping-pong, 64-byte datagrams, depth 1", "flows"),
}


def load(path):
    rows, notes = [], {}
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            d = json.loads(line)
            if "note" in d:
                notes[d["series"]] = d["note"]
            else:
                rows.append(d)
    return rows, notes


def pick(rows, series, system):
    out = [r for r in rows if r["series"] == series and r.get("system") == system]
    return sorted(out, key=xkey)


def xkey(x):
    """Sort key: a rate of 0 means unlimited, so it goes last."""
    x = x["x"] if isinstance(x, dict) else x
    return x if x else float("inf")


def lat(s, key):
    return s.get("lat_us", {}).get(key)


def fmt(v, spec):
    return "n/a" if v is None else format(v, spec)


def ratio(a, b):
    return "n/a" if not a or not b else "%.2f" % (a / b)


def series_table(rows, series):
    title, xname = SERIES[series]
    bulk = series == "bulk"
    lines = ["### " + title, ""]
    if bulk:
        lines += ["| %s | ipkit Gbit/s | Linux Gbit/s | ipkit/Linux | errors |" % xname,
                  "|---:|---:|---:|---:|---|"]
    else:
        lines += ["| %s | ipkit req/s | Linux req/s | ipkit/Linux | ipkit p50/p99 us | "
                  "Linux p50/p99 us | errors |" % xname, "|---:|---:|---:|---:|---:|---:|---|"]
    by = {s: {r["x"]: r["summary"] for r in pick(rows, series, s)} for s in SYSTEMS}
    for x in sorted(set(by["ipkit"]) | set(by["linux"]), key=xkey):
        a, b = by["ipkit"].get(x, {}), by["linux"].get(x, {})
        xs = "unlimited" if series == "rate" and not x else x
        errs = "%s / %s" % (a.get("errors", "-"), b.get("errors", "-"))
        if bulk:
            lines.append("| %s | %s | %s | %s | %s |" % (
                xs, fmt(a.get("tx_gbps"), ".3f"), fmt(b.get("tx_gbps"), ".3f"),
                ratio(a.get("tx_gbps"), b.get("tx_gbps")), errs))
        else:
            lines.append("| %s | %s | %s | %s | %s / %s | %s / %s | %s |" % (
                xs, fmt(a.get("req_per_s"), ".0f"), fmt(b.get("req_per_s"), ".0f"),
                ratio(a.get("req_per_s"), b.get("req_per_s")),
                fmt(lat(a, "p50"), ".1f"), fmt(lat(a, "p99"), ".1f"),
                fmt(lat(b, "p50"), ".1f"), fmt(lat(b, "p99"), ".1f"), errs))
    return lines + [""]


def plot(rows, series, xs, ys, fname, title, xlabel, ylabel, logx=False, logy=False):
    fig, ax = plt.subplots(figsize=(6.4, 4.2), dpi=110)
    for s, marker in zip(SYSTEMS, ("o", "s")):
        pts = [(xs(r), ys(r)) for r in pick(rows, series, s)]
        pts = [p for p in pts if p[0] is not None and p[1] is not None]
        if pts:
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker=marker, label=LABEL[s])
    ax.set_title(title, fontsize=10)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if logx:
        ax.set_xscale("log", base=2)
    if logy:
        ax.set_yscale("log")
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(fname)
    plt.close(fig)


def plots(rows, out):
    made = []
    plot(rows, "conns", lambda r: r["x"], lambda r: r["summary"].get("req_per_s"),
         os.path.join(out, "reqs_vs_conns.png"), "TCP ping-pong, 1 byte: requests/s vs connections",
         "connections", "requests/s", logx=True)
    made.append(("requests/s vs connections", "reqs_vs_conns.png"))
    plot(rows, "rate", lambda r: r["summary"].get("req_per_s"), lambda r: lat(r["summary"], "p99"),
         os.path.join(out, "p99_vs_throughput.png"),
         "TCP ping-pong, 64 B, 8 conns: p99 latency vs throughput", "requests/s (achieved)",
         "p99 latency (us)", logy=True)
    made.append(("p99 latency vs throughput", "p99_vs_throughput.png"))
    plot(rows, "bulk", lambda r: r["x"], lambda r: r["summary"].get("tx_gbps"),
         os.path.join(out, "bulk_vs_size.png"), "TCP bulk, one connection: Gbit/s vs request size",
         "bytes per request (write size)", "Gbit/s", logx=True)
    made.append(("bulk Gbit/s vs message size", "bulk_vs_size.png"))
    return made


def models_section(rows, notes, out):
    """ipkit-bench -T 2 under each thread model next to the twin's -T 2: table and bars."""
    res = [r for r in rows if r["series"] == "models"]
    if not res:
        return [notes.get("models", "no thread-model runs"), ""]
    lines = ["Server with 2 threads, TCP ping-pong, 64-byte requests, 16 connections from "
             "the twin client with 2 threads.", "",
             "| server | req/s | p50/p99 us | errors |", "|---|---:|---:|---|"]
    for r in res:
        s = r["summary"]
        lines.append("| %s | %s | %s / %s | %s |" % (
            r["system"], fmt(s.get("req_per_s"), ".0f"), fmt(lat(s, "p50"), ".1f"),
            fmt(lat(s, "p99"), ".1f"), s.get("errors")))
    fig, ax = plt.subplots(figsize=(6.4, 4.2), dpi=110)
    ax.bar([r["system"] for r in res], [r["summary"].get("req_per_s") or 0 for r in res],
           color=["#1f77b4"] * (len(res) - 1) + ["#ff7f0e"])
    ax.set_title("2 server threads: thread models side by side (TCP ping-pong, 16 conns)",
                 fontsize=10)
    ax.set_ylabel("requests/s")
    ax.grid(True, axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "models.png"))
    plt.close(fig)
    return lines + ["", "![thread models](models.png)", ""]


def inmem_table(res, notes):
    """bench/inmem's JSON lines (two engines in one process over an in-memory wire)."""
    if not res:
        return [notes.get("inmem", "HOOK: no in-memory results"), ""]
    lines = ["Two engines in one process and one thread over an in-memory wire "
             "(bench/inmem); every payload byte verified.", "",
             "| stack | build | workload | profile | conns | req/s | ns/req | Gbit/s | "
             "bytes/idle conn | verified |", "|---|---|---|---|---:|---:|---:|---:|---:|---|"]
    for d in res:
        lines.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            d.get("stack"), d.get("build"), d.get("workload"), d.get("profile"),
            d.get("conns"), fmt(d.get("req_per_s") or None, ".0f"),
            fmt(d.get("ns_per_req") or None, ".1f"), fmt(d.get("gbit_s"), ".2f"),
            fmt(d.get("conn_bytes"), ".0f"), "yes" if d.get("verified") else "NO"))
    return lines + [""]


def instr_table(res):
    """bench/inmem/instr.sh's JSON lines: instructions per unit, a row per workload and a
    column per stack, in the order instr.sh measured them."""
    if not res:
        return []
    stacks, works, val = [], [], {}
    for d in res:
        st, w = d.get("stack"), d.get("workload")
        if st not in stacks:
            stacks.append(st)
        if w not in works:
            works.append(w)
        val[(st, w)] = d.get("instructions")
    lines = ["Instructions per request (ping-pong) or per 1460 B (bulk) under callgrind "
             "(`bench/inmem/instr.sh --quick`: two run lengths, the difference, so set-up "
             "cancels); `harness-pingpong-c1-sw` is the harness's own share of "
             "pingpong-c1-sw. Independent of the machine's load.", "",
             "| workload | " + " | ".join(stacks) + " |",
             "|---|" + "---:|" * len(stacks)]
    for w in works:
        lines.append("| %s | %s |" % (w, " | ".join(
            fmt(val.get((st, w)), ".0f") if val.get((st, w)) is not None else "-"
            for st in stacks)))
    return lines + [""]


def machine():
    cpu = "unknown CPU"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return "%s, %d CPUs, Linux %s" % (cpu, os.cpu_count() or 0, platform.release())


def main():
    raw, out = sys.argv[1], sys.argv[2]
    rows, notes = load(raw)
    made = plots(rows, out)
    total_errors = sum(max(r["summary"].get("errors", 0), 0) for r in rows)
    failed = [r for r in rows if r["summary"].get("errors", 0) < 0]
    md = ["# ipkit-bench report", "",
          "Machine: %s; load average (1/5/15 min) %s at the start, %s at the end. "
          "Generated by `make bench` (`%s`, then bench/report.py) from `raw.jsonl` in this "
          "folder." % (machine(), notes.get("load_start", "?"), notes.get("load_end", "?"),
                       notes.get("command", "bench/run_bench.sh")), "",
          "Every row uses the same client, the Linux twin `ipkit-bench-linux` (C, epoll) in "
          "a network namespace; the server is `ipkit-bench` on a TAP device (its peer is "
          "the kernel side of the TAP) or `ipkit-bench-linux` in a second namespace over "
          "a veth pair. Ratios are ipkit / Linux measured in the same run. Both sides "
          "share a 2-CPU machine with other work, so compare within a run, not across "
          "runs. Errors are the client's count (payload mismatches, unexpected closes, "
          "timeouts, failed connects): ipkit / Linux.", "",
          "Errors over all cases: %d%s." % (total_errors,
                                            ", %d case(s) produced no summary" % len(failed)
                                            if failed else ""), ""]
    for series in SERIES:
        if any(r["series"] == series for r in rows):
            md += series_table(rows, series)
    md += ["## Plots", ""]
    for title, fname in made:
        md += ["![%s](%s)" % (title, fname), ""]
    md += ["## Thread models", ""] + models_section(rows, notes, out)
    md += ["## In-memory harness", ""]
    md += inmem_table([r["summary"] for r in rows if r["series"] == "inmem"], notes)
    md += instr_table([r["summary"] for r in rows if r["series"] == "instr"])
    with open(os.path.join(out, "report.md"), "w") as f:
        f.write("\n".join(md))


if __name__ == "__main__":
    main()
