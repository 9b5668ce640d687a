"""Fails the run if anything connects to (or sends to) a non-loopback address.

Installed at interpreter level by the harness plugins: every ``connect``,
``connect_ex`` and ``sendto`` of a Python socket is checked before it
happens; a refused address raises ``OSError`` at the call and is recorded,
and the plugins fail the session when any was recorded.
"""

from __future__ import annotations

import ipaddress
import socket
from typing import Any

violations: list[str] = []

_connect = socket.socket.connect
_connect_ex = socket.socket.connect_ex
_sendto = socket.socket.sendto
_getaddrinfo = socket.getaddrinfo


def _loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host.split("%", 1)[0]).is_loopback
    except ValueError:
        pass
    try:
        infos = _getaddrinfo(host, None)
    except OSError:
        return True  # nothing to connect to: the connect itself fails
    return all(ipaddress.ip_address(str(info[4][0]).split("%", 1)[0]).is_loopback for info in infos)


def _check(sock: socket.socket, address: Any) -> None:
    if sock.family not in (socket.AF_INET, socket.AF_INET6):
        return
    host = address[0] if isinstance(address, tuple) else str(address)
    if not _loopback(str(host)):
        message = f"non-loopback address refused by the harness: {address!r}"
        violations.append(message)
        raise OSError(message)


def _guarded_connect(self: socket.socket, address: Any) -> None:
    _check(self, address)
    _connect(self, address)


def _guarded_connect_ex(self: socket.socket, address: Any) -> int:
    _check(self, address)
    return _connect_ex(self, address)


def _guarded_sendto(self: socket.socket, data: Any, *args: Any) -> int:
    _check(self, args[-1])
    return _sendto(self, data, *args)


def install() -> None:
    socket.socket.connect = _guarded_connect  # type: ignore[method-assign,assignment]
    socket.socket.connect_ex = _guarded_connect_ex  # type: ignore[method-assign,assignment]
    socket.socket.sendto = _guarded_sendto  # type: ignore[method-assign,assignment]
