"""scaffold installed in a virtualenv under the real ``/tmp`` (a fresh tmpfs inside the
sandbox), for the tests that check it runs from there."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import scaffold


@contextmanager
def real_tmp_dir(tmp_path: Path) -> Iterator[Path]:
    """``tmp_path`` when it is under ``/tmp`` already, else a fresh folder there."""
    if Path("/tmp") in tmp_path.resolve().parents:
        yield tmp_path.resolve()
        return
    path = Path(tempfile.mkdtemp(prefix="scaffold-anywhere-", dir="/tmp"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def make_venv(where: Path) -> Path:
    """A venv at ``where`` (its ``python`` a symlink to the base interpreter)."""
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(where)], check=True, timeout=120
    )
    return where


def site_packages(venv: Path) -> Path:
    return next((venv / "lib").glob("python3*/site-packages"))


def scaffold_venv(where: Path) -> Path:
    """A venv under ``where`` with a copy of scaffold in it: scaffold installed there.
    Its dependencies are this interpreter's site-packages, imported through links under
    ``where`` named by a ``.pth`` line: a folder under ``/tmp`` outside the venv."""
    venv = make_venv(where / "venv")
    site = site_packages(venv)
    shutil.copytree(
        Path(scaffold.__file__).parent,
        site / "scaffold",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    deps = [Path(p) for p in sys.path if p.endswith("site-packages") and Path(p).is_dir()]
    links = [where / f"deps-{n}" for n in range(len(deps))]
    for link, dep in zip(links, deps, strict=True):
        link.symlink_to(dep)
    (site / "scaffold-deps.pth").write_text("".join(f"{p}\n" for p in links), encoding="utf-8")
    return venv
