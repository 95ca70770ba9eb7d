"""Isolated git for the action tests: no user config, no identity to fall back on."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness import isolate_git


@pytest.fixture(autouse=True)
def isolated_git_config(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(home))
    isolate_git(home, monkeypatch)


@pytest.fixture(scope="session")
def act_action_cache() -> Iterator[Path]:
    """The folder act resolves every ``uses:`` from, built once per test process.

    act runs each job (its RUNNER_TEMP, so the action's virtualenv and the agent's
    worktree) under this folder, which is not under /tmp: the agent's sandbox gives it
    a fresh /tmp, where scaffold's own interpreter would not be found.
    """
    from actkit import ACT_RUNS, build_action_cache, require_prepared

    require_prepared()
    ACT_RUNS.mkdir(parents=True, exist_ok=True)
    folder = Path(tempfile.mkdtemp(prefix="actions-", dir=ACT_RUNS))
    try:
        yield build_action_cache(folder / "cache")
    finally:
        shutil.rmtree(folder, ignore_errors=True)
