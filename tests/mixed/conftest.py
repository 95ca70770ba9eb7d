"""The real agent CLIs of the mixed-backend tests; a test fails (never skips) without one."""

from __future__ import annotations

import pytest

from harness import require_tool


@pytest.fixture(scope="session")
def claude_bin() -> str:
    return require_tool("claude", "SCAFFOLD_CLAUDE_BIN")


@pytest.fixture(scope="session")
def codex_bin() -> str:
    return require_tool("codex", "SCAFFOLD_CODEX_BIN")


@pytest.fixture(scope="session")
def gemini_bin() -> str:
    return require_tool("gemini", "SCAFFOLD_GEMINI_BIN")
