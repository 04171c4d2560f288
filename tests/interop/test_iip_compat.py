"""Issue 20: programs on iip's documented API against Linux over TAP, in the interop
stage of `make test`. The tests live in tests/compat/test_iip_tap.py (the compat
layer's folder); this file only brings them into tests/interop's run."""
import importlib.util
import os

_spec = importlib.util.spec_from_file_location(
    "iip_tap_tests", os.path.join(os.path.dirname(__file__), "..", "compat", "test_iip_tap.py"))
_mod = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_mod)

tap = _mod.tap
tun = _mod.tun
test_iip_server_ping_curl_socat_nc_udp = _mod.test_iip_server_ping_curl_socat_nc_udp
test_iip_bulk_sender_to_linux = _mod.test_iip_bulk_sender_to_linux
test_iip_l2_tun_server_ping_curl_socat_nc_udp = _mod.test_iip_l2_tun_server_ping_curl_socat_nc_udp
test_iip_l2_tun_bulk_sender_to_linux = _mod.test_iip_l2_tun_bulk_sender_to_linux
