"""Fixtures for driving the real Codex CLI against the scripted Responses API."""

from __future__ import annotations

import pytest

from harness import TOOLS_BIN, find_tool

CODEX_PIN = "@openai/codex@0.169.0"


@pytest.fixture(scope="session")
def codex_bin() -> str:
    """The real ``codex`` binary; the test fails (never skips) when it is missing."""
    found = find_tool("codex", "SCAFFOLD_CODEX_BIN")
    if found is None:
        pytest.fail(
            f"the codex CLI is required (looked at $SCAFFOLD_CODEX_BIN, {TOOLS_BIN} and PATH); "
            f"run ./scripts/install --test, or npm install --prefix .tools {CODEX_PIN}",
            pytrace=False,
        )
    return found
