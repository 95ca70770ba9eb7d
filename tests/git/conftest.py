"""Fixtures for the git adapter tests: real repositories, isolated git config."""

from __future__ import annotations

from pathlib import Path

import pytest
from gitrepo import make_repo

from harness import isolate_git


@pytest.fixture(autouse=True)
def isolated_git_config(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(home))
    isolate_git(home, monkeypatch)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "repo")
