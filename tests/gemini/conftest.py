"""Fixtures for driving the real Gemini CLI against the scripted Gemini API."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from harness import TOOLS_BIN, find_tool

# The throwaway repository of the Claude end-to-end tests (e2e_project) serves these too.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "claude"))

PINNED = "@google/gemini-cli@0.61.0"


@pytest.fixture(scope="session")
def gemini_bin() -> str:
    """The real ``gemini`` binary; the test fails (never skips) when it is missing."""
    found = find_tool("gemini", "SCAFFOLD_GEMINI_BIN")
    if found is None:
        pytest.fail(
            f"the gemini CLI is required (looked at $SCAFFOLD_GEMINI_BIN, {TOOLS_BIN} and "
            f"PATH); run ./scripts/install --test, or npm install --prefix .tools {PINNED}",
            pytrace=False,
        )
    return found
