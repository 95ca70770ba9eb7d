"""``read_module_fast`` (top-level statements parsed one by one, reused by text) gives
exactly what ``read_module`` (one whole ``ast.parse``) gives.

On every Python file of the corpus's releases (each release's files after the previous
ones, as a check sees an old and a new side), on this repository's own code, and on
adversarial files: class-like text in strings and docstrings, decorators, bases on
continuation lines, ``else``/``except`` at column 0, backslash continuations, files that
do not parse. DiagramCheck's findings are the same with either reader.
"""

from __future__ import annotations

from pathlib import Path

import corpus
import pytest
from dcrepo import DATA, Repo, mermaid_doc

from scaffold.diagramcheck import analyze
from scaffold.diagramcheck import python_model as pm

APP = Path(pm.__file__).resolve().parents[1]


def _same(source: str, memo: pm.StatementMemo | None = None) -> pm.ModuleInfo:
    fast = pm.read_module_fast(source, memo if memo is not None else pm.StatementMemo())
    whole = pm.read_module(source)
    assert fast == whole
    return fast


def _corpus_sources() -> list[tuple[str, str]]:
    found: list[tuple[str, str]] = []
    for archive in sorted(corpus.FIXTURES.glob("*.tar.xz")):
        for version, files in corpus.releases(archive).items():
            for path, data in sorted(files.items()):
                if path.endswith((".py", ".pyi")):
                    try:
                        found.append((f"{archive.stem} {version} {path}", data.decode()))
                    except UnicodeDecodeError:
                        continue
    return found


def test_the_corpus_reads_the_same() -> None:
    memo = pm.StatementMemo()  # one batch: later releases reuse the earlier statements
    sources = _corpus_sources()
    assert len(sources) > 500
    for name, source in sources:
        fast = pm.read_module_fast(source, memo)
        assert fast == pm.read_module(source), name
    assert memo.hits > 1000


def test_this_repository_reads_the_same() -> None:
    memo = pm.StatementMemo()
    for path in sorted(APP.rglob("*.py")):
        source = path.read_text(encoding="utf-8")
        assert pm.read_module_fast(source, memo) == pm.read_module(source), path


ADVERSARIAL = {
    "class in a docstring": (
        '"""Module.\n\nclass Fake(Enum):\n    A = 1\n"""\n\nclass Real:\n    x: int\n'
    ),
    "class in a function's string": (
        "def f():\n    return '''\nclass Fake:\n    a: int\n'''\n\n"
        "@dataclass\nclass Real:\n    b: int\n"
    ),
    "string quotes in comments": (
        "# a \"\"\" in a comment\nclass A:\n    x: int  # '''\n\nclass B(A):\n    y: str\n"
    ),
    "quotes in strings": (
        "X = \"'''\"\nclass A:\n    x: int\nY = '\"\"\"'\nclass B:\n    y: int\n"
    ),
    "decorators": (
        "import dataclasses\n\n@dataclasses.dataclass(\n    frozen=True,\n)\n@other\n"
        "class A:\n    x: int\n\n@dataclasses.dataclass\nclass B:\n    y: int\n"
    ),
    "bases on continuation lines": (
        "from pydantic import BaseModel\n\nclass A(\n    BaseModel,\n):\n    x: int\n\n"
        "class B(BaseModel,\nA):\n    y: int\n\nclass C(A, \\\nB):\n    z: int\n"
    ),
    "black-style signature": (
        "def f(\n    a: int,\n) -> int:\n    return a\n\n\nclass A:\n    x: int\n"
    ),
    "else at column 0": (
        "import sys\nif sys.version_info >= (3, 11):\n    class A:\n        x: int\n"
        "else:\n    class A:\n        y: int\ntry:\n    from enum import StrEnum\n"
        "except ImportError:\n    StrEnum = str\nfinally:\n    pass\n"
    ),
    "backslash continuation": ("Color = \\\nEnum\nx = 1 + \\\n2\nclass A(Color):\n    RED = 'r'\n"),
    "alias after use": (
        "from enum import Enum\nclass S(Enum):\n    A = 'a'\n    B = 'b'\n    C = 'c'\n"
        "T = {\n    (L.A, 'go'): L.B,\n    (L.B, 'go'): L.C,\n}\nL = S\n"
    ),
    "functional classes and tables in functions": (
        "from typing import NamedTuple, TypedDict\nfrom enum import Enum\n"
        "P = TypedDict('P', {'a': int,\n 'b': str})\nQ = NamedTuple('Q', [('x', int)])\n"
        "class S(Enum):\n    A = 1\n    B = 2\n\ndef rows():\n"
        "    table = [(S.A, S.B), (S.B, S.A)]\n    return table\n"
    ),
    "no newline at the end": "class A:\n    x: int",
    "indented first line": "  class A:\n    x: int\n",
    "nested brackets at column 0": "X = [\n(1,\n2),\n]\nclass A:\n    x: int\n",
    "syntax error in a function body": (
        "class A:\n    x: int\n\ndef f():\n    return (\n\nclass B:\n    y: int\n"
    ),
    "unterminated string": "class A:\n    x: int\n\nS = '''\nclass B:\n    y: int\n",
    "syntax error at the end": "class A:\n    x: int\n\ndef broken(:\n    pass\n",
    "decorator on nothing": "@dataclass\n\nx = 1\n",
    "NUL byte": "class A:\n    x: int\n\x00\n",
    "tabs": "class A:\n\tx: int\n",
    "CR line ends": "class A:\r\n    x: int\r\n",
    "a Machine": (
        "from transitions import Machine\nclass M:\n    def __init__(self):\n"
        "        self.m = Machine(model=self, states=['a', 'b'],\n"
        "            transitions=[['go', 'a', 'b']])\n"
    ),
    "match statement": (
        "match x:\n    case 1:\n        pass\n    case _:\n        pass\nclass A:\n    x: int\n"
    ),
}


@pytest.mark.parametrize("name", sorted(ADVERSARIAL))
def test_adversarial_files_read_the_same(name: str) -> None:
    _same(ADVERSARIAL[name])


def test_a_string_that_looks_like_a_class_is_not_read() -> None:
    info = _same(ADVERSARIAL["class in a function's string"])
    assert [c.name for c in info.classes] == ["Real"]
    assert info.classes[0].line == 8


def test_errors_are_the_whole_parse_errors() -> None:
    for name in ("syntax error in a function body", "unterminated string", "NUL byte"):
        info = _same(ADVERSARIAL[name])
        assert info.error is not None, name
        assert info.classes == ()


def test_a_statement_reused_at_another_line_keeps_its_own_lines() -> None:
    memo = pm.StatementMemo()
    shared = "@dataclass\nclass Item:\n    id: int\n    size: float\n"
    first = _same("import x\n\n" + shared, memo)
    second = _same("import x\nimport y\n\n\n\n" + shared, memo)
    assert memo.hits >= 1
    assert [(f.name, f.line) for f in first.classes[0].fields] == [("id", 5), ("size", 6)]
    assert [(f.name, f.line) for f in second.classes[0].fields] == [("id", 8), ("size", 9)]


def test_the_memo_forgets_past_its_limit() -> None:
    memo = pm.StatementMemo(limit=40)
    for i in range(10):
        _same(f"class A{i}:\n    x: int = {i}\n\nclass B{i}:\n    y: str\n", memo)
    assert memo.chars <= 40


def test_cuts_follow_statements_not_strings() -> None:
    source = ADVERSARIAL["class in a docstring"]
    assert pm.statement_starts(source) == [0, source.index("class Real")]
    black = ADVERSARIAL["black-style signature"]
    assert pm.statement_starts(black) == [0, black.index("class A")]
    decorated = ADVERSARIAL["decorators"]
    assert pm.statement_starts(decorated) == [
        0,
        decorated.index("@dataclasses.dataclass(\n"),
        decorated.index("@dataclasses.dataclass\n"),
    ]


def test_findings_are_the_same_with_the_whole_parse(
    repo: Repo, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SCAFFOLD_DIAGRAMCHECK_CACHE", "0")
    base_files = {f"app/pkg/m{i}.py": ADVERSARIAL[name] for i, name in enumerate(ADVERSARIAL)}
    repo.write("app/pkg/__init__.py", "")
    for rel, text in base_files.items():
        repo.write(rel, text)
    repo.write(DATA, mermaid_doc("classDiagram\n  class Real"))
    base = repo.commit("base")
    for i, name in enumerate(ADVERSARIAL):
        text = ADVERSARIAL[name]
        # Every file changed: a field, a member, a decorator, a base, a broken line.
        text = text.replace("x: int", "x: int\n    added: str", 1)
        text = text.replace("@dataclass\n", "@dataclass(frozen=True)\n", 1)
        text = text.replace("(BaseModel,", "(BaseModel, Extra,", 1)
        if i % 5 == 0:
            text += "\ndef oops(:\n"
        repo.write(f"app/pkg/m{i}.py", text)
    repo.commit("change")
    fast = analyze(repo.root, base)

    def whole(source: str, memo: pm.StatementMemo | None = None) -> pm.ModuleInfo:
        return pm.read_module(source)

    monkeypatch.setattr(pm, "read_module_fast", whole)
    slow = analyze(repo.root, base)
    assert fast.findings == slow.findings
    assert fast.findings  # the change asks something of the diagrams
    assert any(f.kind == "python-syntax-error" for f in fast.findings)


def test_plain_annotations_are_written_as_unparse_writes_them() -> None:
    import ast

    checked = 0
    sources = [p.read_text(encoding="utf-8") for p in sorted(APP.rglob("*.py"))]
    sources += [s for _, s in _corpus_sources()[::7]]
    sources.append("x: (a | b).c\ny: (a | b)[c]\nz: a | (b | c)\nw: dict[str, int | None]\n")
    for source in sources:
        try:
            tree = ast.parse(source)
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.expr) and (text := pm._plain_text(node)):
                assert text == ast.unparse(node)
                checked += 1
    assert checked > 10_000


def test_a_parallel_check_reads_the_diagrams_meanwhile_and_finds_the_same(
    repo: Repo, monkeypatch: pytest.MonkeyPatch
) -> None:
    from scaffold.diagramcheck import parse_workers as dc_cache

    monkeypatch.setenv("SCAFFOLD_DIAGRAMCHECK_CACHE", "0")
    repo.write("app/pkg/__init__.py", "")
    repo.write(DATA, mermaid_doc("classDiagram\n  class S0 {\n    A\n  }"))
    base = repo.commit("base")
    for i in range(dc_cache.PARALLEL_MIN_FILES // 2 + 5):
        repo.write(
            f"app/pkg/s{i}.py",
            f"from enum import Enum\n\n\nclass S{i}(Enum):\n    A = 'a'\n    B{i} = 'b'\n",
        )
    repo.commit("many")
    from scaffold.diagramcheck import analyzer

    early: list[int] = []
    real = analyzer._index_diagrams

    def watching(*args: object, **kwargs: object) -> None:
        early.append(len(args))
        real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(analyzer, "_index_diagrams", watching)
    monkeypatch.setattr(dc_cache, "_can_fork", lambda: True)
    monkeypatch.setattr(dc_cache, "PARALLEL_MIN_FILES", 10)
    parallel = analyze(repo.root, base)
    assert len(early) == 2  # the diagrams read meanwhile, then the needed ones
    monkeypatch.setattr(dc_cache, "PARALLEL_MIN_FILES", 10**9)
    serial = analyze(repo.root, base)
    assert len(early) == 3
    assert parallel.findings == serial.findings
    assert parallel.diagrams_checked == serial.diagrams_checked
    assert any(f.kind != "module-added" for f in serial.findings)
