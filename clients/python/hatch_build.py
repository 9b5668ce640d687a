"""Puts the twin's two generated scripts into the package at build time.

In the repository, ``functions/redis_cell.lua`` and ``redis_cell_eval.lua``
(made by ``functions/build``) are copied into ``redis_cell/lua/``, where
``library_source`` reads them: the wheel, the sdist and an editable install
all get them, and none of them is committed twice. An sdist carries the
copies it was built with, so a wheel built from it alone uses those.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

from hatchling.builders.config import BuilderConfig
from hatchling.builders.hooks.plugin.interface import BuildHookInterface

SCRIPTS = ("redis_cell.lua", "redis_cell_eval.lua")
PACKAGE_LUA = Path("redis_cell", "lua")


class TwinScripts(BuildHookInterface[BuilderConfig]):
    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        root = Path(self.root)
        target = root / PACKAGE_LUA
        # An unpacked sdist has PKG-INFO; it never reads outside itself.
        if (root / "PKG-INFO").is_file():
            missing = [name for name in SCRIPTS if not (target / name).is_file()]
            if missing:
                raise RuntimeError(
                    f"this sdist of redis-cell lacks {', '.join(missing)} in {target}: "
                    "its build copies them from the repository's functions/"
                )
        else:
            functions = root.parent.parent / "functions"
            for name in SCRIPTS:
                source = functions / name
                if not source.is_file():
                    raise RuntimeError(
                        f"{source} is missing: redis-cell's package builds only inside its "
                        "repository (run functions/build) or from its sdist"
                    )
                copy(source, target / name)
        # Ignored by git (.gitignore), so hatchling's file selection would
        # leave them out: artifacts are built in all the same.
        build_data["artifacts"].extend((PACKAGE_LUA / name).as_posix() for name in SCRIPTS)


def copy(source: Path, target: Path) -> None:
    """Writes only what changed, and atomically: tests that read the package's
    copy may run while another process builds the package."""
    data = source.read_bytes()
    if target.is_file() and target.read_bytes() == data:
        return
    fd, temporary = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.chmod(temporary, 0o644)
        os.replace(temporary, target)
    except BaseException:
        os.unlink(temporary)
        raise
