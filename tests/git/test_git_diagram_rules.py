"""DiagramCheck rules: pure functions of a change list (plus one run on real git)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest
from gitrepo import write

from scaffold.git.changes import FileChange, parse_name_status_z
from scaffold.git.diagram_rules import (
    DEFAULT_RULES,
    DiagramPaths,
    DiagramRequirement,
    DiagramVerdict,
    NewModuleRule,
    check_diagrams,
)
from scaffold.git.worktrees import Workspace

ARCH = "docs/diagrams/02-architecture.md"


def test_default_paths() -> None:
    paths = DiagramPaths()
    assert paths.architecture == ARCH
    assert paths.data_model == "docs/diagrams/05-data-model.md"
    assert paths.states == "docs/diagrams/03-state-machine.md"
    assert paths.roadmap == "docs/diagrams/04-roadmap.md"


def test_new_module_without_diagram_is_missing() -> None:
    verdict = check_diagrams([FileChange("A", "app/scaffold/git/ward.py")], DiagramPaths())
    assert verdict == DiagramVerdict(
        synced=False,
        missing=[
            DiagramRequirement(
                ARCH, "new Python module app/scaffold/git/ward.py", "app/scaffold/git/ward.py"
            )
        ],
    )


@pytest.mark.parametrize("status", ["M", "A"])
def test_new_module_with_diagram_change_is_synced(status: str) -> None:
    changes = [FileChange("A", "app/scaffold/git/ward.py"), FileChange(status, ARCH)]
    assert check_diagrams(changes, DiagramPaths()) == DiagramVerdict(synced=True, missing=[])


def test_deleting_the_diagram_does_not_satisfy() -> None:
    changes = [FileChange("A", "pkg/x.py"), FileChange("D", ARCH)]
    assert not check_diagrams(changes, DiagramPaths()).synced


@pytest.mark.parametrize(
    "path",
    [
        "tests/test_ward.py",
        "tests/git/helpers.py",
        "app/pkg/tests/fixture_data.py",
        "app/pkg/test_thing.py",
        "app/pkg/thing_test.py",
        "conftest.py",
        "docs/notes.md",
        "app/pkg/data.json",
    ],
)
def test_no_requirement_for_tests_and_non_python(path: str) -> None:
    assert check_diagrams([FileChange("A", path)], DiagramPaths()).synced


def test_modified_or_deleted_module_needs_nothing_from_this_rule() -> None:
    changes = [FileChange("M", "app/a.py"), FileChange("D", "app/b.py")]
    assert check_diagrams(changes, DiagramPaths()).synced


def test_renamed_module_requires_the_diagram() -> None:
    changes = [FileChange("R", "app/new_name.py", old_path="app/old_name.py", similarity=96)]
    verdict = check_diagrams(changes, DiagramPaths())
    assert not verdict.synced
    assert verdict.missing[0].source_path == "app/new_name.py"
    assert "moved from app/old_name.py" in verdict.missing[0].reason


def test_module_renamed_into_tests_needs_nothing() -> None:
    changes = [FileChange("R", "tests/old_helper.py", old_path="app/helper.py", similarity=100)]
    assert check_diagrams(changes, DiagramPaths()).synced


def test_diagram_renamed_into_place_counts_as_changed() -> None:
    changes = [
        FileChange("A", "app/x.py"),
        FileChange("R", ARCH, old_path="docs/old-arch.md", similarity=80),
    ]
    assert check_diagrams(changes, DiagramPaths()).synced


def test_configured_paths_are_used_and_normalised() -> None:
    config = DiagramPaths(architecture="./design//arch.md")
    changes = [FileChange("A", "src/mod.py")]
    verdict = check_diagrams(changes, config)
    assert verdict.missing[0].diagram_path == "design/arch.md"
    assert check_diagrams([*changes, FileChange("M", "design/arch.md")], config).synced


def test_rule_exclusions_are_configurable() -> None:
    rule = NewModuleRule(exclude_dirs=("tests", "bench"), exclude_names=())
    changes = [FileChange("A", "bench/bench_x.py"), FileChange("A", "app/test_x.py")]
    verdict = check_diagrams(changes, DiagramPaths(), rules=[rule])
    assert [m.source_path for m in verdict.missing] == ["app/test_x.py"]


def test_engine_takes_any_rule_and_dedupes() -> None:
    def schema_rule(
        changes: Sequence[FileChange], config: DiagramPaths
    ) -> list[DiagramRequirement]:
        return [
            DiagramRequirement(config.data_model, "schema changed", c.path)
            for c in changes
            if c.path.endswith("models.py")
        ] * 2

    changes = [FileChange("A", "app/models.py")]
    verdict = check_diagrams(changes, DiagramPaths(), rules=[*DEFAULT_RULES, schema_rule])
    assert [(m.diagram_path, m.source_path) for m in verdict.missing] == [
        (ARCH, "app/models.py"),
        ("docs/diagrams/05-data-model.md", "app/models.py"),
    ]


def test_parse_name_status_z() -> None:
    out = "A\0new.py\0R087\0old.py\0moved.py\0M\0a b.txt\0C100\0x.py\0y.py\0D\0gone.py\0"
    assert parse_name_status_z(out) == [
        FileChange("A", "new.py"),
        FileChange("R", "moved.py", old_path="old.py", similarity=87),
        FileChange("M", "a b.txt"),
        FileChange("C", "y.py", old_path="x.py", similarity=100),
        FileChange("D", "gone.py"),
    ]
    assert parse_name_status_z("") == []
    with pytest.raises(ValueError):
        parse_name_status_z("R100\0only-one-path\0")
    with pytest.raises(ValueError):
        FileChange("?", "x")


def test_on_a_real_branch(repo: Path) -> None:
    ws = Workspace(repo)
    wt = ws.create_worktree("TASK-1")
    write(wt, "app/pkg/service.py", "class Service: ...\n")
    write(wt, "tests/test_service.py", "def test_x() -> None: ...\n")
    ws.commit_all("TASK-1", "add service")

    verdict = check_diagrams(ws.changed_files("TASK-1"), DiagramPaths())
    assert [m.source_path for m in verdict.missing] == ["app/pkg/service.py"]

    write(wt, ARCH, "```mermaid\ngraph TD\n  Service\n```\n")
    ws.commit_all("TASK-1", "diagram")
    assert check_diagrams(ws.changed_files("TASK-1"), DiagramPaths()).synced
