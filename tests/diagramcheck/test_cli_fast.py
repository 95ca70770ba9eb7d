"""``scaffold diagram-check`` without click: a plain command line is read by hand
and run at once; help and usage errors still come from click, as before."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from dcrepo import ARCH, Repo, mermaid_doc, modules_loaded

from scaffold.cli.entry import plain_diagram_check_args
from scaffold.cli.main import cli


def _scaffold(repo: Repo, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "scaffold", "diagram-check", *args],
        cwd=repo.root,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )


def test_plain_command_lines_are_read_here() -> None:
    assert plain_diagram_check_args(["--base", "main"]) == {
        "repo_path": None,
        "base": "main",
        "head": "HEAD",
        "fmt": "text",
    }
    assert plain_diagram_check_args(
        ["--format=json", "--head", "h", "--base=b", "--repo", ".", "--base", "b2"]
    ) == {"repo_path": ".", "base": "b2", "head": "h", "fmt": "json"}


@pytest.mark.parametrize(
    "argv",
    [
        [],  # --base is required
        ["--help"],
        ["-h"],
        ["--base", "b", "--format", "xml"],
        ["--base", "b", "--bogus"],
        ["--base", "b", "extra"],
        ["--bas", "b"],  # click knows no abbreviations
        ["--base"],
        ["--base", "--upload-pack=x"],
    ],
)
def test_anything_else_goes_to_click(argv: list[str]) -> None:
    assert plain_diagram_check_args(argv) is None


def test_a_repo_that_is_a_file_goes_to_click(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("x", encoding="utf-8")
    assert plain_diagram_check_args(["--base", "b", "--repo", str(tmp_path / "f")]) is None
    assert plain_diagram_check_args(["--base", "b", "--repo", str(tmp_path)]) is not None
    assert plain_diagram_check_args(["--base", "b", "--repo", str(tmp_path / "nope")]) is not None


def test_same_exit_codes_and_output_as_the_click_command(repo: Repo) -> None:
    base = repo.head()
    repo.write("app/pkg/new.py", "")
    repo.commit("new")
    root = str(repo.root)
    runner = CliRunner()
    cases = [
        ["--base", base],
        ["--base", base, "--format", "json"],
        ["--base", base, "--format", "github"],
        ["--base", base, "--format", "markdown", "--repo", root],
        ["--base", "no-such-ref"],
        ["--base=--upload-pack=x"],
        ["--base", base, "--head", "no-such-ref"],
    ]
    for argv in cases:
        proc = _scaffold(repo, *argv)
        clicked = runner.invoke(cli, ["diagram-check", *argv, "--repo", root])
        assert proc.returncode == clicked.exit_code, (argv, proc.stderr)
        assert proc.stdout == clicked.stdout, argv
        if proc.returncode == 2:
            assert proc.stderr.startswith("scaffold: "), argv
            assert proc.stderr.strip() == clicked.stderr.strip(), argv
    repo.write(ARCH, mermaid_doc("flowchart LR\n  pkg.new"))
    repo.commit("diagram")
    proc = _scaffold(repo, "--base", base, "--format", "json")
    assert proc.returncode == 0
    assert json.loads(proc.stdout)["blocking"] is False


@pytest.mark.parametrize(
    ("argv", "code", "text"),
    [
        ([], 2, "Missing option '--base'"),
        (["--base", "b", "--format", "xml"], 2, "Invalid value for '--format'"),
        (["--base", "b", "--bogus"], 2, "No such option '--bogus'"),
        (["--help"], 0, "Exit 1 when a change leaves the diagrams behind the code."),
    ],
)
def test_usage_errors_and_help_are_clicks(
    repo: Repo, argv: list[str], code: int, text: str
) -> None:
    proc = _scaffold(repo, *argv)
    assert proc.returncode == code
    assert text in proc.stdout + proc.stderr
    assert "scaffold diagram-check" in proc.stdout + proc.stderr


def _modules(repo: Repo, *args: str) -> set[str]:
    return modules_loaded(repo.root, *args)


def test_a_plain_check_loads_no_click_and_a_repeated_one_no_parser(repo: Repo) -> None:
    repo.write("app/pkg/mod.py", "from dataclasses import dataclass\n")
    repo.commit("module")
    first = _modules(repo, "diagram-check", "--base", "HEAD~1")
    assert "click" not in first
    assert "ruamel" not in first  # no .github/scaffold.yml
    assert "scaffold.diagramcheck.rules" in first
    again = _modules(repo, "diagram-check", "--base", "HEAD~1")  # answered from the cache
    assert "click" not in again
    assert not again & {
        "scaffold.diagramcheck.rules",
        "scaffold.diagramcheck.python_model",
        "scaffold.diagramcheck.mermaid",
    }
    assert "click" in _modules(repo, "diagram-check", "--help")
