"""The same ``scaffold diagram-check`` again prints what the first one printed, from the
stored outputs; anything that could change the output misses; a damaged store is ignored."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from dcrepo import ARCH, DATA, Repo, mermaid_doc, modules_loaded

from scaffold.cli.entry import run_diagram_check
from scaffold.diagramcheck import output_cache
from scaffold.diagramcheck.revisions import Resolved, resolve_quick

FORMATS = ("text", "json", "github", "markdown")


def _blocking_change(repo: Repo) -> str:
    base = repo.head()
    repo.write(
        "app/pkg/model.py",
        "from dataclasses import dataclass\n\n\n@dataclass\nclass M:\n    x: int\n",
    )
    repo.commit("model")
    return base


def _check(
    repo: Repo, capsys: pytest.CaptureFixture[str], base: str, fmt: str = "text", head: str = "HEAD"
) -> tuple[int, str]:
    code = run_diagram_check(str(repo.root), base, head, fmt)
    return code, capsys.readouterr().out


def _stored(repo: Repo, base: str, fmt: str, head: str = "HEAD") -> Path:
    found = resolve_quick(str(repo.root), base, head)
    assert found is not None
    return Path(output_cache.directory(found.git_dir)) / output_cache.key(found, fmt)


def _analyses(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Counts the checks that ran the analyzer (a stored output runs none)."""
    from scaffold.diagramcheck import analyzer

    ran: list[str] = []
    real = analyzer.analyze_resolved

    def counting(found: Resolved) -> object:
        ran.append(found.head)
        return real(found)

    monkeypatch.setattr(analyzer, "analyze_resolved", counting)
    return ran


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_stored_output_is_what_the_check_printed(
    repo: Repo, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, fmt: str
) -> None:
    base = _blocking_change(repo)
    ran = _analyses(monkeypatch)
    first = _check(repo, capsys, base, fmt)
    assert first[0] == 1
    assert _stored(repo, base, fmt).is_file()
    assert _check(repo, capsys, base, fmt) == first
    assert len(ran) == 1  # the second was the stored output
    repo.write(ARCH, mermaid_doc("flowchart LR\n    app\n    pkg.model"))
    repo.write(DATA, mermaid_doc("classDiagram\n    class M {\n      int x\n    }"))
    repo.commit("diagrams")
    passed = _check(repo, capsys, base, fmt)
    assert passed[0] == 0
    assert _check(repo, capsys, base, fmt) == passed
    assert len(ran) == 2


def test_the_stored_output_is_the_subprocess_output(repo: Repo) -> None:
    base = _blocking_change(repo)
    argv = [sys.executable, "-m", "scaffold", "diagram-check", "--base", base, "--format", "json"]

    def run() -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            argv, cwd=repo.root, capture_output=True, text=True, check=False, timeout=120
        )

    first, again = run(), run()
    assert (first.returncode, first.stdout, first.stderr) == (1, first.stdout, "")
    assert (again.returncode, again.stdout, again.stderr) == (1, first.stdout, "")
    assert json.loads(again.stdout)["blocking"] is True


def test_another_format_revision_or_config_misses(
    repo: Repo, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    base = _blocking_change(repo)
    ran = _analyses(monkeypatch)
    _check(repo, capsys, base, "text")
    _check(repo, capsys, base, "json")  # another format
    assert len(ran) == 2
    head = repo.head()
    repo.write(".github/scaffold.yml", "diagrams:\n  ignore: ['app/pkg/model.py']\n")
    repo.commit("ignore the model")  # the settings at the head change: another head
    code, out = _check(repo, capsys, base, "text")
    assert len(ran) == 3
    assert code == 0
    assert "passed" in out
    assert _check(repo, capsys, base, "text", head=head)[0] == 1  # the old head: stored
    assert len(ran) == 3
    _check(repo, capsys, head, "text")  # another base
    assert len(ran) == 4


def test_the_key_covers_every_input(repo: Repo) -> None:
    base = _blocking_change(repo)
    found = resolve_quick(str(repo.root), base, "HEAD")
    assert found is not None
    keys = {output_cache.key(found, "text"), output_cache.key(found, "json")}
    for field in ("base", "head", "base_tree", "head_tree", "merge_base"):
        other = Resolved(
            found.base,
            found.head,
            found.base_tree,
            found.head_tree,
            found.merge_base,
            found.git_dir,
            found.top,
        )
        setattr(other, field, "f" * 40)
        keys.add(output_cache.key(other, "text"))
    assert len(keys) == 7
    before = output_cache.key(found, "text")
    repo.git("config", "diff.renameLimit", "5")  # rename detection: the diff changes
    assert output_cache.key(found, "text") != before


@pytest.mark.parametrize(
    "damage",
    ["empty", "truncated", "flipped", "foreign", "bad-code", "garbage", "directory"],
)
def test_a_damaged_stored_output_is_ignored_and_replaced(
    repo: Repo, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, damage: str
) -> None:
    base = _blocking_change(repo)
    first = _check(repo, capsys, base, "json")
    path = _stored(repo, base, "json")
    good = path.read_bytes()
    other = _stored(repo, base, "text")
    if damage == "empty":
        path.write_bytes(b"")
    elif damage == "truncated":
        path.write_bytes(good[: len(good) - 10])
    elif damage == "flipped":
        path.write_bytes(good.replace(b'"blocking": true', b'"blocking": fals'))
    elif damage == "foreign":  # another key's valid file under this name
        _check(repo, capsys, base, "text")
        path.write_bytes(other.read_bytes())
    elif damage == "bad-code":
        path.write_bytes(good.replace(b"\n1\n", b"\n7\n", 1))
    elif damage == "garbage":
        path.write_bytes(os.urandom(300))
    else:
        path.unlink()
        path.mkdir()
    ran = _analyses(monkeypatch)
    assert _check(repo, capsys, base, "json") == first
    assert len(ran) == 1  # recomputed
    if damage != "directory":
        assert path.read_bytes() == good  # replaced
        assert _check(repo, capsys, base, "json") == first
        assert len(ran) == 1


def test_an_unwritable_store_does_not_fail_the_check(
    repo: Repo, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    base = _blocking_change(repo)
    found = resolve_quick(str(repo.root), base, "HEAD")
    assert found is not None
    where = Path(output_cache.directory(found.git_dir))
    where.parent.mkdir(parents=True, exist_ok=True)
    where.write_text("a file where the directory should be", encoding="utf-8")
    ran = _analyses(monkeypatch)
    first = _check(repo, capsys, base)
    assert first[0] == 1
    assert "model" in first[1]
    assert _check(repo, capsys, base) == first
    assert len(ran) == 2  # nothing could be kept


def test_errors_are_not_stored_and_the_store_can_be_turned_off(
    repo: Repo, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    base = _blocking_change(repo)
    repo.write(".github/scaffold.yml", "diagrams: [not, a, mapping]\n")
    repo.commit("broken config")
    assert run_diagram_check(str(repo.root), base, "HEAD", "text") == 2
    found = resolve_quick(str(repo.root), base, "HEAD")
    assert found is not None
    assert not Path(output_cache.directory(found.git_dir)).exists()
    monkeypatch.setenv(output_cache.ENV_DISABLE, "0")
    repo.write(".github/scaffold.yml", "diagrams: {}\n")
    repo.commit("fixed config")
    assert _check(repo, capsys, base)[0] == 1
    assert not Path(output_cache.directory(found.git_dir)).exists()


def test_old_outputs_are_pruned(repo: Repo, monkeypatch: pytest.MonkeyPatch) -> None:
    git_dir = str(repo.root / ".git")
    monkeypatch.setattr(output_cache, "MAX_FILES", 3)
    for i in range(5):
        output_cache.store(git_dir, f"{i:040x}", 0, f"output {i}\n")
        path = Path(output_cache.directory(git_dir)) / f"{i:040x}"
        os.utime(path, ns=(i * 10**9, i * 10**9))
    left = sorted(p.name for p in Path(output_cache.directory(git_dir)).iterdir())
    assert left == [f"{i:040x}" for i in (2, 3, 4)]
    assert output_cache.read(git_dir, f"{4:040x}") == (0, "output 4\n")


def test_a_stored_output_imports_almost_nothing(repo: Repo) -> None:
    base = _blocking_change(repo)

    def loaded() -> set[str]:
        return modules_loaded(repo.root, "diagram-check", "--base", base, "--format", "json")

    assert "scaffold.diagramcheck.analyzer" in loaded()
    again = loaded()
    assert "scaffold.diagramcheck.output_cache" in again
    assert not again & {
        "scaffold.diagramcheck.analyzer",
        "scaffold.diagramcheck.cache",
        "scaffold.git.runner",
        "subprocess",
        "pathlib",
        "dataclasses",
    }


def test_a_check_from_a_subdirectory_is_the_same_check(
    repo: Repo, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The key holds no path of the work tree: a check from a subdirectory is the same,
    answered from what the first stored."""
    base = _blocking_change(repo)
    ran = _analyses(monkeypatch)
    first = _check(repo, capsys, base)
    sub = repo.root / "app" / "pkg"
    assert run_diagram_check(str(sub), base, "HEAD", "text") == first[0]
    assert capsys.readouterr().out == first[1]
    assert len(ran) == 1


def test_resolve_quick_agrees_with_the_analyzer_or_steps_aside(
    repo: Repo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from scaffold.diagramcheck import analyzer

    base = _blocking_change(repo)
    found = resolve_quick(str(repo.root / "app"), base, "HEAD")
    top: list[Path] = []
    both = analyzer._resolve_both(repo.root / "app", base, "HEAD", top)
    assert found is not None
    assert both is not None
    assert (found.base, found.head, found.merge_base) == (both[0], both[1], both[3])
    assert Path(found.git_dir).resolve() == both[2][0].resolve()
    assert Path(found.top) == top[0]
    # The long way reports these: no answer here.
    assert resolve_quick(str(repo.root), "no-such-ref", "HEAD") is None
    assert resolve_quick(str(repo.root), "--output=x", "HEAD") is None
    assert resolve_quick(str(tmp_path / "nowhere"), base, "HEAD") is None
    assert resolve_quick(str(tmp_path), base, "HEAD") is None  # not a repository
    monkeypatch.setenv("PATH", str(tmp_path))  # no git to be found
    assert resolve_quick(str(repo.root), base, "HEAD") is None
