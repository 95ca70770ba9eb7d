"""The mixed-backend tests' fixtures: the real agent CLIs (a test fails, never skips,
without one), the three scripted model servers, and a project whose agents reach them."""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
from mixed_setup import ModelServers, model_servers

from claude.e2e_project import E2EProject
from harness import isolate_git, require_tool

# Variables of a developer's own setup that would take a CLI elsewhere.
FOREIGN = (
    "CODEX_HOME",
    "CLAUDE_CONFIG_DIR",
    "GOOGLE_API_KEY",
    "GOOGLE_GENAI_USE_VERTEXAI",
    "GEMINI_MODEL",
    "GEMINI_CLI_HOME",
)


@pytest.fixture(scope="session")
def claude_bin() -> str:
    return require_tool("claude", "SCAFFOLD_CLAUDE_BIN")


@pytest.fixture(scope="session")
def codex_bin() -> str:
    return require_tool("codex", "SCAFFOLD_CODEX_BIN")


@pytest.fixture(scope="session")
def gemini_bin() -> str:
    return require_tool("gemini", "SCAFFOLD_GEMINI_BIN")


@pytest.fixture
def servers() -> Iterator[ModelServers]:
    with model_servers() as found:
        yield found


@pytest.fixture
def project(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, servers: ModelServers
) -> Iterator[E2EProject]:
    """A project whose agents reach ``servers``, with a GitHub token planted in the
    environment (no agent may see it); no agent outlives the test."""
    proj = E2EProject(tmp_path)
    isolate_git(tmp_path, monkeypatch, also_unset=FOREIGN)
    for name, value in {**servers.env(proj.home), "GITHUB_TOKEN": "ghs_planted_github"}.items():
        monkeypatch.setenv(name, value)
    yield proj
    left = proj.live_agents()
    for pid in left:
        with contextlib.suppress(OSError):
            os.killpg(os.getpgid(pid), signal.SIGKILL)
    assert left == [], f"agent processes outlived the test: {left}"
