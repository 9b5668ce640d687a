"""The built package carries the twin's scripts of functions/, byte for byte:
the wheel, the sdist, and a wheel built from the sdist alone."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

SCRIPTS = ("redis_cell.lua", "redis_cell_eval.lua")


def build_wheel(source: Path, out: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            *(sys.executable, "-m", "pip", "wheel", "--quiet", "--disable-pip-version-check"),
            *("--no-deps", "--no-build-isolation", "--wheel-dir", str(out), str(source)),
        ],
        capture_output=True,
        text=True,
        check=False,
    )


def wheel_of(source: Path, out: Path) -> zipfile.ZipFile:
    done = build_wheel(source, out)
    assert done.returncode == 0, done.stdout + done.stderr
    (wheel,) = out.glob("redis_cell-*.whl")
    return zipfile.ZipFile(wheel)


def unpacked_sdist(repo: Path, tmp: Path) -> Path:
    """The sdist, built from the repository and unpacked in ``tmp``."""
    out = tmp / "sdist"
    # hatchling's PEP 517 hook, called as a frontend does (in the project).
    hook = "import sys, hatchling.build as b; b.build_sdist(sys.argv[1])"
    done = subprocess.run(
        [sys.executable, "-c", hook, str(out)],
        cwd=repo / "clients" / "python",
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    (sdist,) = out.glob("redis_cell-*.tar.gz")
    with tarfile.open(sdist) as tar:
        tar.extractall(tmp / "unpacked", filter="data")
    (root,) = (tmp / "unpacked").iterdir()
    assert repo not in root.parents, root
    assert not (root.parent.parent / "functions").exists(), root
    return root


def test_the_wheel_carries_the_twin(repo: Path, tmp_path: Path) -> None:
    with wheel_of(repo / "clients" / "python", tmp_path) as wheel:
        for name in SCRIPTS:
            assert wheel.read(f"redis_cell/lua/{name}") == (repo / "functions" / name).read_bytes()
        # The package's own script, beside them.
        own = repo / "clients" / "python" / "redis_cell" / "lua" / "limits_sliding_window.lua"
        assert wheel.read("redis_cell/lua/limits_sliding_window.lua") == own.read_bytes()


def test_a_wheel_from_the_sdist_alone_carries_the_twin(repo: Path, tmp_path: Path) -> None:
    root = unpacked_sdist(repo, tmp_path)
    for name in SCRIPTS:
        carried = root / "redis_cell" / "lua" / name
        assert carried.read_bytes() == (repo / "functions" / name).read_bytes(), name
    with wheel_of(root, tmp_path / "wheel") as wheel:
        for name in SCRIPTS:
            assert wheel.read(f"redis_cell/lua/{name}") == (repo / "functions" / name).read_bytes()


def test_an_sdist_without_its_copies_does_not_build(repo: Path, tmp_path: Path) -> None:
    root = unpacked_sdist(repo, tmp_path)
    (root / "redis_cell" / "lua" / "redis_cell_eval.lua").unlink()
    done = build_wheel(root, tmp_path / "wheel")
    assert done.returncode != 0
    assert "this sdist of redis-cell lacks redis_cell_eval.lua" in done.stdout + done.stderr


def test_a_copy_of_the_folder_outside_the_repository_does_not_build(
    repo: Path, tmp_path: Path
) -> None:
    root = tmp_path / "a" / "python"
    shutil.copytree(
        repo / "clients" / "python" / "redis_cell",
        root / "redis_cell",
        ignore=shutil.ignore_patterns("__pycache__", *SCRIPTS),
    )
    for name in ("pyproject.toml", "hatch_build.py", "README.md"):
        shutil.copy(repo / "clients" / "python" / name, root / name)
    done = build_wheel(root, tmp_path / "wheel")
    assert done.returncode != 0
    missing = tmp_path / "functions" / "redis_cell.lua"
    assert f"{missing} is missing" in done.stdout + done.stderr
