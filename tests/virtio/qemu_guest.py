"""A QEMU guest for testing ipkit's virtio-net PCI driver (issue 21).

The guest is Debian's own 6.1 kernel (linux-image-amd64, fetched with `apt-get
download` and unpacked, never installed) with a busybox-static initramfs holding the
virtio modules and a static build of ipkit's examples. QEMU runs with the TCG
accelerator only (KVM is never needed), inside a network namespace this harness
creates; each virtio-net-pci device of the guest is backed by a TAP device in that
namespace, whose kernel side carries the Linux peer's address.

Host <-> guest control: the guest's second serial port (ttyS1) is a UNIX socket on
the host. The guest's /init runs a tiny agent on it: the host sends
"ID BASE64(shell command)\n", the agent runs it with sh and answers with the output
followed by "@@END ID RC\n". The first port (ttyS0) is the console, kept in a file.

Cache: the kernel is downloaded once into $IPK_QEMU_CACHE (default
<build>/qemu-cache); the static tools are built in <build>/guest-static (a meson build
with no pkg-config, so only the TAP/AF_PACKET/memlink/virtio backends, linked -static).

Nothing here touches a host PCI device: the guest's devices are QEMU's.
"""
import base64
import glob
import gzip
import os
import shutil
import socket
import stat
import subprocess
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD = os.path.abspath(os.environ.get("IPKIT_BUILD", os.path.join(ROOT, "build")))
CACHE = os.path.abspath(os.environ.get("IPK_QEMU_CACHE", os.path.join(BUILD, "qemu-cache")))
GUEST_BUILD = os.path.join(BUILD, "guest-static")
QEMU = shutil.which("qemu-system-x86_64")
BUSYBOX = "/bin/busybox"
GUEST_TOOLS = ["examples/ipkit-nc", "examples/ipkit-httpd"]
# Load order of the modules a virtio-net PCI device needs (no modules.dep in the
# package: depmod runs at installation, which never happens here).
MODULES = ["drivers/virtio/virtio_ring.ko", "drivers/virtio/virtio.ko",
           "drivers/virtio/virtio_pci_modern_dev.ko",
           "drivers/virtio/virtio_pci_legacy_dev.ko", "drivers/virtio/virtio_pci.ko",
           "net/core/failover.ko", "drivers/net/net_failover.ko",
           "drivers/net/virtio_net.ko"]
BOOT_BUDGET = int(os.environ.get("IPK_QEMU_BOOT_SECONDS", "400"))


class Unavailable(Exception):
    """The guest cannot be had here (no QEMU, no kernel package, QEMU refused to
    start): tests skip with this reason."""


def _run(args, timeout, **kw):
    return subprocess.run(args, check=False, timeout=timeout, capture_output=True,
                          text=True, **kw)


# ------------------------------------------------------------------ kernel

def kernel():
    """(vmlinuz path, module tree root) of Debian's 6.1 kernel, downloaded into CACHE
    on first use."""
    kdir = os.path.join(CACHE, "kernel")
    vml = glob.glob(os.path.join(kdir, "boot", "vmlinuz-*"))
    if not vml:
        os.makedirs(CACHE, exist_ok=True)
        r = _run(["apt-cache", "depends", "linux-image-amd64"], 60)
        pkgs = [ln.split(":", 1)[1].strip() for ln in r.stdout.splitlines()
                if ln.strip().startswith("Depends: linux-image-")]
        if not pkgs:
            raise Unavailable("apt-cache knows no linux-image-amd64 dependency: " +
                              (r.stderr.strip() or r.stdout.strip())[:200])
        dl = tempfile.mkdtemp(dir=CACHE)
        os.chmod(dl, 0o777)  # apt's _apt user writes there
        try:
            r = _run(["apt-get", "download", pkgs[0]], 600, cwd=dl)
            debs = glob.glob(os.path.join(dl, "*.deb"))
            if not debs:
                raise Unavailable("apt-get download %s failed: %s" % (pkgs[0], r.stderr[-300:]))
            tmp = kdir + ".tmp"
            shutil.rmtree(tmp, ignore_errors=True)
            r = _run(["dpkg-deb", "-x", debs[0], tmp], 300)
            if r.returncode != 0:
                raise Unavailable("dpkg-deb -x failed: " + r.stderr[-300:])
            os.rename(tmp, kdir)
        finally:
            shutil.rmtree(dl, ignore_errors=True)
        vml = glob.glob(os.path.join(kdir, "boot", "vmlinuz-*"))
    mods = glob.glob(os.path.join(kdir, "lib", "modules", "*", "kernel"))
    if not vml or not mods:
        raise Unavailable("kernel cache %s has no vmlinuz or modules" % kdir)
    return vml[0], mods[0]


# ------------------------------------------------------------ static tools

def guest_tools():
    """Paths of the statically linked ipkit programs for the guest (built on demand
    in GUEST_BUILD from this source tree)."""
    if not os.path.exists(os.path.join(GUEST_BUILD, "build.ninja")):
        # A native file that hides pkg-config and cmake: libxdp/libbpf/DPDK are not
        # found, so nothing needs their static libraries; it is kept by meson, so a
        # regeneration (a meson.build changed) finds nothing either.
        os.makedirs(BUILD, exist_ok=True)
        native = os.path.join(BUILD, "guest-static.ini")
        with open(native, "w") as f:
            f.write("[binaries]\npkgconfig = 'false'\ncmake = 'false'\n")
        r = _run(["meson", "setup", GUEST_BUILD, ROOT, "--buildtype=release",
                  "--native-file", native, "-Ddefault_library=static",
                  "-Dc_link_args=-static"], 300)
        if r.returncode != 0:
            raise RuntimeError("guest-static setup failed:\n" + r.stdout[-1500:] + r.stderr[-1500:])
    r = _run(["nice", "-n", "10", "ninja", "-C", GUEST_BUILD] + GUEST_TOOLS, 1200)
    if r.returncode != 0:
        raise RuntimeError("guest-static build failed:\n" + r.stdout[-3000:])
    return [os.path.join(GUEST_BUILD, t) for t in GUEST_TOOLS]


# -------------------------------------------------------------- initramfs

INIT = r"""#!/bin/busybox sh
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
mount -t tmpfs tmp /tmp
mkdir -p /dev/hugepages && mount -t hugetlbfs none /dev/hugepages
for m in %(modules)s; do insmod /lib/modules/$m || echo "@@insmod $m failed"; done
ip link set lo up
stty -F /dev/ttyS1 raw -echo
exec 3<>/dev/ttyS1
echo "@@READY" >&3
while read -r id cmd <&3; do
	echo "$cmd" | base64 -d > /tmp/cmd.sh
	sh /tmp/cmd.sh > /tmp/out 2>&1 </dev/null
	rc=$?
	cat /tmp/out >&3
	echo "@@END $id $rc" >&3
done
poweroff -f
"""


def _cpio_newc(root, out):
    """Write the tree under root as a gzip'd newc cpio archive (the kernel's
    initramfs format), owned by root."""
    ino = [1]

    def entry(f, name, st, data):
        hdr = "070701" + "".join("%08x" % v for v in (
            ino[0], st.st_mode, 0, 0, 1, 0, len(data), 0, 0, 0, 0, len(name) + 1, 0))
        ino[0] += 1
        f.write(hdr.encode() + name.encode() + b"\0")
        f.write(b"\0" * ((4 - (110 + len(name) + 1) % 4) % 4))
        f.write(data)
        f.write(b"\0" * ((4 - len(data) % 4) % 4))

    with gzip.open(out, "wb", compresslevel=1) as f:
        for d, dirs, files in os.walk(root):
            dirs.sort()
            for n in sorted(dirs) + sorted(files):
                p = os.path.join(d, n)
                rel = os.path.relpath(p, root)
                st = os.lstat(p)
                if stat.S_ISLNK(st.st_mode):
                    data = os.readlink(p).encode()
                elif stat.S_ISREG(st.st_mode):
                    with open(p, "rb") as g:
                        data = g.read()
                else:
                    data = b""
                entry(f, rel, st, data)
        entry(f, "TRAILER!!!", os.stat(root), b"")


def initramfs(workdir, tools, moddir):
    root = os.path.join(workdir, "root")
    for d in ("bin", "proc", "sys", "dev", "tmp", "lib/modules"):
        os.makedirs(os.path.join(root, d), exist_ok=True)
    shutil.copy(BUSYBOX, os.path.join(root, "bin", "busybox"))
    for t in tools:
        shutil.copy(t, os.path.join(root, "bin", os.path.basename(t)))
    names = []
    for m in MODULES:
        shutil.copy(os.path.join(moddir, m), os.path.join(root, "lib", "modules"))
        names.append(os.path.basename(m))
    with open(os.path.join(root, "init"), "w") as f:
        f.write(INIT % {"modules": " ".join(names)})
    os.chmod(os.path.join(root, "init"), 0o755)
    out = os.path.join(workdir, "initrd.gz")
    _cpio_newc(root, out)
    shutil.rmtree(root)
    return out


# ------------------------------------------------------------------ guest

class Guest:
    """One booted guest. nics: list of dicts {tap, mode: 'legacy'|'modern', slot,
    mac, props}; the namespace ns must exist and hold the TAP devices."""

    def __init__(self, ns, nics, mem_mb=1024):
        self.ns, self.nics, self.mem = ns, nics, mem_mb
        self.work = tempfile.mkdtemp(prefix="ipk-pci-")
        self.proc = None
        self.sock = None
        self.buf = b""
        self.seq = 0

    def start(self):
        if not QEMU:
            raise Unavailable("qemu-system-x86_64 not found (Debian: qemu-system-x86)")
        if not os.path.exists(BUSYBOX):
            raise Unavailable("%s not found (Debian: busybox-static)" % BUSYBOX)
        vmlinuz, moddir = kernel()
        initrd = initramfs(self.work, guest_tools(), moddir)
        ctl = os.path.join(self.work, "ctl.sock")
        self.console = os.path.join(self.work, "console.log")
        args = ["ip", "netns", "exec", self.ns, QEMU, "-accel", "tcg", "-m", str(self.mem),
                "-smp", "1", "-nodefaults", "-display", "none", "-no-reboot",
                "-kernel", vmlinuz, "-initrd", initrd,
                "-append", "console=ttyS0 panic=-1 quiet loglevel=4",
                "-serial", "file:" + self.console,
                "-serial", "unix:%s,server=on,wait=off" % ctl]
        for i, n in enumerate(self.nics):
            mode = "disable-modern=on" if n["mode"] == "legacy" else "disable-legacy=on"
            args += ["-netdev", "tap,id=n%d,ifname=%s,script=no,downscript=no" % (i, n["tap"]),
                     "-device", "virtio-net-pci,netdev=n%d,addr=0x%x,mac=%s,%s%s" % (
                         i, n["slot"], n["mac"], mode,
                         "".join("," + p for p in n.get("props", [])))]
        self.qemu_log = open(os.path.join(self.work, "qemu.log"), "w")
        self.proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=self.qemu_log,
                                     stderr=subprocess.STDOUT)
        t0 = time.monotonic()
        while self.sock is None:
            if self.proc.poll() is not None:
                raise Unavailable("QEMU could not start: " + self._qemu_out()[-400:])
            if time.monotonic() - t0 > 60:
                raise RuntimeError("QEMU made no control socket in 60 s")
            try:
                s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                s.connect(ctl)
                self.sock = s
            except OSError:
                time.sleep(0.1)
        self._wait_for(b"@@READY\n", BOOT_BUDGET - (time.monotonic() - t0))
        self.boot_seconds = time.monotonic() - t0

    def _qemu_out(self):
        try:
            with open(os.path.join(self.work, "qemu.log")) as f:
                return f.read()
        except OSError:
            return ""

    def console_tail(self, n=3000):
        try:
            with open(self.console, errors="replace") as f:
                return f.read()[-n:]
        except (OSError, AttributeError):
            return ""

    def _wait_for(self, marker, timeout):
        """Read the control port until marker; return what came before it."""
        deadline = time.monotonic() + max(timeout, 1)
        while marker not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0 or (self.proc.poll() is not None):
                raise RuntimeError("guest: no %r within %.0f s (qemu %s)\nconsole:\n%s" % (
                    marker, timeout, self.proc.poll(), self.console_tail()))
            self.sock.settimeout(min(left, 1.0))
            try:
                d = self.sock.recv(65536)
            except socket.timeout:
                continue
            if not d:
                raise RuntimeError("guest control port closed\nconsole:\n" + self.console_tail())
            self.buf += d
        i = self.buf.index(marker)
        out, self.buf = self.buf[:i], self.buf[i + len(marker):]
        return out

    def run(self, cmd, timeout=120):
        """Run a shell command in the guest; (rc, output text)."""
        self.seq += 1
        line = "%d %s\n" % (self.seq, base64.b64encode(cmd.encode()).decode())
        self.sock.sendall(line.encode())
        out = self._wait_for(b"@@END %d " % self.seq, timeout)
        rc = self._wait_for(b"\n", 10)
        return int(rc), out.decode(errors="replace")

    def check(self, cmd, timeout=120):
        rc, out = self.run(cmd, timeout)
        if rc != 0:
            raise AssertionError("guest: %r exited %d:\n%s" % (cmd, rc, out[-2000:]))
        return out

    def stop(self):
        if self.sock is not None:
            try:
                self.sock.close()
            except OSError:
                pass
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        if getattr(self, "qemu_log", None):
            self.qemu_log.close()
        shutil.rmtree(self.work, ignore_errors=True)
