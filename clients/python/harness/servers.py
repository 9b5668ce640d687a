"""Servers the harness starts on loopback ports: one with the module, one
without it (for the twin), three masters of a cluster with the module,
sentinels, and a server with the module on TLS where the binary has TLS. A
server that does not answer fails the run with its log."""

from __future__ import annotations

import random
import shutil
import socket
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import redis


class _Process:
    """A server process the harness started: ``wait`` until it is ready
    (``ready``), ``stop`` it."""

    port: int
    process: subprocess.Popen[bytes]
    log: Path
    client: redis.Redis
    what = "server"

    def ready(self) -> bool:
        raise NotImplementedError

    def wait(self) -> None:
        deadline = time.monotonic() + 15
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(f"{self.what} on {self.port} exited:\n{self.log.read_text()}")
            try:
                if self.ready():
                    return
            except redis.ConnectionError:
                pass
            if time.monotonic() > deadline:
                log = self.log.read_text()
                raise RuntimeError(f"{self.what} on {self.port} does not answer:\n{log}")
            time.sleep(0.05)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(5)
            except subprocess.TimeoutExpired:
                self.process.kill()


P = TypeVar("P", bound=_Process)


class Server(_Process):
    def __init__(
        self,
        binary: str,
        port: int,
        root: Path,
        module: str | None,
        cluster: bool,
        extra: list[str] | None = None,
    ):
        self.port = port
        # Set by start_tls: the TLS port and the certificate that signs it.
        self.tls_port: int | None = None
        self.tls_cert: Path | None = None
        self.dir = root / str(port)
        shutil.rmtree(self.dir, ignore_errors=True)
        self.dir.mkdir(parents=True)
        args = [
            binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
            "--appendonly", "no", "--dir", str(self.dir), "--daemonize", "no",
        ]  # fmt: skip
        # Also on a unix socket, for the rediscell+unix:// storages.
        self.socket = self.dir / "redis.sock"
        args += ["--unixsocket", str(self.socket), "--unixsocketperm", "700"]
        if module:
            args += ["--loadmodule", module]
        if cluster:
            args += ["--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf"]
        args += extra or []
        self.log = self.dir / "server.log"
        with open(self.log, "wb") as log:
            self.process = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
        self.client = redis.Redis("127.0.0.1", port)

    def ready(self) -> bool:
        return bool(self.client.ping())


def _free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


def free_ports(count: int, cluster: bool = False) -> list[int]:
    """``count`` consecutive loopback ports that are free now (and, for a
    cluster, their bus ports, port + 10000), from a random start: the
    machine is shared, so fixed ports may be taken."""
    while True:
        start = random.randrange(20000, 29000)
        ports = list(range(start, start + count))
        wanted = ports + [p + 10000 for p in ports] if cluster else ports
        if all(_free(p) for p in wanted):
            return ports


def _start_retrying(make: Callable[[], list[P]]) -> list[P]:
    """Processes from ``make`` (on ports it picks), started and answering;
    made again on other ports if one was taken in between (up to five
    times)."""
    for attempt in range(5):
        started = make()
        try:
            for p in started:
                p.wait()
            return started
        except RuntimeError:
            for p in started:
                p.stop()
            if attempt == 4 or not any(
                "Address already in use" in p.log.read_text(errors="replace") for p in started
            ):
                raise
    raise AssertionError("unreachable")


def start(binary: str, count: int, root: Path, module: str | None, cluster: bool) -> list[Server]:
    """``count`` servers on free ports, started and answering."""
    return _start_retrying(
        lambda: [Server(binary, p, root, module, cluster) for p in free_ports(count, cluster)]
    )


def form_cluster(nodes: list[Server]) -> None:
    """Three masters, the slots split in three, met on loopback."""
    per = 16384 // len(nodes)
    for i, node in enumerate(nodes):
        last = 16383 if i == len(nodes) - 1 else (i + 1) * per - 1
        node.client.execute_command("CLUSTER ADDSLOTS", *range(i * per, last + 1))
    for node in nodes[1:]:
        node.client.execute_command("CLUSTER MEET", "127.0.0.1", nodes[0].port)
    deadline = time.monotonic() + 30
    while True:
        infos: list[Any] = [n.client.execute_command("CLUSTER INFO") for n in nodes]
        text = [_info(i) for i in infos]
        if all(
            t.get("cluster_state") == "ok" and t.get("cluster_known_nodes") == str(len(nodes))
            for t in text
        ):
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"cluster on {[n.port for n in nodes]} did not form: {text}")
        time.sleep(0.1)


def _info(reply: Any) -> dict[str, str]:
    if isinstance(reply, dict):
        return {str(k): str(v) for k, v in reply.items()}
    text = reply.decode() if isinstance(reply, bytes) else str(reply)
    return dict(line.split(":", 1) for line in text.splitlines() if ":" in line)


def has_functions(server: Server) -> bool:
    try:
        server.client.execute_command("FUNCTION LIST")
        return True
    except redis.ResponseError:
        return False


class Sentinel(_Process):
    """A sentinel on loopback watching ``master`` as ``service`` (quorum 1),
    ready once it knows the master's address."""

    what = "sentinel"

    def __init__(self, binary: str, port: int, root: Path, master: Server, service: str):
        self.port = port
        self.dir = root / f"sentinel-{port}"
        shutil.rmtree(self.dir, ignore_errors=True)
        self.dir.mkdir(parents=True)
        config = self.dir / "sentinel.conf"
        config.write_text(
            f"port {port}\nbind 127.0.0.1\ndir {self.dir}\n"
            f"sentinel monitor {service} 127.0.0.1 {master.port} 1\n"
        )
        self.log = self.dir / "sentinel.log"
        with open(self.log, "wb") as log:
            self.process = subprocess.Popen(
                [binary, str(config), "--sentinel"], stdout=log, stderr=subprocess.STDOUT
            )
        self.client = redis.Redis("127.0.0.1", port)
        self.service = service

    def ready(self) -> bool:
        return bool(self.client.execute_command("SENTINEL GET-MASTER-ADDR-BY-NAME", self.service))


def start_sentinel(binary: str, root: Path, master: Server, service: str) -> Sentinel:
    """A sentinel for ``master`` as ``service`` on a free port."""
    return _start_retrying(lambda: [Sentinel(binary, free_ports(1)[0], root, master, service)])[0]


def tls_files(root: Path) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 and its key, made once by
    openssl under ``root``."""
    folder = root / "tls"
    cert, key = folder / "server.crt", folder / "server.key"
    if not cert.exists():
        folder.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
             "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
             "-keyout", str(key), "-out", str(cert)],
            check=True, capture_output=True,
        )  # fmt: skip
    return cert, key


def start_tls(binary: str, root: Path, module: str) -> Server | None:
    """A server with the module that also answers TLS (on ``tls_port``,
    certificate ``tls_cert``); ``None`` if the binary was built without TLS."""
    cert, key = tls_files(root)

    def make() -> list[Server]:
        port, tls_port = free_ports(2)
        tls = [
            "--tls-port", str(tls_port), "--tls-cert-file", str(cert), "--tls-key-file", str(key),
            "--tls-ca-cert-file", str(cert), "--tls-auth-clients", "no",
        ]  # fmt: skip
        server = Server(binary, port, root, module, cluster=False, extra=tls)
        server.tls_port, server.tls_cert = tls_port, cert
        return [server]

    try:
        return _start_retrying(make)[0]
    except RuntimeError as error:
        # The error carries the server's log.
        text = str(error)
        if "Failed finding TLS support" in text or (
            "FATAL CONFIG FILE ERROR" in text and "tls-port" in text
        ):
            return None
        raise
