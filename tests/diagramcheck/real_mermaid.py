"""The real Mermaid parser (``.tools/mermaid-parse.mjs`` on the pinned npm package)."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass

import pytest

from harness import REPO

SCRIPT = REPO / ".tools" / "mermaid-parse.mjs"
PACKAGE = REPO / ".tools" / "node_modules" / "mermaid" / "package.json"


@dataclass(frozen=True)
class Verdict:
    ok: bool
    detail: str  # the diagram type, or Mermaid's error


def parse(sources: Sequence[str]) -> list[Verdict]:
    """Mermaid's verdict on each source; the test fails (never skips) without the tools."""
    node = shutil.which("node")
    if node is None or not PACKAGE.is_file():
        pytest.fail(
            "the real Mermaid parser needs node and .tools/node_modules/mermaid: "
            "run ./scripts/install --test",
            pytrace=False,
        )
    proc = subprocess.run(
        [node, str(SCRIPT)],
        input=json.dumps(list(sources)),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=SCRIPT.parent,
    )
    if proc.returncode != 0:
        raise AssertionError(f"mermaid-parse.mjs failed ({proc.returncode}): {proc.stderr}")
    out = json.loads(proc.stdout)
    return [Verdict(bool(r["ok"]), str(r.get("type") or r.get("error") or "")) for r in out]


def version() -> str:
    return str(json.loads(PACKAGE.read_text(encoding="utf-8"))["version"])
