"""The analyzer end to end: paths and Mermaid read as their regexes read them, the merge
base taken from the same ``rev-parse`` as the commits, and a broken or
stale cache recomputed, not a crash.
"""

from __future__ import annotations

import pickle
import random
import subprocess
from pathlib import Path

import pytest
from dcrepo import DATA, Repo, kinds, mermaid_doc

from scaffold.diagramcheck import analyzer, cache, mermaid
from scaffold.diagramcheck.analyzer import analyze, analyze_commits
from scaffold.diagramcheck.cache import cache_file, results_file
from scaffold.diagramcheck.paths import _CLEAN, _is_clean, normalize_path


def test_clean_paths_are_what_the_regex_calls_clean() -> None:
    rnd = random.Random(7)
    samples = ["", ".", "..", "a", ".a", "a.", "a/b", "a//b", "./a", "a/./b", "/a", "a/", "a\\b"]
    samples += ["".join(rnd.choice("ab./\\") for _ in range(rnd.randrange(9))) for _ in range(5000)]
    for path in samples:
        assert _is_clean(path) == bool(_CLEAN.match(path)), path
        if _is_clean(path):
            assert normalize_path(path) == path or path == ""


@pytest.mark.parametrize(
    "lines",
    [
        ["a <b", "c> d.e.f"],  # a tag never spans two lines
        ["x<br/>y.z", "<i>w</i>", "plain"],
        ["a.b.c", "", "q"],
    ],
)
def test_words_of_lines_are_the_words_of_each_line(lines: list[str]) -> None:
    expected: set[str] = set()
    for line in lines:
        expected |= mermaid.words(line)
    assert mermaid._words_of_lines(lines) == expected


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
    from scaffold.diagramcheck.rules import DiagramFile, read_diagram

    text = (
        mermaid_doc("classDiagram\n    class Order") + "\n" + mermaid_doc("flowchart LR\n  a-->b")
    )
    index, blocks = read_diagram(DiagramFile("d.md", text, changed=False))
    assert index == mermaid.index_text(text, "d.md")
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


def test_a_corrupt_results_file_is_recomputed(repo: Repo) -> None:
    base = _model(repo)
    _retype(repo)
    first = repo.check(base)
    assert kinds(first) == [("field-added", "total")]
    path = results_file(cache_file(repo.root / ".git"))
    assert path.exists()
    path.write_bytes(b"\x80\x05garbage")
    assert repo.check(base) == first
    # Every entry damaged (a valid file of broken pickles): each is a miss.
    cache._write(path, dict.fromkeys(cache._load(path) or {"x": b""}, b"\x80\x05broken"))
    assert repo.check(base) == first


def test_a_changed_diagram_is_read_again(repo: Repo) -> None:
    base = _model(repo)
    _retype(repo)
    assert kinds(repo.check(base)) == [("field-added", "total")]
    # The diagram drawn: a new blob, so a new index (not the cached one).
    repo.write(
        DATA,
        mermaid_doc(
            "classDiagram\n    class Order {\n        +int id\n        +float total\n    }"
        ),
    )
    repo.commit("drawn")
    assert kinds(repo.check(base)) == []
    assert kinds(repo.check(base)) == []  # from the cache now


def test_a_stale_diagram_entry_is_not_used(repo: Repo, monkeypatch: pytest.MonkeyPatch) -> None:
    base = _model(repo)
    _retype(repo)
    first = repo.check(base)
    # An entry under a diagram's key that is not an index: a miss, read again.
    bogus = cache.ParseCache(cache_file(repo.root / ".git"))
    for key in list(bogus.results):
        if key.startswith(("mermaid:", "report:", "requirements:")):
            bogus.results[key] = pickle.dumps((["not", "an index"], 3))
    bogus._results_added = 1
    bogus.save()
    read: list[str] = []
    real = analyzer._index_diagrams

    def counting(*args: object, **kwargs: object) -> None:
        read.append("x")
        real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(analyzer, "_index_diagrams", counting)
    assert repo.check(base) == first
    assert read


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
    both = analyzer._resolve_both(root, "main", "side")
    assert both is not None
    assert both[3] is None  # two merge bases: not taken from rev-parse
    report = analyze(root, "main", "side")
    mb = _git(root, "merge-base", "main", "side")
    assert report.merge_base == mb
    assert report == analyze_commits(root, both[0], both[1])


def test_the_merge_base_comes_with_the_commits(repo: Repo, monkeypatch: pytest.MonkeyPatch) -> None:
    base = _model(repo)
    _retype(repo)
    both = analyzer._resolve_both(repo.root, base, "HEAD")
    assert both is not None
    assert both[3] == base
    called: list[str] = []
    monkeypatch.setattr(analyzer.git_diff, "merge_base", lambda *a: called.append("x") or base)
    assert kinds(repo.check(base)) == [("field-added", "total")]
    assert called == []


def test_blob_ids_come_from_git(repo: Repo) -> None:
    from scaffold.diagramcheck.git_diff import BlobReader

    repo.write("docs/x.md", "hello\n")
    repo.commit("x")
    with BlobReader(repo.root) as reader:
        found = reader.read_many_ids(["HEAD:docs/x.md", "HEAD:nothing.md", "HEAD"])
    assert found[0] == (repo.git("rev-parse", "HEAD:docs/x.md"), b"hello\n")
    assert found[1] is None  # missing
    assert found[2] is None  # a commit, not a blob


def test_no_arrow_nor_link_without_the_characters_may_link_looks_for() -> None:
    """_may_link is a pre-check: whatever the arrow and link regexes match, it lets through."""
    rng = random.Random(7)
    alphabet = '-=.~<>|*ox: ab[]"()'
    for _ in range(20000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 12)))
        # What _flow_edges splits at links, once quotes, shapes and classes are gone.
        body = mermaid._QUOTED.sub('""', text)
        body = mermaid._CLASS_SUFFIX.sub("", mermaid._NODE_SHAPE.sub(r"\1", body))
        if (
            mermaid._DANGLING_END.search(text)
            or mermaid._DANGLING_START.match(text)
            or mermaid._LINK.search(body)
        ):
            assert mermaid._may_link(text) or ":::" in text, text
    assert mermaid._flow_edges('a["x"] --> b') == [("a", "b")]
    assert mermaid._flow_edges('a["x --> y"]') == []


def test_the_inputs_key_covers_every_field_of_a_change() -> None:
    import dataclasses

    from scaffold.diagramcheck.git_diff import RawChange
    from scaffold.diagramcheck.settings import DEFAULTS

    change = RawChange("R", "a/b.py", "a/c.py", "1" * 40, "2" * 40, "100644", "100644", 90)
    trees: dict[analyzer.Side, dict[str, str]] = {"old": {"a/c.py": "1" * 40}, "new": {}}
    keys = {analyzer._inputs_key(DEFAULTS, [change], trees)}
    other = {str: "x", int: 50, type(None): "x"}
    for f in dataclasses.fields(RawChange):
        value = getattr(change, f.name)
        changed = dataclasses.replace(change, **{f.name: other[type(value)]})
        keys.add(analyzer._inputs_key(DEFAULTS, [changed], trees))
    assert len(keys) == 1 + len(dataclasses.fields(RawChange))
