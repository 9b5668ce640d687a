"""The harness's loopback guard refuses what limits' host_ip_env would do."""

from __future__ import annotations

import importlib.util
import socket
from pathlib import Path

import pytest


def test_guard_refuses_non_loopback_and_records_it() -> None:
    path = Path(__file__).resolve().parents[1] / "harness" / "loopback_guard.py"
    spec = importlib.util.spec_from_file_location("loopback_guard_under_test", path)
    assert spec is not None and spec.loader is not None
    guard = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(guard)
    saved = socket.socket.connect, socket.socket.connect_ex, socket.socket.sendto
    guard.install()
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            with pytest.raises(OSError, match="non-loopback"):
                s.connect(("10.255.255.255", 1))
            s.connect(("127.0.0.1", 9))  # loopback stays allowed
        assert guard.violations == [
            "non-loopback address refused by the harness: ('10.255.255.255', 1)"
        ]
    finally:
        socket.socket.connect, socket.socket.connect_ex, socket.socket.sendto = saved
