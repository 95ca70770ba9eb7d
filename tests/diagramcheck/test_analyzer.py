"""The analyzer end to end: class bodies and flowchart links read from Mermaid, a changed
diagram read again, and the merge base git picks in a criss-cross history.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from dcrepo import DATA, Repo, kinds, mermaid_doc

from scaffold.diagramcheck import mermaid
from scaffold.diagramcheck.analyzer import analyze, analyze_commits


def test_a_class_body_gives_its_words_to_its_class_only() -> None:
    source = (
        "classDiagram\n  class A {\n    +int id\n    +pkg.Type<br/>kind\n  }\n"
        "  class B {\n    +str name\n  }\n  A --> B\n  class C {\n    +x y"
    )
    parsed = mermaid.parse_block(mermaid.MermaidBlock(source, 1))
    assert parsed.members["A"] == {"int", "id", "pkg.Type", "pkg", "Type", "kind"}
    assert parsed.members["B"] == {"str", "name"}
    assert parsed.members["C"] == {"x", "y"}  # never closed: still read
    assert any("never closed" in p.message for p in parsed.problems)
    assert {"A", "B", "C", "id", "kind", "name"} <= parsed.names


def test_read_diagram_extracts_the_blocks_once() -> None:
    from scaffold.diagramcheck.rules.model import DiagramFile, read_diagram

    text = (
        mermaid_doc("classDiagram\n    class Order") + "\n" + mermaid_doc("flowchart LR\n  a-->b")
    )
    index, blocks = read_diagram(DiagramFile("d.md", text, changed=False))
    assert index == mermaid.index_blocks(mermaid.extract_blocks(text, "d.md"))
    assert blocks == "\n".join(b.source for b in mermaid.extract_blocks(text, "d.md"))


def _model(repo: Repo) -> str:
    repo.write(
        "app/pkg/models.py",
        "from dataclasses import dataclass\n\n\n@dataclass\nclass Order:\n    id: int\n",
    )
    repo.write(DATA, mermaid_doc("classDiagram\n    class Order {\n        +int id\n    }"))
    return repo.commit("order")


def _retype(repo: Repo) -> str:
    repo.write(
        "app/pkg/models.py",
        "from dataclasses import dataclass\n\n\n@dataclass\nclass Order:\n"
        "    id: int\n    total: float\n",
    )
    return repo.commit("total")


def test_a_changed_diagram_is_read_again(repo: Repo) -> None:
    base = _model(repo)
    _retype(repo)
    assert kinds(repo.check(base)) == [("field-added", "total")]
    # The diagram drawn: the check passes.
    repo.write(
        DATA,
        mermaid_doc(
            "classDiagram\n    class Order {\n        +int id\n        +float total\n    }"
        ),
    )
    repo.commit("drawn")
    assert kinds(repo.check(base)) == []


def _git(root: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-c", "user.name=T", "-c", "user.email=t@e", *args],
        cwd=root,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()


def test_two_merge_bases_are_left_to_git_merge_base(repo: Repo) -> None:
    """A criss-cross history: ``rev-parse b...h`` names two bases; ``git merge-base`` picks."""
    root = repo.root
    start = _model(repo)
    _git(root, "checkout", "-q", "-b", "side", start)
    repo.write("app/pkg/a.py", "X = 1\n")
    side1 = repo.commit("side 1")
    _git(root, "checkout", "-q", "main")
    repo.write("app/pkg/b.py", "Y = 1\n")
    main1 = repo.commit("main 1")
    _git(root, "merge", "-q", "--no-edit", side1)
    _git(root, "checkout", "-q", "side")
    _git(root, "merge", "-q", "--no-edit", main1)
    _retype(repo)
    report = analyze(root, "main", "side")
    mb = _git(root, "merge-base", "main", "side")
    assert report.merge_base == mb
    both = (_git(root, "rev-parse", "main"), _git(root, "rev-parse", "side"))
    assert report == analyze_commits(root, both[0], both[1])


def test_an_arrow_inside_quotes_links_nothing() -> None:
    assert mermaid._flow_edges('a["x"] --> b') == [("a", "b")]
    assert mermaid._flow_edges('a["x --> y"]') == []
