#!/usr/bin/env python3
"""Build the suite-'unit' test programs with a cross compiler and run them.

    cross_units.py BUILD_DIR ARCH      ARCH: i686 (runs natively, 32-bit)
                                             s390x (runs under qemu-s390x, big-endian)

The tests are discovered from meson's introspection of BUILD_DIR, so the gate follows
every test someone registers with `suite : 'unit'`: each test's own C sources, its
-I/-D/-std flags, its arguments and environment. Every library target of the project
(the core, the sim packet pool, ...) is compiled into a static archive for the
target and linked in with -static. Prints one "ok NAME" or "FAIL NAME" line per
check; exits non-zero when any failed.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

ARCHES = {
    "i686": {"cc": "i686-linux-gnu-gcc", "ar": "i686-linux-gnu-ar", "run": []},
    "s390x": {"cc": "s390x-linux-gnu-gcc", "ar": "s390x-linux-gnu-ar",
              "run": ["qemu-s390x"]},
}
WARN = ["-O2", "-Wall", "-Wextra", "-Werror", "-pedantic"]
LIB_TYPES = {"static library", "shared library", "both libraries"}
# Libraries that define libc's own calls (socket, bind, read, poll, ...) to interpose
# them with LD_PRELOAD: linked statically into a test they would replace libc's calls.
# Built for the target (checked to compile), never archived into the tests.
INTERPOSERS = {"ipkit-preload"}


def introspect(build, what):
    out = subprocess.run(["meson", "introspect", build, what], check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out)


def keep_flags(params, build):
    """The flags that say what the code is (-I, -D, -std), not how the host builds it."""
    flags = []
    for p in params:
        if p.startswith("-I") and len(p) > 2:
            path = p[2:]
            if not os.path.isabs(path):
                path = os.path.normpath(os.path.join(build, path))
            flags.append("-I" + path)
        elif p.startswith("-D") or p.startswith("-std=") or p in (
                "-ffreestanding", "-fno-builtin-printf"):
            flags.append(p)
    return flags


def c_sources(target):
    """(sources, flags) of the C parts of a target; None when it has other languages."""
    srcs, flags = [], []
    for ts in target.get("target_sources", []):
        if not ts.get("sources"):
            continue
        if ts.get("language") != "c":
            return None
        srcs += ts["sources"]
        flags = ts.get("parameters", [])
    return srcs, flags


def warn_for(params):
    """WARN, less -pedantic for a target the build itself compiles without it (meson
    warning_level below 3: the preload shim, which must define glibc's socket calls
    with their GNU transparent-union signatures; svc/preload/meson.build)."""
    warn = WARN
    if "-O0" in params:  # a target the build compiles at -O0 on purpose (the iip
        # signature tests: stub callbacks returning constants, which -O2 folds into
        # -Wmaybe-uninitialized reports about paths no real program takes)
        warn = ["-O0" if w == "-O2" else w for w in warn]
    if any(p in ("-Wpedantic", "-pedantic") for p in params):
        return warn
    return [w for w in warn if w != "-pedantic"]


def compile_objs(cc, srcs, flags, outdir, tag, warn=WARN):
    objs = []
    for i, src in enumerate(srcs):
        obj = os.path.join(outdir, "%s_%d_%s.o" % (tag, i, os.path.basename(src)))
        r = subprocess.run([cc] + warn + flags + ["-c", src, "-o", obj],
                           capture_output=True, text=True)
        if r.returncode != 0:
            return None, r.stderr
        objs.append(obj)
    return objs, ""


def build_archives(arch, targets, build, outdir):
    """Every project library as a static archive for the target."""
    archives, errors = [], []
    for t in targets:
        if t["type"] not in LIB_TYPES:
            continue
        cs = c_sources(t)
        if cs is None or not cs[0]:
            continue
        objs, err = compile_objs(arch["cc"], cs[0], keep_flags(cs[1], build), outdir,
                                 "lib" + t["name"], warn_for(cs[1]))
        if objs is None:
            errors.append("%s: %s" % (t["name"], err))
            continue
        if t["name"] in INTERPOSERS:
            continue
        a = os.path.join(outdir, "lib%s.a" % t["name"])
        subprocess.run([arch["ar"], "rcs", a] + objs, check=True)
        archives.append(a)
    return archives, errors


def run_test(arch, name, test, target, archives, build, outdir):
    cs = c_sources(target)
    if cs is None:
        return "skip", "not plain C"
    objs, err = compile_objs(arch["cc"], cs[0], keep_flags(cs[1], build), outdir,
                             "t_" + target["name"], warn_for(cs[1]))
    if objs is None:
        return "fail", err
    exe = os.path.join(outdir, target["name"])
    link = [arch["cc"], "-static", "-o", exe] + objs + ["-Wl,--start-group"] + \
        archives + ["-Wl,--end-group", "-lm"]
    r = subprocess.run(link, capture_output=True, text=True)
    if r.returncode != 0:
        return "fail", r.stderr
    env = dict(os.environ)
    env.update(test.get("env") or {})
    cwd = test.get("workdir") or outdir
    limit = (test.get("timeout") or 30) * 5
    try:
        r = subprocess.run(arch["run"] + [exe] + test["cmd"][1:], cwd=cwd, env=env,
                           capture_output=True, text=True, timeout=limit)
    except subprocess.TimeoutExpired:
        return "fail", "timed out after %ds" % limit
    if r.returncode != 0:
        return "fail", (r.stdout + r.stderr)[-3000:]
    return "ok", ""


def main(build, archname):
    arch = ARCHES[archname]
    # meson names suites "<project>:<suite>"
    tests = [t for t in introspect(build, "--tests")
             if any(s.split(":")[-1] == "unit" for s in t.get("suite", []))]
    targets = introspect(build, "--targets")
    by_file = {}
    for t in targets:
        for f in t.get("filename", []):
            by_file[os.path.realpath(f)] = t
    outdir = tempfile.mkdtemp(prefix="ipkit-cross-%s-" % archname)
    failed = 0
    try:
        archives, errors = build_archives(arch, targets, build, outdir)
        if errors:
            print("FAIL %s: build libraries\n%s" % (archname, "\n".join(errors)))
            return 1
        if not tests:
            print("FAIL %s: no tests in suite 'unit' found in %s" % (archname, build))
            return 1
        for test in tests:
            label = "%s unit %s" % (archname, test["name"])
            target = by_file.get(os.path.realpath(test["cmd"][0]))
            if target is None:
                print("skip %s (not built from this project)" % label)
                continue
            state, detail = run_test(arch, test["name"], test, target, archives,
                                     build, outdir)
            if state == "skip":
                print("skip %s (%s)" % (label, detail))
            elif state == "ok":
                print("ok %s" % label)
            else:
                failed += 1
                print("FAIL %s" % label)
                print("    " + detail.strip().replace("\n", "\n    "))
            sys.stdout.flush()
    finally:
        shutil.rmtree(outdir, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[2] not in ARCHES:
        sys.exit("usage: cross_units.py BUILD_DIR {%s}" % "|".join(ARCHES))
    sys.exit(main(sys.argv[1], sys.argv[2]))
