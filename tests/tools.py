"""Where the tests find the real external tools they drive (installed by scripts/install)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
TOOLS_BIN = REPO / ".tools" / "node_modules" / ".bin"
PINNED = {"backlog": "backlog.md@1.52.0", "claude": "@anthropic-ai/claude-code@2.1.197"}


def find_tool(name: str, env_var: str) -> str | None:
    """``$env_var`` if set, else ``.tools/node_modules/.bin/<name>``, else ``<name>`` on PATH."""
    explicit = os.environ.get(env_var)
    if explicit:
        return explicit if os.access(explicit, os.X_OK) else None
    candidate = TOOLS_BIN / name
    if candidate.is_file() and os.access(candidate, os.X_OK):
        return str(candidate)
    return shutil.which(name)


def require_tool(name: str, env_var: str) -> str:
    """The tool's path; the test fails (never skips) when it is missing."""
    found = find_tool(name, env_var)
    if found is None:
        pytest.fail(
            f"the {name} CLI is required (looked at ${env_var}, {TOOLS_BIN} and PATH); "
            f"run ./scripts/install --test, or npm install --prefix .tools {PINNED[name]}",
            pytrace=False,
        )
    return found
