"""``scaffold action diagram-check`` as a workflow step: real payloads, real git, real CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from actionkit import (
    ARCH,
    DATA,
    Repo,
    Step,
    example,
    mermaid_doc,
    pull_request_payload,
    push_payload,
)

MODELS_V1 = "from dataclasses import dataclass\n"
MODELS_V2 = (
    "from dataclasses import dataclass\n\n\n@dataclass\nclass User:\n"
    "    id: int\n    ratio: str  # 100% of it, a: b\n"
)


def _unescape(value: str) -> str:
    return (
        value.replace("%0D", "\r")
        .replace("%0A", "\n")
        .replace("%3A", ":")
        .replace("%2C", ",")
        .replace("%25", "%")
    )


def parse_command(line: str) -> tuple[str, dict[str, str], str]:
    """``::cmd k=v,k=v::message`` back to its parts, as the runner reads it."""
    assert line.startswith("::"), line
    head, sep, message = line[2:].partition("::")
    assert sep, line
    command, _, props = head.partition(" ")
    properties = {}
    for item in props.split(",") if props else []:
        key, _, value = item.partition("=")
        properties[key] = _unescape(value)
    return command, properties, _unescape(message)


@pytest.fixture
def repo(tmp_path: Path) -> Repo:
    repo = Repo.create(tmp_path / "repo")
    repo.write(ARCH, mermaid_doc("flowchart LR\n    app\n    pkg.models"))
    repo.write("app/pkg/models.py", MODELS_V1)
    repo.commit("models")
    return repo


def test_blocking_pull_request(repo: Repo, tmp_path: Path) -> None:
    base = repo.head()
    repo.git("checkout", "-q", "-b", "feature")
    repo.write("app/pkg/models.py", MODELS_V2)
    head = repo.commit("a data class")
    repo.git("checkout", "-q", "main")  # the checkout is elsewhere: the shas decide
    step = Step(tmp_path / "step", repo.root, "pull_request", pull_request_payload(base, head))
    proc = step.run("diagram-check")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    lines = [line for line in proc.stdout.splitlines() if line]
    errors = [line for line in lines if line.startswith("::error ")]
    assert len(errors) == 1
    assert errors[0].startswith("::error file=app/pkg/models.py,line=5,title=DiagramCheck%3A ")
    assert "\n" not in errors[0]
    command, props, message = parse_command(errors[0])
    assert command == "error"
    assert props == {
        "file": "app/pkg/models.py",
        "line": "5",
        "title": f"DiagramCheck: class-added ({DATA})",
    }

    outputs = step.outputs()
    assert outputs["blocking"] == "true"
    assert outputs["findings"] == "1"
    report = json.loads(Path(outputs["report"]).read_text(encoding="utf-8"))
    assert Path(outputs["report"]).is_relative_to(step.runner_temp)
    assert report["base"] == base
    assert report["head"] == head
    finding = report["findings"][0]
    assert message == finding["message"] + "\n" + "\n".join(finding["draft"])
    assert "%0A" in errors[0]
    summary = step.summary()
    assert "DiagramCheck: the diagrams lag the code" in summary
    assert "`User`" in summary


def test_synced_pull_request(repo: Repo, tmp_path: Path) -> None:
    base = repo.head()
    repo.write("app/pkg/models.py", MODELS_V2)
    repo.write(
        DATA,
        mermaid_doc("classDiagram\n    class User {\n        +int id\n        +str ratio\n    }"),
    )
    head = repo.commit("a data class and its diagram")
    step = Step(tmp_path / "step", repo.root, "pull_request", pull_request_payload(base, head))
    proc = step.run("diagram-check")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "::error" not in proc.stdout
    notices = [line for line in proc.stdout.splitlines() if line.startswith("::notice")]
    assert notices
    assert parse_command(notices[0])[2].startswith("DiagramCheck passed")
    outputs = step.outputs()
    assert outputs["blocking"] == "false"
    assert outputs["findings"] == "0"
    assert json.loads(Path(outputs["report"]).read_text())["blocking"] is False
    assert "DiagramCheck passed" in step.summary()


def test_push_event_uses_before_and_after(repo: Repo, tmp_path: Path) -> None:
    before = repo.head()
    repo.write("app/pkg/plain.py", "")
    after = repo.commit("a module")
    repo.commit("later, not pushed yet")  # HEAD is not what the event names
    step = Step(tmp_path / "step", repo.root, "push", push_payload(before, after))
    proc = step.run("diagram-check", "--format", "text")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "app/pkg/plain.py:1: error: [module-added]" in proc.stdout
    report = json.loads(Path(step.outputs()["report"]).read_text())
    assert (report["base"], report["head"]) == (before, after)


def test_push_of_a_new_branch_checks_its_last_commit(repo: Repo, tmp_path: Path) -> None:
    parent = repo.head()
    repo.write("app/pkg/plain.py", "")
    after = repo.commit("a module")
    step = Step(tmp_path / "step", repo.root, "push", push_payload("0" * 40, after))
    proc = step.run("diagram-check")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    report = json.loads(Path(step.outputs()["report"]).read_text())
    assert (report["base"], report["head"]) == (parent, after)


def test_push_of_a_root_commit_or_a_deleted_branch_is_skipped(tmp_path: Path) -> None:
    repo = Repo.create(tmp_path / "repo")
    root_step = Step(tmp_path / "s1", repo.root, "push", push_payload("0" * 40, repo.head()))
    proc = root_step.run("diagram-check")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.startswith("::notice title=DiagramCheck::DiagramCheck skipped")
    assert root_step.outputs() == {"blocking": "false", "findings": "0", "report": ""}

    deleted = example("push", "_.1.json")  # after = 0000...: the ref was deleted
    step = Step(tmp_path / "s2", repo.root, "push", deleted)
    proc = step.run("diagram-check")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "deleted the branch" in proc.stdout
    assert "skipped" in step.summary()


def test_a_repository_without_scaffold(tmp_path: Path) -> None:
    """No .github/scaffold.yml, no backlog, not even diagrams: defaults, and a clear verdict."""
    repo = Repo.create(tmp_path / "plain", diagrams=False)
    assert not (repo.root / ".github").exists()
    assert not (repo.root / "backlog").exists()
    base = repo.head()
    repo.write("app/pkg/service.py", "def run() -> None:\n    pass\n")
    head = repo.commit("a module")
    step = Step(tmp_path / "step", repo.root, "pull_request", pull_request_payload(base, head))
    proc = step.run("diagram-check")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert f"{ARCH} does not exist" in proc.stdout
    assert step.outputs()["blocking"] == "true"

    repo.write(ARCH, mermaid_doc('flowchart LR\n    pkg_service["pkg.service"]'))
    fixed = repo.commit("the architecture diagram")
    step = Step(tmp_path / "step2", repo.root, "pull_request", pull_request_payload(base, fixed))
    proc = step.run("diagram-check")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert step.outputs()["blocking"] == "false"


def test_options_override_the_event(repo: Repo, tmp_path: Path) -> None:
    base = repo.head()
    repo.write("app/pkg/plain.py", "")
    head = repo.commit("a module")
    # the event names an in-sync range (head..head); --base widens it
    step = Step(tmp_path / "step", repo.root, "pull_request", pull_request_payload(head, head))
    proc = step.run("diagram-check", "--base", base)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    report = json.loads(Path(step.outputs()["report"]).read_text())
    assert (report["base"], report["head"]) == (base, head)


@pytest.mark.parametrize(
    ("event", "args"),
    [
        ("pull_request", ("--base", "no-such-ref")),
        ("pull_request", ("--base", "--upload-pack=touch pwned")),
        ("workflow_dispatch", ()),  # no commits named, no --base
        ("pull_request_missing", ()),  # the payload names a commit the repo lacks
    ],
)
def test_usage_errors_exit_2(repo: Repo, tmp_path: Path, event: str, args: tuple[str, ...]) -> None:
    head = repo.head()
    if event == "workflow_dispatch":
        payload = example("workflow_dispatch", "_.0.json")
    else:
        base = "1" * 40 if event == "pull_request_missing" else head
        payload = pull_request_payload(base, head)
        event = "pull_request"
    step = Step(tmp_path / "step", repo.root, event, payload)
    proc = step.run("diagram-check", *args)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stdout.startswith("::error title=scaffold action::scaffold: ")
    assert step.outputs() == {}
    assert not (repo.root / "pwned").exists()


def test_shallow_checkout_fetches_the_history(repo: Repo, tmp_path: Path) -> None:
    """actions/checkout fetches one commit by default; the step fetches what it lacks."""
    base = repo.head()
    repo.git("checkout", "-q", "-b", "feature")
    repo.write("app/pkg/plain.py", "")
    head = repo.commit("a module")
    clone = tmp_path / "clone"
    repo.git("clone", "-q", "--depth", "1", "--branch", "feature", repo.root.as_uri(), str(clone))
    assert Repo(clone).git("rev-parse", "--is-shallow-repository") == "true"
    step = Step(tmp_path / "step", clone, "pull_request", pull_request_payload(base, head))
    proc = step.run("diagram-check")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert step.outputs()["findings"] == "1"
    assert Repo(clone).git("rev-parse", "--is-shallow-repository") == "false"
