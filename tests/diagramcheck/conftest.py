"""Real git repositories for the DiagramCheck tests, with an isolated git config."""

from __future__ import annotations

from pathlib import Path

import pytest
from dcrepo import Repo

from harness import isolate_git


@pytest.fixture(autouse=True)
def isolated_git_config(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(home))
    isolate_git(home, monkeypatch)


@pytest.fixture
def repo(tmp_path: Path) -> Repo:
    return Repo.create(tmp_path / "repo")


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """The corpus test's precision and crash count, in every CI log."""
    import corpus

    for line in corpus.SUMMARY:
        terminalreporter.write_line(line)
