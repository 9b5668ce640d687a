"""The test kit's servers for the benchmarks and the release check.

Every server of a benchmark is started by one `testkit serve` child of the
process (testkit/src/serve.rs): a request a line on its standard input, one
JSON answer a line on its standard output. When this process exits, the
kit's standard input closes and the kit kills every server it started.

The kit is `$TESTKIT`, or target/debug/testkit (cargo build -p testkit).
"""

from __future__ import annotations

import atexit
import json
import os
import subprocess
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


class KitError(RuntimeError):
    """A request the kit refused or could not serve (its answer's error,
    with the server's log)."""


class Kit:
    """One `testkit serve` child."""

    def __init__(self) -> None:
        binary = Path(os.environ.get("TESTKIT") or ROOT / "target" / "debug" / "testkit")
        if not binary.is_file():
            raise SystemExit(f"the test kit is missing at {binary}: run `cargo build -p testkit`")
        self.proc = subprocess.Popen([str(binary), "serve"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     text=True)

    def request(self, *words: object) -> dict[str, Any]:
        """Sends one request; its answer, or KitError."""
        texts = [str(w) for w in words]
        for t in texts:
            if not t or any(c.isspace() for c in t):
                raise ValueError(f"the kit's requests are words without spaces: {t!r}")
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(" ".join(texts) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise KitError(f"testkit serve exited (status {self.proc.wait()}) before answering {texts}")
        answer: dict[str, Any] = json.loads(line)
        if "error" in answer:
            raise KitError(f"{' '.join(texts)}: {answer['error']}")
        return answer

    def close(self) -> None:
        """Closes the kit's input: it stops everything it started."""
        if self.proc.stdin and not self.proc.stdin.closed:
            self.proc.stdin.close()
        self.proc.wait()


_KIT: Kit | None = None


def kit() -> Kit:
    """This process's one kit, started on first use."""
    global _KIT
    if _KIT is None:
        _KIT = Kit()
        atexit.register(_KIT.close)
    return _KIT


def start(modules: Sequence[Path | str], server: Path | str | None = None,
          config: Iterable[tuple[str, object]] = (), wrap: Sequence[str] = ()) -> dict[str, Any]:
    """A server with these modules loaded (none if empty): the kit's answer
    (`id`, `port`, `pid`, `dir`, `log`)."""
    words: list[object] = ["server"]
    # Absolute: the server changes to its own directory before it loads them.
    words += [w for m in modules for w in ("--module", Path(m).resolve())] or ["--no-module"]
    if server is not None:
        words += ["--server", server]
    for name, value in config:
        words += ["--config", name, value]
    words += [w for word in wrap for w in ("--wrap", word)]
    return kit().request(*words)


def stop(answer: dict[str, Any]) -> None:
    """Kills a server that `start` answered (its directory is removed)."""
    kit().request("stop", answer["id"])


def version(info: dict[str, Any]) -> tuple[str, str]:
    """The server's name and version from its INFO: ("Valkey", "8.1.8") or
    ("Redis", "7.0.15"), as `--version` names them (Valkey also reports the
    Redis version it is compatible with)."""
    if "valkey_version" in info:
        return "Valkey", str(info["valkey_version"])
    return "Redis", str(info["redis_version"])
