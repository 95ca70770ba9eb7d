"""The tolerant Mermaid reader: blocks, problems, names; broken diagrams block a change."""

from __future__ import annotations

from pathlib import Path

import pytest
from dcrepo import ARCH, Repo, mermaid_doc

from scaffold.diagramcheck.mermaid import (
    DiagramIndex,
    MermaidBlock,
    extract_blocks,
    index_blocks,
    parse_block,
)


def index_text(text: str, path: str = "") -> DiagramIndex:
    return index_blocks(extract_blocks(text, path))


REPO = Path(__file__).resolve().parents[2]


def test_extract_blocks_from_markdown_and_mmd() -> None:
    text = "# t\n\n```mermaid\nflowchart LR\n  a --> b\n```\n\n```python\nx\n```\n~~~mermaid\ngraph TD\n~~~\n"
    blocks = extract_blocks(text, "x.md")
    assert [(b.line, b.source.splitlines()[0]) for b in blocks] == [
        (4, "flowchart LR"),
        (12, "graph TD"),
    ]
    assert extract_blocks("stateDiagram-v2\n  a --> b\n", "flow.mmd")[0].line == 1


@pytest.mark.parametrize(
    ("source", "problem"),
    [
        ("flowchart LR\n  a[label --> b", "unclosed '['"),
        ("flowchart LR\n  a -->", "arrow without an end"),
        ("flowchart LR\n  subgraph x\n  a", "'subgraph' opened here is never closed"),
        ("flowchart LR\n  end", "'end' without 'subgraph'"),
        ("flowchart XY\n  a", "unknown flowchart direction"),
        ("nonsense\n  a", "unknown diagram type"),
        ("", "empty Mermaid block"),
        ('flowchart LR\n  a["open quote] --> b', "unbalanced double quote"),
        ("classDiagram\n  class A {\n  +int x\n", "never closed"),
        ("stateDiagram-v2\n  }", "'}' without '{'"),
    ],
)
def test_problems(source: str, problem: str) -> None:
    parsed = parse_block(MermaidBlock(source, 10))
    assert parsed.problems, source
    assert problem in parsed.problems[0].message
    assert parsed.problems[0].line >= 10


@pytest.mark.parametrize(
    "source",
    [
        'flowchart TD\n  a(["x"]) --> b{"y"} -- label --> c[/"p"/]\n  c -.-> d>asym] ==> e((z))\n  a & b --> c',
        "flowchart LR\n  subgraph one[One]\n    direction TB\n    x --> y\n  end\n  classDef k fill:#fff\n  class x k",
        'classDiagram\n  direction LR\n  class A~T~ {\n    +List~int~ xs\n    +run(a, b) bool\n  }\n  A <|-- B\n  A *-- "1..*" C : has\n  B : +str name',
        'stateDiagram-v2\n  [*] --> A\n  A --> B : go [guard]\n  state B {\n    [*] --> B1\n    B1 --> [*]\n  }\n  state "Long name" as L\n  B --> L\n  note right of L : a note (with parens\n  L --> [*]',
        "erDiagram\n  CUSTOMER ||--o{ ORDER : places\n  ORDER {\n    int id PK\n    string status\n  }",
        "---\ntitle: x\n---\n%%{init: {'theme': 'dark'}}%%\nsequenceDiagram\n  A->>B: hi",
        'flowchart LR\n  alloc["worktree scaffold/task-&lt;id&gt;"] --> x',
    ],
)
def test_valid_diagrams_have_no_problems(source: str) -> None:
    assert parse_block(MermaidBlock(source, 1)).problems == []


def test_names_members_edges_states() -> None:
    index = index_text(
        "```mermaid\nflowchart LR\n  app --> scaffold.core.lifecycle\n```\n"
        "```mermaid\nclassDiagram\n  class User {\n    +str email\n  }\n  Order : +int total\n```\n"
        "```mermaid\nstateDiagram-v2\n  [*] --> Idle\n  Idle --> Busy : work\n```\n"
    )
    assert {"scaffold.core.lifecycle", "core.lifecycle", "lifecycle", "app"} <= index.names
    assert index.members["User"] >= {"str", "email"}
    assert index.members["Order"] >= {"int", "total"}
    assert ("Idle", "Busy") in index.edges
    assert ("app", "scaffold.core.lifecycle") in index.edges
    assert index.states == {"Idle", "Busy"}


def test_this_projects_diagrams_parse() -> None:
    for path in sorted((REPO / "docs" / "diagrams").glob("*.md")):
        index = index_text(path.read_text(encoding="utf-8"), path.name)
        assert index.kinds, path
        assert index.problems == [], path


def test_broken_mermaid_in_a_changed_diagram_blocks(repo: Repo) -> None:
    report = repo.change(
        {"app/pkg/svc.py": "", ARCH: mermaid_doc("flowchart LR\n    svc[svc --> other")}
    )
    [finding] = [f for f in report.failures if f.kind == "mermaid-invalid"]
    assert finding.diagram == ARCH
    assert finding.source == ARCH
    assert finding.line == 7  # "# Diagram", "", "Some prose.", "", fence, header, this line
    assert "Mermaid does not parse: unclosed '['" in finding.message


def test_broken_mermaid_anywhere_in_a_changed_markdown_file(repo: Repo) -> None:
    report = repo.change({"docs/guide.md": "# g\n\n```mermaid\nflowchart LR\n  a -->\n```\n"})
    assert [(f.kind, f.source, f.line) for f in report.failures] == [
        ("mermaid-invalid", "docs/guide.md", 5)
    ]
