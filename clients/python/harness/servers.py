"""Servers for the harness and our tests, started by the test kit: one
``testkit serve`` child per process (see testkit/src/serve.rs), started on
first use, that owns the ports, the readiness, the cluster's forming, the
sentinels and TLS, and kills everything it started when this process ends
(its standard input closes). The objects here are views on its answers. A
request the kit cannot serve raises with its answer, which carries the
server's log."""

from __future__ import annotations

import atexit
import json
import os
import subprocess
import threading
from pathlib import Path
from typing import Any

import redis

REPO = Path(__file__).resolve().parents[3]


class KitError(RuntimeError):
    """The kit's ``{"error": ...}`` answer; ``unsupported`` names what the
    server binary lacks (``"tls"``), if that is why."""

    def __init__(self, request: str, answer: dict[str, Any]):
        super().__init__(f"testkit serve: {request}: {answer['error']}")
        self.unsupported: str | None = answer.get("unsupported")


class _Kit:
    def __init__(self) -> None:
        binary = Path(os.environ.get("TESTKIT") or REPO / "target/debug/testkit")
        if not binary.is_file():
            raise RuntimeError(f"the test kit is not built: {binary} (cargo build -p testkit)")
        self.process = subprocess.Popen(
            [str(binary), "serve"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        self.lock = threading.Lock()

    def request(self, *words: str) -> dict[str, Any]:
        """One request (words the kit splits on spaces), answered."""
        for word in words:
            if not word or word.split() != [word]:
                raise ValueError(f"a request word the kit cannot read: {word!r}")
        line = " ".join(words)
        assert self.process.stdin is not None and self.process.stdout is not None
        with self.lock:
            try:
                self.process.stdin.write(line + "\n")
                self.process.stdin.flush()
            except BrokenPipeError as error:
                raise self.ended(line) from error
            reply = self.process.stdout.readline()
        if not reply:
            raise self.ended(line)
        answer: dict[str, Any] = json.loads(reply)
        if "error" in answer:
            raise KitError(line, answer)
        return answer

    def ended(self, line: str) -> RuntimeError:
        return RuntimeError(f"testkit serve ended (status {self.process.wait(5)}) before: {line}")

    def close(self) -> None:
        assert self.process.stdin is not None
        try:
            self.process.stdin.close()
        except BrokenPipeError:
            pass  # it ended already (a request found it so): its status says how
        status = self.process.wait(60)
        if status != 0:
            # Killed (a signal), it could not stop what it started.
            raise RuntimeError(
                f"testkit serve ended with status {status}, not by its input closing"
            )


_kit: _Kit | None = None


def _request(*words: str) -> dict[str, Any]:
    global _kit
    if _kit is None:
        _kit = _Kit()
        atexit.register(close)
    return _kit.request(*words)


def close() -> None:
    """Stops everything this process started (the kit exits with it)."""
    global _kit
    if _kit is not None:
        kit, _kit = _kit, None
        kit.close()


def _optional_path(value: Any) -> Path | None:
    return None if value is None else Path(value)


class Server:
    """A server the kit started: ``port``, its directory ``dir`` and ``log``,
    ``socket`` (when asked for), ``tls_port`` and ``tls_cert`` (the
    certificate, also its CA; when asked for), and a ``client``."""

    def __init__(self, answer: dict[str, Any]):
        self._read(answer)
        self.client = redis.Redis("127.0.0.1", self.port)
        self.stopped = False

    def _read(self, answer: dict[str, Any]) -> None:
        self.id = int(answer["id"])
        self.port = int(answer["port"])
        self.dir = Path(answer["dir"])
        self.log = Path(answer["log"])
        self.socket = _optional_path(answer["socket"])
        self.tls_port: int | None = answer["tls_port"]
        self.tls_cert = _optional_path(answer["tls_cert"])

    def restart(self) -> None:
        """Killed and started again on the same port and directory (as a
        crash and a restart: without persistence, nothing is kept)."""
        self._read(_request("restart", str(self.id)))

    def stop(self) -> None:
        if not self.stopped:
            self.stopped = True
            _request("stop", str(self.id))


class Sentinel:
    """A sentinel the kit started, watching a server as a service."""

    def __init__(self, answer: dict[str, Any]):
        self.id = int(answer["id"])
        self.port = int(answer["port"])
        self.client = redis.Redis("127.0.0.1", self.port)


def _options(binary: str, module: str | None) -> list[str]:
    return ["--server", binary, *(["--module", module] if module else ["--no-module"])]


def start(binary: str, count: int, module: str | None, unixsocket: bool = False) -> list[Server]:
    """``count`` servers, with ``module`` loaded or none, answering (and
    also on a unix socket if asked)."""
    words = ["server", *_options(binary, module), *(["--unixsocket"] if unixsocket else [])]
    return [Server(_request(*words)) for _ in range(count)]


def start_cluster(binary: str, masters: int, module: str | None) -> list[Server]:
    """A cluster of ``masters`` masters, the slots split between them in
    order, formed: its nodes."""
    answer = _request("cluster", str(masters), *_options(binary, module))
    return [Server(node) for node in answer["nodes"]]


def start_sentinel(master: Server, service: str) -> Sentinel:
    """A sentinel watching ``master`` as ``service`` (quorum 1), ready once
    it knows the master's address."""
    return Sentinel(_request("sentinel", str(master.id), service))


def start_tls(binary: str, module: str) -> Server | None:
    """A server with the module that also answers TLS (on ``tls_port``,
    certificate ``tls_cert``); ``None`` if the binary was built without TLS."""
    try:
        return Server(_request("server", "--tls", *_options(binary, module)))
    except KitError as error:
        if error.unsupported == "tls":
            return None
        raise


def has_functions(server: Server) -> bool:
    try:
        server.client.execute_command("FUNCTION LIST")  # type: ignore[no-untyped-call]
        return True
    except redis.ResponseError:
        return False
