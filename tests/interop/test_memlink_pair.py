"""Two ipkit processes over memlink (no kernel on the data path): 256 MiB each way."""
import os
import re
import secrets
import subprocess

import pytest

from conftest import backend_built, prog


@pytest.mark.skipif(not backend_built("memlink"), reason="memlink not built")
def test_memlink_echo_256M_each_way_sha256():
    name = "ipk" + secrets.token_hex(2) + "m"
    echo = subprocess.Popen([prog("ipkit-echo"), "--io", "memlink:%s,role=a" % name,
                             "--ip", "10.9.0.1/24"], stderr=subprocess.PIPE)
    try:
        r = subprocess.run([prog("ipkit-nc"), "--io", "memlink:%s,role=b" % name,
                            "--ip", "10.9.0.2/24", "--send-size", "256M", "--no-output",
                            "--sha256", "10.9.0.1", "7"], capture_output=True, timeout=120)
        err = r.stderr.decode()
        assert r.returncode == 0, err
        s = re.search(r"^sent (\d+) sha256 (\w+)$", err, re.M)
        g = re.search(r"^received (\d+) sha256 (\w+)$", err, re.M)
        assert s and g, err
        assert int(s.group(1)) == 256 << 20 and s.groups() == g.groups(), err
    finally:
        echo.terminate()
        try:
            echo.wait(timeout=5)
        except subprocess.TimeoutExpired:
            echo.kill()
            echo.wait(timeout=5)
        for suffix in ("", ".a.sock", ".b.sock"):
            try:
                os.unlink("/dev/shm/ipkit-ml-%s%s" % (name, suffix))
            except OSError:
                pass
