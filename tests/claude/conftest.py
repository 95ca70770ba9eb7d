"""Fixtures for driving the real Claude Code CLI against the scripted Messages API."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
FALLBACK_DIRS = (REPO / ".tools" / "node_modules" / ".bin", Path("/tmp/npmtools/node_modules/.bin"))


def find_claude() -> str | None:
    """``SCAFFOLD_CLAUDE_BIN``, then ``<repo>/.tools``, then /tmp/npmtools, then PATH."""
    explicit = os.environ.get("SCAFFOLD_CLAUDE_BIN")
    if explicit:
        return explicit if os.access(explicit, os.X_OK) else None
    for folder in FALLBACK_DIRS:
        candidate = folder / "claude"
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    return shutil.which("claude")


@pytest.fixture(scope="session")
def claude_bin() -> str:
    """The real ``claude`` binary; the test fails (never skips) when it is missing."""
    found = find_claude()
    if found is None:
        explicit = os.environ.get("SCAFFOLD_CLAUDE_BIN")
        where = (
            f"SCAFFOLD_CLAUDE_BIN={explicit!r} is not an executable file"
            if explicit
            else "not in SCAFFOLD_CLAUDE_BIN, " + ", ".join(map(str, FALLBACK_DIRS)) + " or PATH"
        )
        pytest.fail(
            f"the claude CLI is required ({where}); install it with "
            "`npm install --prefix .tools @anthropic-ai/claude-code@2.1.197`",
            pytrace=False,
        )
    return found
