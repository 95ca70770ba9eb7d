"""Fixtures for driving the real Claude Code CLI against the scripted Messages API."""

from __future__ import annotations

import pytest

from harness import find_tool, require_tool


def find_claude() -> str | None:
    return find_tool("claude", "SCAFFOLD_CLAUDE_BIN")


@pytest.fixture(scope="session")
def claude_bin() -> str:
    """The real ``claude`` binary; the test fails (never skips) when it is missing."""
    return require_tool("claude", "SCAFFOLD_CLAUDE_BIN")
