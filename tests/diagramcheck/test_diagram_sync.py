"""scaffold's own ``docs/diagrams/`` pages are what the code generates (the transition
tables, the modules, the quest file's classes), and have the shape DiagramCheck expects
(title, paragraph, Mermaid)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from scaffold.cli.diagram_sync import (
    ARCHITECTURE_PATH,
    DATA_MODEL_PATH,
    PACKAGE_DIR,
    STATE_DIAGRAM_PATH,
    architecture_mermaid,
    data_model_mermaid,
    main,
    render_page,
)
from scaffold.core import lifecycle, planning
from scaffold.core.states import Lifecycle
from scaffold.diagramcheck.generate import begin_marker, end_marker, fenced
from scaffold.quest import model as qm

ROOT = Path(__file__).resolve().parents[2]
DIAGRAMS = ROOT / "docs" / "diagrams"
STATE_DOC = ROOT / STATE_DIAGRAM_PATH
DATA_DOC = ROOT / DATA_MODEL_PATH


def render_state_diagram_doc(text: str) -> str:
    return render_page(STATE_DIAGRAM_PATH, text)


def generated_block(name: str) -> str:
    body = {"lifecycle": lifecycle.mermaid, "planning": planning.mermaid}[name]()
    return f"{begin_marker(name)}\n{fenced([body])}\n{end_marker(name)}"


def test_state_diagram_doc_matches_the_tables() -> None:
    text = STATE_DOC.read_text(encoding="utf-8")
    assert text == render_state_diagram_doc(text), (
        f"{STATE_DIAGRAM_PATH} lags lifecycle.TABLE / planning.PLAN_TABLE; "
        "run `python -m scaffold.cli.diagram_sync` to regenerate"
    )
    assert f"```mermaid\n{lifecycle.mermaid()}```" in text
    assert f"```mermaid\n{planning.mermaid()}```" in text


def test_state_doc_describes_every_state() -> None:
    text = STATE_DOC.read_text(encoding="utf-8")
    section = text.split("## What each state does", 1)[1]
    for state in Lifecycle:
        assert f"| {state.value} |" in section, f"no row for {state.value}"


SAMPLE = f"""# States

Prose a person wrote.

{begin_marker("lifecycle")}
```mermaid
stateDiagram-v2
    Idle --> Nowhere: stale
```
{end_marker("lifecycle")}

Between the blocks.

{begin_marker("planning")}
{end_marker("planning")}

Tail prose.
"""


def test_render_replaces_only_the_generated_blocks() -> None:
    out = render_state_diagram_doc(SAMPLE)
    assert "Nowhere" not in out
    for kept in ("# States\n\nProse a person wrote.\n", "Between the blocks.", "Tail prose.\n"):
        assert kept in out
    assert generated_block("lifecycle") in out
    assert generated_block("planning") in out
    assert out.index("Between the blocks.") < out.index(begin_marker("planning"))
    assert render_state_diagram_doc(out) == out


def test_render_appends_missing_blocks() -> None:
    out = render_state_diagram_doc("# States\n\nNo diagrams yet.\n")
    assert out.startswith("# States\n\nNo diagrams yet.\n\n## Task lifecycle\n\n")
    assert "## Planning phases\n\n" + generated_block("planning") in out
    assert render_state_diagram_doc(out) == out
    assert render_state_diagram_doc("").startswith("## Task lifecycle\n\n")


def test_data_model_doc_matches_the_models() -> None:
    text = DATA_DOC.read_text(encoding="utf-8")
    assert text == render_page(DATA_MODEL_PATH, text), (
        f"{DATA_MODEL_PATH} lags scaffold.quest.model / scaffold.signals; "
        "run `python -m scaffold.cli.diagram_sync` to regenerate"
    )


def test_data_model_lists_every_field() -> None:
    text = data_model_mermaid()
    for cls in (qm.Quest, qm.TaskRecord, qm.PullRequest):
        body = text.split(f"class {cls.__name__} {{\n", 1)[1].split("    }", 1)[0]
        names = [line.split()[-1] for line in body.splitlines() if line.strip().startswith("+")]
        assert names == list(cls.model_fields), cls.__name__
    assert "+dict~str,TaskRecord~ tasks" in text
    assert "Quest --> TaskRecord : tasks" in text
    assert "TaskRecord --> PullRequest : pr" in text


def _root(tmp_path: Path, state_text: str) -> Path:
    (tmp_path / "docs" / "diagrams").mkdir(parents=True)
    (tmp_path / STATE_DIAGRAM_PATH).write_text(state_text, encoding="utf-8")
    return tmp_path


def test_main_checks_and_rewrites(tmp_path: Path) -> None:
    root = _root(tmp_path, SAMPLE)
    state = root / STATE_DIAGRAM_PATH
    assert main(["--check", str(root)]) == 1
    assert state.read_text(encoding="utf-8") == SAMPLE
    assert not (root / DATA_MODEL_PATH).exists()
    assert main([str(root)]) == 0
    assert main(["--check", str(root)]) == 0
    assert state.read_text(encoding="utf-8") == render_state_diagram_doc(SAMPLE)
    assert "classDiagram" in (root / DATA_MODEL_PATH).read_text(encoding="utf-8")
    assert "flowchart LR" in (root / ARCHITECTURE_PATH).read_text(encoding="utf-8")
    with pytest.raises(SystemExit) as usage:
        main(["--nope"])
    assert usage.value.code == 2


def test_architecture_names_every_module() -> None:
    text = architecture_mermaid()
    names = sorted(
        ".".join(p.relative_to(PACKAGE_DIR.parent).with_suffix("").parts).removesuffix(".__init__")
        for p in PACKAGE_DIR.rglob("*.py")
    )
    assert "scaffold.core.lifecycle" in names
    for name in names:
        assert f'["{name}"]' in text, name
    assert "pkg_scaffold_core --> pkg_scaffold_quest" in text  # core reads the quest models
    assert 'pkg_scaffold_core["scaffold.core · pure decisions' in text


def test_architecture_of_a_small_package(tmp_path: Path) -> None:
    pkg = tmp_path / "demo"
    (pkg / "core").mkdir(parents=True)
    (pkg / "__init__.py").write_text("", encoding="utf-8")
    (pkg / "errors.py").write_text("", encoding="utf-8")
    (pkg / "core" / "__init__.py").write_text("", encoding="utf-8")
    (pkg / "core" / "rules.py").write_text(
        "from demo.errors import E\nfrom demo.core import other\nimport json\n", encoding="utf-8"
    )
    (pkg / "core" / "other.py").write_text("from demo import __version__\n", encoding="utf-8")
    text = architecture_mermaid(pkg)
    assert 'subgraph pkg_demo_core["demo.core"]' in text
    assert '        demo_core_rules["demo.core.rules"]\n' in text
    assert "    pkg_demo_core --> pkg_demo\n" in text
    assert text.count("-->") == 1  # no self-loops, nothing to json


PAGES = {
    "01-execution-flow.md": "flowchart",
    "02-architecture.md": "flowchart",
    "03-state-machine.md": "stateDiagram-v2",
    "04-roadmap.md": "flowchart",
    "05-data-model.md": "classDiagram",
}


@pytest.mark.parametrize(("name", "kind"), PAGES.items())
def test_diagram_page_shape(name: str, kind: str) -> None:
    text = (DIAGRAMS / name).read_text(encoding="utf-8")
    lines = text.splitlines()
    assert lines[0].startswith("# "), "a title line first"
    assert lines[1] == "", "then a paragraph"
    assert lines[2].strip(), "then a paragraph"
    blocks = re.findall(r"```mermaid\n(.*?)```", text, re.DOTALL)
    assert blocks, "a Mermaid block"
    assert blocks[0].lstrip().startswith(kind)


def test_data_model_names_every_model() -> None:
    text = (DIAGRAMS / "05-data-model.md").read_text(encoding="utf-8")
    for name in (
        "Quest",
        "TaskRecord",
        "Question",
        "Requirements",
        "Context",
        "Observable",
        "RoleFrame",
        "AgentRun",
        "PullRequest",
        "SignalEntry",
        "PlanningState",
        "HistoryEntry",
        "Complete",
        "PartiallyComplete",
        "NeedsUserInput",
        "NeedsRoleFollowup",
    ):
        assert re.search(rf"^\s*class {name} \{{", text, re.MULTILINE), name


def test_architecture_doc_matches_the_package() -> None:
    path = ROOT / ARCHITECTURE_PATH
    text = path.read_text(encoding="utf-8")
    assert text == render_page(ARCHITECTURE_PATH, text), (
        f"{ARCHITECTURE_PATH} lags the modules under app/scaffold; "
        "run `python -m scaffold.cli.diagram_sync` to regenerate"
    )
