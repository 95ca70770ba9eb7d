"""What DiagramCheck accepts is what GitHub renders: the real Mermaid parser agrees.

``.tools/mermaid-parse.mjs`` runs ``mermaid.parse`` of the pinned npm package in node
(flowchart, classDiagram, stateDiagram-v2, erDiagram and sequenceDiagram are checked here;
all of them parse offline with an inert DOMPurify, no browser needed).
"""

from __future__ import annotations

from pathlib import Path

import corpus
import pytest
import real_mermaid
from dcrepo import Repo
from test_cli import GEN_SOURCES

from harness import REPO
from scaffold.config import DiagramsConfig
from scaffold.diagramcheck import generate
from scaffold.diagramcheck.mermaid import extract_blocks, parse_block

# (source, valid?) as Mermaid sees it; DiagramCheck must say the same.
SAMPLES: list[tuple[str, bool]] = [
    ("flowchart LR\n    a --> b\n", True),
    ('flowchart TD\n    subgraph s["pkg"]\n        a["pkg.a"]\n    end\n    a --> s\n', True),
    ("flowchart LR\n", True),
    ("graph TD\n    A[Start] -->|yes| B{ok?}\n", True),
    ("flowchart LR\n    a --> \n", False),
    ("flowchart LR\n    subgraph s\n        a\n", False),
    ("flowchart XY\n    a --> b\n", False),
    ("classDiagram\n    class User {\n        +int id\n        +list~str~ tags\n    }\n", True),
    ("classDiagram\n    class A\n    A --> B : uses\n", True),
    ('classDiagram\n    note "nothing yet"\n', True),
    ("classDiagram\n", False),
    ("classDiagram\n    %% only a comment\n", False),
    ("classDiagram\n    class User {\n        +int id\n", False),
    ("stateDiagram-v2\n    [*] --> Draft\n    Draft --> Done : submit\n", True),
    ("stateDiagram-v2\n    %% no states found\n", True),
    ("stateDiagram-v2\n    state Busy {\n        a --> b\n    }\n", True),
    ("stateDiagram-v2\n    state Busy {\n        a --> b\n", False),
    ("erDiagram\n    USER ||--o{ ORDER : places\n", True),
    ("sequenceDiagram\n    Alice->>Bob: hi\n", True),
    ("notADiagram\n    a --> b\n", False),
]


def _scaffold_ok(source: str) -> bool:
    [block] = extract_blocks(source, "x.mmd")
    return not parse_block(block).problems


def test_scaffold_and_mermaid_agree_on_the_samples() -> None:
    verdicts = real_mermaid.parse([s for s, _ in SAMPLES])
    wrong = [
        (source, expected, v.detail)
        for (source, expected), v in zip(SAMPLES, verdicts, strict=True)
        if v.ok != expected
    ]
    assert not wrong, f"the samples' expectations are not Mermaid {real_mermaid.version()}'s"
    disagree = [source for source, ok in SAMPLES if _scaffold_ok(source) != ok]
    assert not disagree


def _drafts(repo: Repo, sources: dict[str, str]) -> dict[str, list[str]]:
    for rel, text in sources.items():
        repo.write(rel, text)
    repo.commit("code")
    cfg = DiagramsConfig()
    return generate.drafts(generate.read_sources(repo.root, cfg), cfg, generate.KINDS)


def test_generated_drafts_parse_with_mermaid(repo: Repo) -> None:
    drafts = _drafts(repo, GEN_SOURCES)
    [arch] = drafts["architecture"]
    # The README promises an import graph: pkg.sub.tool imports pkg.flow.
    assert "pkg_pkg_sub --> pkg_pkg" in arch
    bodies = [b for blocks in drafts.values() for b in blocks]
    verdicts = real_mermaid.parse(bodies)
    assert [v for v in verdicts if not v.ok] == []
    assert all(_scaffold_ok(b) for b in bodies)


def test_drafts_of_a_repository_without_data_classes_parse(repo: Repo) -> None:
    drafts = _drafts(repo, {"app/pkg/util.py": "def f() -> int:\n    return 1\n"})
    [data] = drafts["data-model"]
    assert "no data classes found" in data
    bodies = [b for blocks in drafts.values() for b in blocks]
    assert [v.detail for v in real_mermaid.parse(bodies) if not v.ok] == []


@pytest.mark.parametrize(
    "path", sorted((REPO / "docs" / "diagrams").glob("*.md")), ids=lambda p: p.name
)
def test_the_projects_own_diagrams_parse_with_mermaid(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    blocks = extract_blocks(text, str(path))
    assert blocks
    accepted = [b.source for b in blocks if not parse_block(b).problems]
    assert len(accepted) == len(blocks)
    verdicts = real_mermaid.parse(accepted)
    assert [v.detail for v in verdicts if not v.ok] == []


def test_drafts_of_real_projects_parse_with_mermaid(tmp_path: Path) -> None:
    """The drafts of the corpus projects (httpx, attrs, pydantic-settings, transitions, ...)."""
    bodies: list[str] = []
    for archive in sorted(corpus.FIXTURES.glob("*.tar.xz")):
        releases = corpus.releases(archive)
        first = next(iter(releases.values()))
        root = tmp_path / archive.name.removesuffix(".tar.xz")
        root.mkdir()
        corpus.git(root, "init", "-q")
        for rel, data in first.items():
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_bytes(data)
        cfg = DiagramsConfig()
        drafts = generate.drafts(generate.read_sources(root, cfg), cfg, generate.KINDS)
        bodies += [b for blocks in drafts.values() for b in blocks]
    assert len(bodies) >= 3 * 6
    assert all(_scaffold_ok(b) for b in bodies)
    failed = [
        (b[:200], v.detail)
        for b, v in zip(bodies, real_mermaid.parse(bodies), strict=True)
        if not v.ok
    ]
    assert failed == []
