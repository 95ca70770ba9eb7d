"""``scaffold action agent-clis``: which agent CLIs the Action installs for a slot or event."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from scaffold.cli.main import cli

CONFIG = """\
agent:
  roles:
    lawbringer: {backend: codex}
    siegemaster: {backend: gemini, command: [/opt/pinned/gemini]}
"""


def _clis(repo: Path, *args: str) -> list[str]:
    result = CliRunner().invoke(cli, ["action", "agent-clis", "--repo", str(repo), *args])
    assert result.exit_code == 0, result.output
    return result.output.split()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / ".github").mkdir()
    (tmp_path / ".github" / "scaffold.yml").write_text(CONFIG, encoding="utf-8")
    return tmp_path


def test_every_cli_the_config_runs_by_name_and_only_the_roles_own(repo: Path) -> None:
    # Gemini runs from a program the user pinned: nothing to install for it.
    assert _clis(repo) == ["claude", "codex"]
    assert _clis(repo, "--role", "lawbringer") == ["codex"]
    assert _clis(repo, "--role", "Codeweaver") == ["claude"]
    assert _clis(repo, "--role", "siegemaster") == []


def test_an_unknown_role_is_a_usage_error(repo: Path) -> None:
    result = CliRunner().invoke(cli, ["action", "agent-clis", "--repo", str(repo), "--role", "x"])
    assert result.exit_code == 2
    assert "unknown role 'x'" in result.output
