"""Isolated git for the action tests: no user config, no identity to fall back on."""

from __future__ import annotations

import pytest

from harness import isolate_git


@pytest.fixture(autouse=True)
def isolated_git_config(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(home))
    isolate_git(home, monkeypatch)
