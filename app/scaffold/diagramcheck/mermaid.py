"""Mermaid blocks: found in Markdown or ``.mmd`` files, checked, and read for names.

This is not Mermaid's grammar. It is a tolerant reader that knows enough to
(1) report blocks a renderer would refuse for the usual reasons (no or an
unknown diagram type, unbalanced brackets or quotes, an arrow with no end, an
unclosed ``subgraph``/``{``), and (2) list the names a block mentions: node and
state ids, labels split into words, dotted paths (``a.b.c`` counts as itself
and as ``a``, ``b``, ``c``), class members, and the edges of state diagrams and
flowcharts. Valid diagrams must never be reported, so anything it does not
understand is read for names and otherwise left alone.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

DIAGRAM_TYPES = {
    "flowchart",
    "graph",
    "classDiagram",
    "classDiagram-v2",
    "stateDiagram",
    "stateDiagram-v2",
    "erDiagram",
    "sequenceDiagram",
    "gantt",
    "pie",
    "journey",
    "gitGraph",
    "mindmap",
    "timeline",
    "quadrantChart",
    "requirementDiagram",
    "C4Context",
    "C4Container",
    "C4Component",
    "C4Dynamic",
    "C4Deployment",
    "sankey-beta",
    "xychart-beta",
    "block-beta",
    "packet-beta",
    "architecture-beta",
    "kanban",
    "radar-beta",
    "treemap-beta",
    "zenuml",
    "info",
}

_FENCE = re.compile(r"^(?P<indent> {0,3})(?P<fence>`{3,}|~{3,})\s*(?P<info>[^`]*)$")
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*")
_ARROW = (
    r"(?:<\|--|\*--|o--|<--|--\|>|--\*|--o|-->|---|==>|-\.->|\.\.>|\.\.\|>|<\|\.\.|"
    r"--x|--o|<-->|\.\.|--|==|-\.-)"
)
_DANGLING_END = re.compile(_ARROW + r"\s*(?:\|[^|]*\|)?\s*$")
_DANGLING_START = re.compile(r"^\s*" + _ARROW + r"(?!\s*$)")
_STATE_EDGE = re.compile(r"^\s*(\[\*\]|[\w.\-]+)\s*-->\s*(\[\*\]|[\w.\-]+)\s*(?::.*)?$")
_FLOW_NODE = re.compile(r"[A-Za-z_][\w.\-]*")
_CLASS_OPEN = re.compile(r"^\s*class\s+([\w.\-]+)(?:~[^~]*~)?\s*(?:\[[^\]]*\])?\s*\{\s*$")
_CLASS_MEMBER_LINE = re.compile(r"^\s*([\w.\-]+)\s*:\s*(.+)$")
_ER_OPEN = re.compile(r"^\s*([\w.\-\"]+)\s*(?:\[[^\]]*\])?\s*\{\s*$")
_STATE_DECL = re.compile(r'^\s*state\s+(?:"[^"]*"\s+as\s+)?([\w.\-]+)')
_RELATION = re.compile(r"(<\|--|\*--|o--|--\|>|--\*|--o|-->|<--|\.\.>|<\.\.|\.\.\|>|--|\.\.)")
_HTML_TAG = re.compile(r"</?[a-zA-Z][^>]*>")
_QUOTED = re.compile(r'"[^"]*"')
# A statement of a flowchart line: up to a ``;`` outside double quotes (an open quote
# runs to the end).
_STATEMENT = re.compile(r'(?:[^;"]|"[^"]*(?:"|$))+')
_ASYMMETRIC = re.compile(r"(\w)>([^\]]*)\]")
_EDGE_LABEL = re.compile(r"\|[^|]*\|")
_NODE_SHAPE = re.compile(
    r"(\w)\s*(\[\[|\[\(|\(\(|\[/|\[\\|\{\{|\(\[|[\[({>])[^\n]*?"
    r"(\]\]|\)\]|\)\)|/\]|\\\]|\}\}|\]\)|[\])}])"
)
_CLASS_SUFFIX = re.compile(r":::[\w-]+")
_LINK = re.compile(r"\s*(?:-->|---|==>|-\.->|-\.-|--o|--x|<-->|~~~)\s*(?:\|[^|]*\|)?\s*")
_LINK_TEXT = re.compile(r"^--\s.*$")
_STATE_LABEL = re.compile(r"^([\w.\-]+)\s*:")
# The diagram types read alike under one name.
_FAMILIES = {
    "graph": "flowchart",
    "classDiagram-v2": "classDiagram",
    "stateDiagram-v2": "stateDiagram",
}


@dataclass(frozen=True)
class MermaidBlock:
    """One Mermaid source: ``line`` is the 1-based line of its first source line."""

    source: str
    line: int


@dataclass(frozen=True)
class MermaidProblem:
    line: int
    message: str


@dataclass
class DiagramIndex:
    """What Mermaid names (one block's, or a file's blocks merged), with its problems.

    ``kinds`` holds the type of each block; ``members`` maps a class/entity to the words
    of its body.
    """

    kinds: list[str] = field(default_factory=list)
    names: set[str] = field(default_factory=set)
    members: dict[str, set[str]] = field(default_factory=dict)
    edges: set[tuple[str, str]] = field(default_factory=set)
    states: set[str] = field(default_factory=set)
    problems: list[MermaidProblem] = field(default_factory=list)


def extract_blocks(text: str, path: str = "") -> list[MermaidBlock]:
    """The Mermaid sources of a file: the whole of a ``.mmd`` file, else fenced blocks."""
    if path.endswith((".mmd", ".mermaid")):
        return [MermaidBlock(text, 1)] if text.strip() else []
    blocks: list[MermaidBlock] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        fence, info = m.group("fence"), m.group("info").strip()
        lang = info.split()[0].strip("{}.") if info else ""
        end = i + 1
        while end < len(lines):
            close = lines[end].strip()
            if close.startswith(fence[0] * len(fence)) and set(close) <= {fence[0]}:
                break
            end += 1
        if lang == "mermaid":
            blocks.append(MermaidBlock("\n".join(lines[i + 1 : end]), i + 2))
        i = end + 1
    return blocks


def words(text: str) -> set[str]:
    """Every identifier-like word, dotted paths whole and split."""
    found = set(_WORD.findall(_HTML_TAG.sub(" ", text)))
    for word in [w for w in found if "." in w]:
        parts = word.split(".")
        found.update(parts)
        # Every dotted suffix as well: ``a.b.c`` -> ``b.c``.
        found.update(".".join(parts[i:]) for i in range(1, len(parts)))
    return found


def _balanced(line: str, kind: str) -> str | None:
    """Why a statement's brackets or quotes do not pair up, or ``None``."""
    if line.count('"') % 2:
        return "unbalanced double quote"
    bare = _QUOTED.sub('""', line)
    if kind in ("stateDiagram", "classDiagram", "erDiagram") and " : " in bare:
        bare = bare.split(" : ", 1)[0]
    if kind == "flowchart":
        # ``id>label]`` is the asymmetric shape: its ``]`` closes a ``>``.
        bare = _ASYMMETRIC.sub(r"\1\2", bare)
        bare = _EDGE_LABEL.sub("", bare)  # edge labels
    pairs = {")": "(", "]": "[", "}": "{"}
    stack: list[str] = []
    for ch in bare:
        if ch in "([{":
            stack.append(ch)
        elif ch in pairs:
            if not stack or stack[-1] != pairs[ch]:
                return f"unexpected '{ch}'"
            stack.pop()
    if stack and not (kind in ("classDiagram", "stateDiagram", "erDiagram") and stack == ["{"]):
        return f"unclosed '{stack[-1]}'"
    return None


def _flow_edges(line: str) -> list[tuple[str, str]]:
    """``a --> b --> c`` and ``a -- text --> b``: consecutive node ids joined by links."""
    body = _QUOTED.sub('""', line)
    body = _NODE_SHAPE.sub(r"\1", body)
    body = _CLASS_SUFFIX.sub("", body)
    parts = _LINK.split(body)
    ids: list[list[str]] = []
    for raw in parts:
        part = _LINK_TEXT.sub("", raw.strip())
        names = [n.strip() for n in part.split("&")]
        ids.append([n for n in names if _FLOW_NODE.fullmatch(n)])
    edges: list[tuple[str, str]] = []
    for left, right in itertools.pairwise(ids):
        edges += [(a, b) for a in left for b in right]
    return edges


def _skip_preamble(lines: list[str]) -> int:
    """Index of the diagram-type line: after frontmatter, directives and comments."""
    idx = 0
    while idx < len(lines) and not lines[idx].strip():
        idx += 1
    if idx < len(lines) and lines[idx].strip() == "---":
        idx += 1
        while idx < len(lines) and lines[idx].strip() != "---":
            idx += 1
        idx += 1
    # Comments and ``%%{init: ...}%%`` directives both start with ``%%``.
    while idx < len(lines) and (not lines[idx].strip() or lines[idx].strip().startswith("%%")):
        idx += 1
    return idx


class _Reader:
    """Reads the statements of one structured diagram into a :class:`DiagramIndex`."""

    def __init__(self, diagram: DiagramIndex, kind: str, line: int) -> None:
        self.d = diagram
        self.kind = kind
        self.line = line
        self.open: list[tuple[str, int]] = []  # ("subgraph" | "{", line)
        self.current: str | None = None  # the class/entity whose body we are in
        self.body: list[str] = []  # its statements so far (read for words when it closes)
        self.handler = {
            "flowchart": self.flowchart,
            "classDiagram": self.class_diagram,
            "erDiagram": self.er_diagram,
            "stateDiagram": self.state_diagram,
        }[kind]

    def problem(self, line: int, message: str) -> None:
        self.d.problems.append(MermaidProblem(line, message))

    def close(self, n: int, closer: str = "'}' without '{'") -> None:
        if not self.open:
            self.problem(n, closer)
        else:
            self.open.pop()

    def statement(self, stmt: str, n: int) -> None:
        if self.current is not None and stmt != "}":
            self.body.append(stmt)
            return
        if stmt == "}":  # closes a class, entity, namespace or composite state
            self.end_body()
            if self.kind != "flowchart":
                self.close(n)
            return
        problem = _balanced(stmt, self.kind)
        if problem:
            self.problem(n, f"{problem}: {stmt}")
            return
        if not (self.kind == "stateDiagram" and stmt == "--") and (
            _DANGLING_END.search(stmt) or _DANGLING_START.match(stmt)
        ):
            self.problem(n, f"arrow without an end: {stmt}")
            return
        self.handler(stmt, n)

    def open_body(self, owner: str, n: int) -> None:
        self.current = owner
        self.d.members.setdefault(owner, set())
        self.open.append(("{", n))

    def end_body(self) -> None:
        """The words of the body just read go to its class or entity."""
        if self.current is not None:
            self.d.members.setdefault(self.current, set()).update(*map(words, self.body))
        self.current = None
        self.body = []

    def flowchart(self, stmt: str, n: int) -> None:
        first = stmt.split(maxsplit=1)[0]
        if first == "subgraph":
            self.open.append(("subgraph", n))
        elif stmt == "end":
            self.close(n, "'end' without 'subgraph'")
        elif first not in ("classDef", "class", "click", "style", "linkStyle", "direction"):
            self.d.edges.update(_flow_edges(stmt))

    def class_diagram(self, stmt: str, n: int) -> None:
        if m := _CLASS_OPEN.match(stmt):
            self.open_body(m.group(1), n)
        elif stmt.startswith("namespace ") and stmt.endswith("{"):
            self.open.append(("{", n))
        elif (m := _CLASS_MEMBER_LINE.match(stmt)) and not _RELATION.search(
            stmt.split(":", maxsplit=1)[0]
        ):
            self.d.members.setdefault(m.group(1), set()).update(words(m.group(2)))

    def er_diagram(self, stmt: str, n: int) -> None:
        if (m := _ER_OPEN.match(stmt)) and "--" not in stmt:
            self.open_body(m.group(1).strip('"'), n)

    def state_diagram(self, stmt: str, n: int) -> None:
        if m := _STATE_EDGE.match(stmt):
            a, b = m.group(1), m.group(2)
            self.d.edges.add((a, b))
            self.d.states.update(s for s in (a, b) if s != "[*]")
        elif m := _STATE_DECL.match(stmt):
            self.d.states.add(m.group(1))
            if stmt.endswith("{"):
                self.open.append(("{", n))
        elif (m := _STATE_LABEL.match(stmt)) and not stmt.startswith(
            ("note", "direction", "classDef", "class ")
        ):
            self.d.states.add(m.group(1))

    def finish(self) -> None:
        unclosed = self.current is not None
        self.end_body()
        if unclosed or self.open:
            what, where = self.open[-1] if self.open else ("{", self.line)
            self.problem(where, f"'{what}' opened here is never closed")


def parse_block(block: MermaidBlock) -> DiagramIndex:
    """Check one block and collect what it names (see the module docstring)."""
    raw_lines = block.source.splitlines()
    offset = block.line
    idx = _skip_preamble(raw_lines)
    if idx >= len(raw_lines):
        return DiagramIndex([""], problems=[MermaidProblem(offset, "empty Mermaid block")])
    first, *rest = raw_lines[idx].split()
    header = first.rstrip(";")
    diagram = DiagramIndex([header])
    if header not in DIAGRAM_TYPES:
        diagram.problems.append(MermaidProblem(offset + idx, f"unknown diagram type {header!r}"))
        diagram.names |= words(block.source)
        return diagram
    kind = _FAMILIES.get(header, header)
    if kind == "flowchart" and rest:
        direction = rest[0].rstrip(";")
        if direction not in ("TB", "TD", "BT", "RL", "LR"):
            diagram.problems.append(
                MermaidProblem(offset + idx, f"unknown flowchart direction {direction!r}")
            )
    structured = kind in ("flowchart", "classDiagram", "stateDiagram", "erDiagram")
    reader = _Reader(diagram, kind, offset + idx) if structured else None
    statements_seen = 0
    for n, raw in enumerate(raw_lines[idx + 1 :], start=offset + idx + 1):
        line = raw.strip()
        if not line or line.startswith("%%"):
            continue
        statements_seen += 1
        diagram.names |= words(line)
        if reader is None:
            continue
        if kind == "flowchart":
            for stmt in filter(str.strip, _STATEMENT.findall(line)):
                reader.statement(stmt.strip(), n)
        else:
            reader.statement(line, n)
    if reader is not None:
        reader.finish()
    if kind == "classDiagram" and not statements_seen:
        # Mermaid's own grammar refuses these headers alone (GitHub shows an error).
        diagram.problems.append(
            MermaidProblem(offset + idx, f"an empty {header} does not render: draw something")
        )
    return diagram


def index_blocks(blocks: Iterable[MermaidBlock]) -> DiagramIndex:
    """Parse Mermaid blocks (of one file) into one :class:`DiagramIndex`."""
    index = DiagramIndex()
    for block in blocks:
        parsed = parse_block(block)
        index.kinds += parsed.kinds
        index.names |= parsed.names
        index.edges |= parsed.edges
        index.states |= parsed.states
        for owner, body in parsed.members.items():
            index.members.setdefault(owner, set()).update(body)
        index.problems += parsed.problems
    return index
