"""``scaffold diagram-check`` and ``scaffold diagrams generate`` through click's CliRunner."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner
from dcrepo import ARCH, DATA, STATES, Repo, mermaid_doc

from scaffold.cli.main import cli


def _run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.stdout, result.stderr


def test_exit_codes(repo: Repo) -> None:
    base = repo.head()
    repo.write("app/pkg/new.py", "")
    repo.commit("new")
    root = str(repo.root)
    code, out, _ = _run("diagram-check", "--repo", root, "--base", base)
    assert code == 1
    assert "module-added" in out
    code, out, _ = _run("diagram-check", "--repo", root, "--base", base, "--format", "json")
    assert code == 1
    assert json.loads(out)["blocking"] is True
    code, out, _ = _run("diagram-check", "--repo", root, "--base", base, "--format", "github")
    assert code == 1
    assert out.startswith("::error file=app/pkg/new.py,line=1,")

    repo.write(ARCH, mermaid_doc("flowchart LR\n  pkg.new"))
    repo.commit("diagram")
    code, out, _ = _run("diagram-check", "--repo", root, "--base", base, "--head", "HEAD")
    assert code == 0
    assert "DiagramCheck passed" in out

    code, _, err = _run("diagram-check", "--repo", root, "--base", "no-such-ref")
    assert code == 2
    assert "unknown revision 'no-such-ref'" in err
    code, _, err = _run("diagram-check", "--repo", root, "--base", "--upload-pack=x")
    assert code == 2
    code, _, _ = _run("diagram-check", "--repo", root)  # --base is required
    assert code == 2
    code, _, _ = _run("diagram-check", "--repo", root, "--base", base, "--format", "xml")
    assert code == 2


def test_bad_config_at_head_is_exit_2(repo: Repo) -> None:
    base = repo.head()
    repo.write(".github/scaffold.yml", "diagrams:\n  ignore: 5\n")
    repo.commit("bad config")
    code, _, err = _run("diagram-check", "--repo", str(repo.root), "--base", base)
    assert code == 2
    assert "diagrams.ignore" in err


def test_a_check_from_a_subfolder_is_the_check_at_the_top(repo: Repo) -> None:
    base = repo.head()
    repo.write("app/pkg/new.py", "")
    repo.commit("new")
    top = _run("diagram-check", "--repo", str(repo.root), "--base", base)
    below = _run("diagram-check", "--repo", str(repo.root / "app" / "pkg"), "--base", base)
    assert below == top
    assert top[0] == 1


def test_outside_a_repository_is_exit_2(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    for start, ref in ((plain, "HEAD~1"), (plain, "-bad"), (tmp_path / "missing", "HEAD")):
        code, _, err = _run("diagram-check", "--repo", str(start), "--base", ref)
        assert code == 2
        assert "not inside a git repository" in err


def test_subprocess_entry_point(repo: Repo) -> None:
    base = repo.head()
    repo.write("app/pkg/x.py", "")
    repo.commit("x")
    proc = subprocess.run(
        [sys.executable, "-m", "scaffold", "diagram-check", "--base", base, "--format", "json"],
        cwd=repo.root,
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 1, proc.stderr
    assert json.loads(proc.stdout)["findings"][0]["name"] == "pkg.x"


GEN_SOURCES = {
    "app/pkg/models.py": (
        "from dataclasses import dataclass\nfrom enum import Enum\n\nfrom pydantic import BaseModel\n\n\n"
        "class Color(Enum):\n    RED = 'red'\n    BLUE = 'blue'\n\n\n"
        "@dataclass\nclass User:\n    id: int\n    email: str | None\n    tags: list[str]\n\n\n"
        "class Order(BaseModel):\n    user: User\n    total: dict[str, float]\n"
    ),
    "app/pkg/flow.py": (
        "from enum import Enum\n\nfrom pkg.models import User\n\n\n"
        "class JobState(Enum):\n    QUEUED = 'queued'\n    RUNNING = 'in progress'\n    DONE = 'done'\n\n\n"
        "class Ev(Enum):\n    GO = 'go'\n    END = 'end'\n\n\n"
        "TABLE = {\n    (JobState.QUEUED, Ev.GO): JobState.RUNNING,\n"
        "    (JobState.RUNNING, Ev.END): JobState.DONE,\n}\n"
    ),
    "app/pkg/sub/__init__.py": "",
    "app/pkg/sub/tool.py": "from pkg import flow\n",
}


def test_generate_drafts_satisfy_the_check(repo: Repo) -> None:
    base = repo.head()
    for rel, text in GEN_SOURCES.items():
        repo.write(rel, text)
    repo.commit("code")
    root = str(repo.root)
    code, out, _ = _run("diagrams", "generate", "--repo", root)
    assert code == 0
    assert "classDiagram" in out
    assert "stateDiagram-v2" in out
    assert "flowchart LR" in out
    code, out, _ = _run("diagrams", "generate", "--repo", root, "--kind", "states")
    assert code == 0
    assert "queued --> in_progress : GO" in out
    assert "classDiagram" not in out

    assert _run("diagram-check", "--repo", root, "--base", base)[0] == 1
    prose = (repo.root / DATA).read_text(encoding="utf-8")
    code, out, _ = _run("diagrams", "generate", "--repo", root, "--write")
    assert code == 0
    assert "updated:" in out
    for path in (ARCH, DATA, STATES):
        assert "<!-- diagramcheck:" in (repo.root / path).read_text(encoding="utf-8")
    assert (repo.root / DATA).read_text(encoding="utf-8").startswith(prose.rstrip("\n"))
    repo.commit("diagrams")
    code, out, _ = _run("diagram-check", "--repo", root, "--base", base)
    assert code == 0, out
    # Writing again changes nothing; the generated block is replaced, not appended.
    assert _run("diagrams", "generate", "--repo", root, "--write")[1].strip() == (
        "diagrams already up to date"
    )
