"""DiagramCheck's rules: what a diff requires of the diagrams, and whether they have it.

The functional core. :func:`requirements` reads the old and new text of the
changed files (a :class:`DiffInput`, built by the analyzer from git) and lists
:class:`Requirement` s: this diagram must name that, or must no longer name
it. :func:`judge` holds them against the diagrams as they are at the head and
returns the :class:`~scaffold.diagramcheck.findings.Finding` s that are not
met. Neither touches git or the disk.

Which diagram: new, moved or deleted modules -> ``architecture``; data classes
(dataclasses, pydantic models, attrs classes, TypedDicts, NamedTuples,
SQLAlchemy models, Enums) -> ``data_model``; states (Enums named ``*State`` /
``*Status`` or keyed in a transition table, python-statemachine and
``transitions`` machines, ``stateDiagram`` sources outside the diagrams) ->
``states``; Backlog.md milestones -> ``roadmap``.
"""

from __future__ import annotations

import ast
import functools
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Literal

from scaffold.diagramcheck import mermaid
from scaffold.diagramcheck import python_model as pm
from scaffold.diagramcheck.findings import Finding
from scaffold.diagramcheck.milestones import BacklogEntry, backlog_kind
from scaffold.diagramcheck.paths import matches_any, module_name, normalize_path, under_roots
from scaffold.diagramcheck.settings import DiagramSettings

Side = Literal["old", "new"]
Match = Literal["name", "state", "edge", "text"]

# Type words a diagram need not repeat (``Optional[int]`` is drawn ``int?`` or ``int``).
_TYPE_NOISE = frozenset(
    {"Optional", "Union", "None", "typing", "t", "te", "typing_extensions", "Any", "builtins"}
)
_MAX_DRAFT_FIELDS = 40


@dataclass(frozen=True)
class SourceChange:
    """A changed file the rules read: its old and new text (``None`` where absent).

    ``old_binary``/``new_binary`` mark a side that is binary or not UTF-8.
    """

    status: str
    path: str
    old_path: str | None = None
    old_text: str | None = None
    new_text: str | None = None
    old_binary: bool = False
    new_binary: bool = False
    # Python already parsed (by the analyzer, or from its cache): stands for the text.
    old_info: pm.ModuleInfo | None = None
    new_info: pm.ModuleInfo | None = None

    @property
    def source_path(self) -> str:
        return self.old_path if self.old_path is not None else self.path


@dataclass(frozen=True)
class DiagramFile:
    """A configured diagram at the head: its text (``None`` if absent), changed or not.

    ``index`` is what :func:`read_diagram` finds in it, when the analyzer has it
    already (from its cache)."""

    path: str
    text: str | None
    changed: bool
    index: tuple[mermaid.DiagramIndex, str] | None = None


def read_diagram(dfile: DiagramFile) -> tuple[mermaid.DiagramIndex, str]:
    """What a diagram file names, and the text of its Mermaid blocks."""
    text = dfile.text or ""
    blocks = mermaid.extract_blocks(text, dfile.path)
    return mermaid.index_blocks(blocks), "\n".join(b.source for b in blocks)


@dataclass(frozen=True)
class DiffInput:
    """Everything the rules need, read from git by the analyzer."""

    changes: tuple[SourceChange, ...]
    diagrams: Mapping[str, DiagramFile]
    packages_old: frozenset[str] = frozenset()
    packages_new: frozenset[str] = frozenset()
    # Backlog.md at the head, read only when a task changed: every task and milestone.
    head_tasks: tuple[BacklogEntry, ...] = ()
    head_milestones: tuple[BacklogEntry, ...] = ()
    # Every changed path (including those the rules do not read), for "was it updated".
    changed_paths: frozenset[str] = frozenset()
    # Every ``.py``/``.pyi`` path of the merge base and of the head (a stub whose
    # module is there describes that module and is not read twice).
    python_old: frozenset[str] = frozenset()
    python_new: frozenset[str] = frozenset()
    # A module of the repository by dotted name on one side, parsed (None when the
    # repository has no such module): where a changed class's bases are looked up.
    lookup: Callable[[Side, str], pm.ModuleInfo | None] | None = None


@dataclass(frozen=True)
class Requirement:
    """``diagram`` must name one of ``accept`` (or, with ``remove``, none of them).

    ``scope`` confines the search to a class's body when the diagram draws one;
    ``also`` lists words that must appear there too (a retyped field's type).
    ``match`` is ``state`` for state names (compared loosely: case, ``_`` and
    ``-`` ignored), ``edge`` for a transition ``accept -> target``, ``text`` for
    titles searched in the Mermaid text.
    """

    kind: str
    diagram: str
    source: str
    line: int
    name: str
    what: str
    accept: tuple[str, ...]
    remove: bool = False
    scope: str | None = None
    also: tuple[str, ...] = ()
    match: Match = "name"
    target: tuple[str, ...] = ()
    draft: tuple[str, ...] = ()
    # False: met when the diagram names it, changed in this diff or not (a move
    # that keeps the name asks nothing new of an up-to-date diagram).
    needs_change: bool = True


@dataclass
class _Analysis:
    """The parsed modules of a diff, both sides."""

    pairs: list[tuple[SourceChange, pm.ModuleInfo | None, pm.ModuleInfo | None]] = field(
        default_factory=list
    )
    kinds_old: dict[str, str] = field(default_factory=dict)
    kinds_new: dict[str, str] = field(default_factory=dict)
    state_enums: set[str] = field(default_factory=set)


# --------------------------------------------------------------------------- helpers


# The small text helpers below are pure and see the same few type names and identifiers
# over and over in a big diff: their answers are kept.


@functools.lru_cache(maxsize=16384)
def _mermaid_id(name: str) -> str:
    return re.sub(r"\W", "_", name)


@functools.lru_cache(maxsize=16384)
def _type_words(type_text: str) -> tuple[str, ...]:
    found = re.findall(r"[A-Za-z_][A-Za-z0-9_]*", type_text)
    return tuple(dict.fromkeys(w for w in found if w not in _TYPE_NOISE))


@functools.lru_cache(maxsize=16384)
def mermaid_type(type_text: str) -> str:
    """A field type spelled the way a Mermaid class diagram accepts (``list~str~``)."""
    text = type_text.replace(" ", "").replace(",...", "").replace("[", "~").replace("]", "~")
    text = text.replace('"', "").replace("'", "")
    return re.sub(r"[^\w~,|.?]", "", text)


def _field_line(f: pm.FieldInfo) -> str:
    typ = mermaid_type(f.type)
    return f"+{typ} {f.name}" if typ else f"+{f.name}"


def _class_draft(cls: pm.ClassInfo, kind: str) -> tuple[str, ...]:
    lines = [f"    class {cls.name} {{"]
    if kind == pm.ENUM:
        lines.append("        <<enumeration>>")
        lines += [f"        {m.value or m.name}" for m in cls.members[:_MAX_DRAFT_FIELDS]]
    else:
        lines += [f"        {_field_line(f)}" for f in cls.fields[:_MAX_DRAFT_FIELDS]]
    lines.append("    }")
    return tuple(lines)


_TYPING_PREFIXES = ("typing.", "typing_extensions.", "t.", "te.")
_BUILTIN_GENERICS = {
    "List": "list",
    "Dict": "dict",
    "Set": "set",
    "FrozenSet": "frozenset",
    "Tuple": "tuple",
    "Type": "type",
    "Text": "str",
}


def _canonical_type(node: ast.expr) -> str:
    """One spelling per type: ``Optional[int]``, ``Union[int, None]`` and ``int | None``
    agree, as do ``typing.List[str]`` and ``list[str]``."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        try:
            return _canonical_type(ast.parse(node.value, mode="eval").body)
        except SyntaxError:
            return node.value.replace(" ", "")
    members = _union_members(node)
    if members is not None:
        return "|".join(sorted(set(members)))
    if isinstance(node, ast.Subscript):
        args = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        inner = ",".join(_canonical_type(a) for a in args)
        return f"{_canonical_type(node.value)}[{inner}]"
    if isinstance(node, ast.List | ast.Tuple):
        return "[" + ",".join(_canonical_type(e) for e in node.elts) + "]"
    text = ast.unparse(node).replace(" ", "")
    for prefix in _TYPING_PREFIXES:
        if text.startswith(prefix):
            text = text[len(prefix) :]
            break
    return _BUILTIN_GENERICS.get(text, text)


def _union_members(node: ast.expr) -> list[str] | None:
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        left = _union_members(node.left) or [_canonical_type(node.left)]
        right = _union_members(node.right) or [_canonical_type(node.right)]
        return left + right
    if isinstance(node, ast.Subscript):
        head = _canonical_type(node.value)
        args = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        if head == "Optional" and len(args) == 1:
            return [*(_union_members(args[0]) or [_canonical_type(args[0])]), "None"]
        if head == "Union":
            out: list[str] = []
            for a in args:
                out += _union_members(a) or [_canonical_type(a)]
            return out
    return None


@functools.lru_cache(maxsize=16384)
def same_type(a: str, b: str) -> bool:
    """Whether two annotations, as written, name the same type."""
    if _norm(a) == _norm(b):
        return True
    try:
        left = _canonical_type(ast.parse(a, mode="eval").body)
        right = _canonical_type(ast.parse(b, mode="eval").body)
    except (SyntaxError, ValueError, RecursionError):
        return False
    return left == right


@functools.lru_cache(maxsize=65536)
def _norm(name: str) -> str:
    return re.sub(r"[_\-\s]", "", name).lower()


def _is_python(path: str) -> bool:
    return path.endswith((".py", ".pyi"))


def _is_mermaid_source(path: str, diagram_paths: set[str]) -> bool:
    """A dedicated Mermaid file (``.mmd``/``.mermaid``) outside the configured diagrams.

    Markdown is never a state source: a Mermaid block in a README or a guide is an
    example or an illustration, not a machine the diagrams must follow.
    """
    return path not in diagram_paths and path.endswith((".mmd", ".mermaid"))


# --------------------------------------------------------------------------- modules


def _module_requirements(
    change: SourceChange, old_ok: bool, new_ok: bool, cfg: DiagramSettings, data: DiffInput
) -> list[Requirement]:
    """A module that appears (added, copied, moved in) or disappears (deleted, moved out)."""
    arch = normalize_path(cfg.architecture)
    new_name = module_name(change.path, cfg.source_roots, data.packages_new) if new_ok else None
    old_name = (
        module_name(change.source_path, cfg.source_roots, data.packages_old) if old_ok else None
    )
    copied = change.status == "C"
    out: list[Requirement] = []
    if new_name and (new_name != old_name or copied):
        last = new_name.rsplit(".", 1)[-1]
        what = "package" if change.path.endswith("__init__.py") else "module"
        moved = f", moved from {change.old_path}" if change.status == "R" and old_ok else ""
        out.append(
            Requirement(
                kind="module-added",
                diagram=arch,
                source=change.path,
                line=1,
                name=new_name,
                what=f"{what} `{new_name}` ({change.path}{moved})",
                accept=(new_name, last),
                draft=(f'    {_mermaid_id(new_name)}["{new_name}"]',),
            )
        )
    if old_name and old_name != new_name and not copied:
        out.append(
            Requirement(
                kind="module-removed",
                diagram=arch,
                source=change.source_path,
                line=1,
                name=old_name,
                what=(
                    f"module `{old_name}` (moved to {change.path})"
                    if new_ok
                    else f"module `{old_name}` ({change.source_path} is gone)"
                ),
                accept=(old_name,),
                remove=True,
            )
        )
    return out


# --------------------------------------------------------------------------- classes


_MAX_BASE_DEPTH = 4


def _resolve_relative(ref: str, module: str, is_package: bool) -> str:
    """``..base.Model`` seen from ``module`` -> ``pkg.base.Model``."""
    level = len(ref) - len(ref.lstrip("."))
    parts = module.split(".") if module else []
    keep = len(parts) - level + (1 if is_package else 0)
    prefix = ".".join(parts[: max(keep, 0)])
    rest = ref[level:]
    return f"{prefix}.{rest}".strip(".") if prefix else rest


def _inherited(
    parsed: Sequence[tuple[SourceChange, pm.ModuleInfo | None, pm.ModuleInfo | None]],
    side: Side,
    kinds: Mapping[str, str],
    cfg: DiagramSettings,
    data: DiffInput,
) -> list[pm.ClassInfo]:
    """Base classes from unchanged modules of the repository that give a changed class its kind.

    A class whose kind is unknown and whose base is imported (``from .base import
    Model``) has that base looked up in the module it comes from, and so on up
    to a few levels; what is found only classifies, it is not compared.
    """
    lookup = data.lookup
    if lookup is None:
        return []
    packages = data.packages_old if side == "old" else data.packages_new
    known = set(kinds)
    todo: list[tuple[pm.ClassInfo, str, bool]] = []
    for change, old, new in parsed:
        info = old if side == "old" else new
        if info is None:
            continue
        unknown = [c for c in info.classes if c.name not in known]
        if unknown:  # the module's name only for classes still without a kind
            path = change.source_path if side == "old" else change.path
            module = module_name(path.removesuffix("i"), cfg.source_roots, packages) or ""
            is_pkg = path.endswith(("__init__.py", "__init__.pyi"))
            todo += [(c, module, is_pkg) for c in unknown]
        known.update(c.name for c in info.classes)
    extra: list[pm.ClassInfo] = []
    seen: set[str] = set()
    for _ in range(_MAX_BASE_DEPTH):
        wanted: list[str] = []
        for cls, module, is_pkg in todo:
            for base in cls.bases:
                if "." not in base or base.rpartition(".")[2] in known:
                    continue
                full = _resolve_relative(base, module, is_pkg) if base.startswith(".") else base
                if full not in seen:
                    seen.add(full)
                    wanted.append(full)
        todo = []
        for full in wanted:
            mod, _, name = full.rpartition(".")
            info = lookup(side, mod) if mod else None
            hops = 0
            while info is not None and info.class_named(name) is None and hops < 2:
                # A re-export: ``from .models import Model`` in a package's __init__.
                ref = info.imported.get(name)
                if ref is None:
                    info = None
                    break
                mod, _, name = _resolve_relative(ref, mod, True).rpartition(".")
                info = lookup(side, mod) if mod else None
                hops += 1
            found = info.class_named(name) if info is not None else None
            if found is None or found.name in known:
                continue
            known.add(found.name)
            extra.append(found)
            todo.append((found, mod, False))
        if not todo:
            break
    return extra


def _analyse(
    parsed: Sequence[tuple[SourceChange, pm.ModuleInfo | None, pm.ModuleInfo | None]],
    cfg: DiagramSettings,
    data: DiffInput | None = None,
) -> _Analysis:
    result = _Analysis()
    old_classes: list[pm.ClassInfo] = []
    new_classes: list[pm.ClassInfo] = []
    old_bases: list[str] = []
    new_bases: list[str] = []
    for change, old, new in parsed:
        result.pairs.append((change, old, new))
        if old is not None:
            old_classes += old.classes
            old_bases += old.declarative_bases
        if new is not None:
            new_classes += new.classes
            new_bases += new.declarative_bases
    result.kinds_old = pm.classify(old_classes, old_bases)
    result.kinds_new = pm.classify(new_classes, new_bases)
    if data is not None and data.lookup is not None:
        for side in ("old", "new"):
            classes = old_classes if side == "old" else new_classes
            bases = old_bases if side == "old" else new_bases
            kinds = result.kinds_old if side == "old" else result.kinds_new
            extra = _inherited(parsed, side, kinds, cfg, data)
            if extra:
                kinds = pm.classify([*extra, *classes], bases)
                if side == "old":
                    result.kinds_old = kinds
                else:
                    result.kinds_new = kinds
    suffixes = tuple(cfg.state_enum_suffixes)
    for _, old, new in result.pairs:
        for info in (old, new):
            if info is None:
                continue
            result.state_enums.update(t.enum for t in info.tables)
            for machine in info.machines:
                result.state_enums.update(
                    s.name.removeprefix("@enum:")
                    for s in machine.states
                    if s.name.startswith("@enum:")
                )
    for kinds in (result.kinds_old, result.kinds_new):
        result.state_enums.update(
            n for n, k in kinds.items() if k == pm.ENUM and suffixes and n.endswith(suffixes)
        )
    return result


@dataclass(frozen=True)
class _Located:
    cls: pm.ClassInfo
    path: str
    kind: str


def _data_classes(
    analysis: _Analysis, cfg: DiagramSettings, side: Literal["old", "new"]
) -> dict[str, _Located]:
    kinds = analysis.kinds_old if side == "old" else analysis.kinds_new
    found: dict[str, _Located] = {}
    for change, old, new in analysis.pairs:
        info = old if side == "old" else new
        path = change.source_path if side == "old" else change.path
        if info is None:
            continue
        if cfg.data_model_sources and not matches_any(path, cfg.data_model_sources):
            continue
        for cls in info.classes:
            if cls.name.startswith("_"):  # private helpers are not the data model
                continue
            kind = kinds.get(cls.name)
            if kind in pm.DATA_KINDS or kind == pm.STATEMACHINE:
                found.setdefault(cls.name, _Located(cls, path, kind or ""))
    return found


def _same_fields(old: Sequence[pm.FieldInfo], new: Sequence[pm.FieldInfo]) -> bool:
    """The same names and types in the same order (lines aside): nothing to require."""
    return len(old) == len(new) and all(
        a.name == b.name and a.type == b.type for a, b in zip(old, new, strict=True)
    )


def _field_requirements(old: _Located, new: _Located, diagram: str) -> list[Requirement]:
    if _same_fields(old.cls.fields, new.cls.fields):
        return []
    cls = new.cls.name
    label = f"{new.kind} `{cls}`"
    out: list[Requirement] = []
    old_fields = {f.name: f for f in old.cls.fields}
    new_fields = {f.name: f for f in new.cls.fields}
    added = [f for n, f in new_fields.items() if n not in old_fields]
    removed = [f for n, f in old_fields.items() if n not in new_fields]
    if len(added) == 1 and len(removed) == 1:
        a, r = added[0], removed[0]
        out.append(
            Requirement(
                "field-renamed",
                diagram,
                new.path,
                a.line,
                a.name,
                f"field `{a.name}` of {label} (renamed from `{r.name}`)",
                (a.name,),
                scope=cls,
                draft=(f"    {cls} : {_field_line(a)}",),
            )
        )
        out.append(
            Requirement(
                "field-renamed",
                diagram,
                old.path,
                r.line,
                r.name,
                f"field `{r.name}` of {label} (renamed to `{a.name}`)",
                (r.name,),
                remove=True,
                scope=cls,
            )
        )
        added, removed = [], []
    for f in added:
        typed = f"`{f.name}: {f.type}`" if f.type else f"`{f.name}`"
        out.append(
            Requirement(
                "field-added",
                diagram,
                new.path,
                f.line,
                f.name,
                f"field {typed} of {label}",
                (f.name,),
                scope=cls,
                also=_type_words(f.type),
                draft=(f"    {cls} : {_field_line(f)}",),
            )
        )
    for f in removed:
        out.append(
            Requirement(
                "field-removed",
                diagram,
                old.path,
                f.line,
                f.name,
                f"field `{f.name}` of {label}",
                (f.name,),
                remove=True,
                scope=cls,
            )
        )
    for name, f in new_fields.items():
        before = old_fields.get(name)
        if before is None or not f.type or same_type(before.type, f.type):
            continue
        out.append(
            Requirement(
                "field-retyped",
                diagram,
                new.path,
                f.line,
                f.name,
                f"field `{f.name}` of {label} retyped from `{before.type or '?'}` to `{f.type}`",
                (f.name,),
                scope=cls,
                also=_type_words(f.type),
                draft=(f"    {cls} : {_field_line(f)}",),
            )
        )
    return out


def _member_requirements(
    old_members: Sequence[pm.MemberInfo],
    new_members: Sequence[pm.MemberInfo],
    owner: str,
    label: str,
    diagram: str,
    old_path: str,
    new_path: str,
    as_states: bool,
) -> list[Requirement]:
    """Enum members (data model) or states (state diagram) added, removed, renamed."""
    if (
        len(old_members) == len(new_members)
        and all(
            a.name == b.name and a.value == b.value
            for a, b in zip(old_members, new_members, strict=True)
        )
        and len({m.name for m in new_members}) == len(new_members)
    ):
        return []  # the same names (each once) and values, in order: nothing to require
    kind = "state" if as_states else "member"
    match: Match = "state" if as_states else "name"
    scope = None if as_states else owner
    old_by = {m.name: m for m in old_members}
    new_by = {m.name: m for m in new_members}
    out: list[Requirement] = []
    for m in new_members:
        before = old_by.get(m.name)
        if before is not None and before.value == m.value:
            continue
        renamed_from = next(
            (o for o in old_members if o.name not in new_by and m.value and o.value == m.value),
            None,
        )
        note = f" (renamed from `{renamed_from.name}`)" if renamed_from else ""
        if before is not None:
            note = f" (value changed from {before.value!r})"
        shown = f"`{m.name}`" + (f" = {m.value!r}" if m.value and m.value != m.name else "")
        draft = (
            f"    state {_mermaid_id(m.value or m.name)}"
            if as_states
            else f"    {owner} : {m.value or m.name}",
        )
        out.append(
            Requirement(
                f"{kind}-added" if before is None and not renamed_from else f"{kind}-changed",
                diagram,
                new_path,
                m.line,
                m.name,
                f"{kind} {shown} of {label}{note}",
                m.aliases if before is None else ((m.value,) if m.value else m.aliases),
                scope=scope,
                match=match,
                draft=draft,
            )
        )
    for o in old_members:
        after = new_by.get(o.name)
        if after is not None and after.value == o.value:
            continue
        gone = tuple(
            a
            for a in o.aliases
            if not any(
                a in n.aliases or (as_states and _norm(a) in map(_norm, n.aliases))
                for n in new_members
            )
        )
        if not gone:
            continue
        out.append(
            Requirement(
                f"{kind}-removed",
                diagram,
                old_path,
                o.line,
                o.name,
                f"{kind} `{o.name}` of {label}",
                gone,
                remove=True,
                scope=scope,
                match=match,
            )
        )
    return out


def _transition_requirements(
    old_rows: Iterable[pm.Transition],
    new_rows: Iterable[pm.Transition],
    aliases: Mapping[str, tuple[str, ...]],
    label: str,
    diagram: str,
    old_path: str,
    new_path: str,
) -> list[Requirement]:
    def pairs(rows: Iterable[pm.Transition]) -> dict[tuple[str, str], pm.Transition]:
        found: dict[tuple[str, str], pm.Transition] = {}
        for row in rows:
            found.setdefault((row.source, row.target), row)
        return found

    before, after = pairs(old_rows), pairs(new_rows)
    out: list[Requirement] = []

    def names(state: str) -> tuple[str, ...]:
        return aliases.get(state, (state,))

    for (src, dst), row in after.items():
        if (src, dst) in before:
            continue
        a, b = names(src)[-1], names(dst)[-1]
        event = f" on `{row.event}`" if row.event else ""
        out.append(
            Requirement(
                "transition-added",
                diagram,
                new_path,
                row.line,
                f"{src} --> {dst}",
                f"transition `{a} --> {b}`{event} of {label}",
                names(src),
                match="edge",
                target=names(dst),
                draft=(
                    f"    {_mermaid_id(a)} --> {_mermaid_id(b)}"
                    + (f" : {row.event}" if row.event else ""),
                ),
            )
        )
    for (src, dst), row in before.items():
        if (src, dst) in after:
            continue
        a, b = names(src)[-1], names(dst)[-1]
        out.append(
            Requirement(
                "transition-removed",
                diagram,
                old_path,
                row.line,
                f"{src} --> {dst}",
                f"transition `{a} --> {b}` of {label}",
                names(src),
                remove=True,
                match="edge",
                target=names(dst),
            )
        )
    return out


def _class_requirements(analysis: _Analysis, cfg: DiagramSettings) -> list[Requirement]:
    data_model = normalize_path(cfg.data_model)
    states = normalize_path(cfg.states)
    old_all = _data_classes(analysis, cfg, "old")
    new_all = _data_classes(analysis, cfg, "new")
    out: list[Requirement] = []
    for name, new in new_all.items():
        old = old_all.get(name)
        if old is not None and old.kind != new.kind and pm.ENUM in (old.kind, new.kind):
            old = None
        is_state_enum = new.kind == pm.ENUM and name in analysis.state_enums
        if new.kind == pm.STATEMACHINE:
            out += _member_requirements(
                old.cls.states if old else (),
                new.cls.states,
                name,
                f"state machine `{name}`",
                states,
                old.path if old else new.path,
                new.path,
                as_states=True,
            )
            aliases = {
                s.name: s.aliases for s in (*new.cls.states, *(old.cls.states if old else ()))
            }
            out += _transition_requirements(
                old.cls.transitions if old else (),
                new.cls.transitions,
                aliases,
                f"state machine `{name}`",
                states,
                old.path if old else new.path,
                new.path,
            )
            continue
        if is_state_enum:
            out += _member_requirements(
                old.cls.members if old else (),
                new.cls.members,
                name,
                f"state enum `{name}`",
                states,
                old.path if old else new.path,
                new.path,
                as_states=True,
            )
            continue
        if old is None:
            fields = ", ".join(
                f.name
                for f in (new.cls.members if new.kind == pm.ENUM else new.cls.fields)[
                    :_MAX_DRAFT_FIELDS
                ]
            )
            out.append(
                Requirement(
                    "class-added",
                    data_model,
                    new.path,
                    new.cls.line,
                    name,
                    f"{new.kind} `{name}`" + (f" ({fields})" if fields else ""),
                    (name,),
                    draft=_class_draft(new.cls, new.kind),
                )
            )
            empty = _Located(pm.ClassInfo(name, new.cls.line, (), ()), new.path, new.kind)
            old = empty
        if new.kind == pm.ENUM:
            out += _member_requirements(
                old.cls.members,
                new.cls.members,
                name,
                f"Enum `{name}`",
                data_model,
                old.path,
                new.path,
                as_states=False,
            )
        else:
            out += _field_requirements(old, new, data_model)
    for name, old in old_all.items():
        if name in new_all:
            continue
        diagram = (
            states if (old.kind == pm.STATEMACHINE or name in analysis.state_enums) else data_model
        )
        if diagram == states:
            members = old.cls.states if old.kind == pm.STATEMACHINE else old.cls.members
            out += _member_requirements(
                members, (), name, f"`{name}`", states, old.path, old.path, as_states=True
            )
            continue
        out.append(
            Requirement(
                "class-removed",
                data_model,
                old.path,
                old.cls.line,
                name,
                f"{old.kind} `{name}`",
                (name,),
                remove=True,
            )
        )
    return out


def _real_states(machine: pm.MachineInfo | None) -> list[pm.MemberInfo]:
    """A machine's named states (``states=SomeEnum`` is handled as a state Enum)."""
    if machine is None:
        return []
    return [s for s in machine.states if not s.name.startswith("@enum:")]


def _state_requirements(analysis: _Analysis, cfg: DiagramSettings) -> list[Requirement]:
    """Transition tables and ``transitions`` machines."""
    states = normalize_path(cfg.states)
    out: list[Requirement] = []
    with_states = [
        (change, old, new)
        for change, old, new in analysis.pairs
        if (old is not None and (old.tables or old.machines))
        or (new is not None and (new.tables or new.machines))
    ]
    if not with_states:
        return out
    enum_aliases: dict[str, dict[str, tuple[str, ...]]] = {}
    for _, old, new in analysis.pairs:
        for info in (old, new):
            if info is None:
                continue
            for cls in info.classes:
                if cls.members:
                    enum_aliases.setdefault(cls.name, {}).update(
                        {m.name: m.aliases for m in cls.members}
                    )
    for change, old, new in with_states:
        old_tables = {(t.name, t.enum): t for t in (old.tables if old else ())}
        new_tables = {(t.name, t.enum): t for t in (new.tables if new else ())}
        for key in dict.fromkeys([*old_tables, *new_tables]):
            before, after = old_tables.get(key), new_tables.get(key)
            out += _transition_requirements(
                before.rows if before else (),
                after.rows if after else (),
                enum_aliases.get(key[1], {}),
                f"transition table `{key[0]}`",
                states,
                change.source_path,
                change.path,
            )
        old_machines = {m.name: m for m in (old.machines if old else ())}
        new_machines = {m.name: m for m in (new.machines if new else ())}
        for name in dict.fromkeys([*old_machines, *new_machines]):
            bm, am = old_machines.get(name), new_machines.get(name)
            out += _member_requirements(
                _real_states(bm),
                _real_states(am),
                name,
                f"machine `{name}`",
                states,
                change.source_path,
                change.path,
                as_states=True,
            )
            out += _transition_requirements(
                bm.transitions if bm else (),
                am.transitions if am else (),
                {},
                f"machine `{name}`",
                states,
                change.source_path,
                change.path,
            )
    return out


# --------------------------------------------------------------------------- mermaid sources


def _mermaid_source_requirements(change: SourceChange, cfg: DiagramSettings) -> list[Requirement]:
    states = normalize_path(cfg.states)

    def state_blocks(text: str | None) -> tuple[dict[str, int], dict[tuple[str, str], int]]:
        found: dict[str, int] = {}
        edges: dict[tuple[str, str], int] = {}
        if text is None:
            return found, edges
        for block in mermaid.extract_blocks(text, change.path):
            parsed = mermaid.parse_block(block)
            if not parsed.kind.startswith("stateDiagram"):
                continue
            for n, line in enumerate(block.source.splitlines(), start=block.line):
                for s in parsed.states:
                    if s not in found and re.search(
                        rf"(?<![\w.\-]){re.escape(s)}(?![\w.\-])", line
                    ):
                        found[s] = n
                for e in parsed.edges:
                    if e not in edges and re.search(
                        rf"{re.escape(e[0])}\s*-->\s*{re.escape(e[1])}", line
                    ):
                        edges[e] = n
        return found, edges

    old_states, old_edges = state_blocks(change.old_text)
    new_states, new_edges = state_blocks(change.new_text)
    out: list[Requirement] = []
    label = f"the state diagram in {change.path}"
    for s, line in new_states.items():
        if s not in old_states:
            out.append(
                Requirement(
                    "state-added",
                    states,
                    change.path,
                    line,
                    s,
                    f"state `{s}` of {label}",
                    (s,),
                    match="state",
                    draft=(f"    state {s}",),
                )
            )
    for s, line in old_states.items():
        if s not in new_states:
            out.append(
                Requirement(
                    "state-removed",
                    states,
                    change.source_path,
                    line,
                    s,
                    f"state `{s}` of {label}",
                    (s,),
                    remove=True,
                    match="state",
                )
            )
    for (a, b), line in new_edges.items():
        if (a, b) not in old_edges:
            out.append(
                Requirement(
                    "transition-added",
                    states,
                    change.path,
                    line,
                    f"{a} --> {b}",
                    f"transition `{a} --> {b}` of {label}",
                    (a,),
                    match="edge",
                    target=(b,),
                    draft=(f"    {a} --> {b}",),
                )
            )
    for (a, b), line in old_edges.items():
        if (a, b) not in new_edges and a in new_states and b in new_states:
            out.append(
                Requirement(
                    "transition-removed",
                    states,
                    change.source_path,
                    line,
                    f"{a} --> {b}",
                    f"transition `{a} --> {b}` of {label}",
                    (a,),
                    remove=True,
                    match="edge",
                    target=(b,),
                )
            )
    return out


# --------------------------------------------------------------------------- milestones


def _milestone_requirements(
    changes: Sequence[SourceChange], data: DiffInput, cfg: DiagramSettings
) -> list[Requirement]:
    from scaffold.diagramcheck.milestones import read_entry

    roadmap = normalize_path(cfg.roadmap)
    out: list[Requirement] = []
    reported: set[str] = set()

    def require(kind: str, entry: BacklogEntry, source: str, why: str) -> None:
        key = (entry.id or entry.title or source).lower()
        if key in reported:
            return
        reported.add(key)
        title = entry.title or entry.id or source
        out.append(
            Requirement(
                kind,
                roadmap,
                source,
                1,
                title,
                f"milestone `{title}` ({why})",
                entry.names or (title,),
                match="text",
                draft=(f'    {_mermaid_id((entry.id or title).lower())}["{title}"]',),
            )
        )

    changed_tasks: list[tuple[BacklogEntry | None, BacklogEntry]] = []
    for change in changes:
        new_kind = backlog_kind(change.path) if change.status != "D" else None
        old_kind = backlog_kind(change.source_path) if change.old_text is not None else None
        if new_kind is None and old_kind is None:
            continue  # not a Backlog.md file: its frontmatter is nobody's milestone
        new = read_entry(change.path, change.new_text) if change.new_text is not None else None
        old = (
            read_entry(change.source_path, change.old_text) if change.old_text is not None else None
        )
        if new_kind == "archived-milestone" and old_kind != "archived-milestone" and new:
            require("milestone-completed", new, change.path, "archived")
        elif new_kind == "milestone" and new is not None:
            if new.done and not (old is not None and old.done):
                require("milestone-completed", new, change.path, f"status {new.status}")
            elif old is None and change.status in ("A", "C"):
                require("milestone-added", new, change.path, "new milestone")
        elif new_kind == "task" and new is not None and new.milestone:
            changed_tasks.append((old, new))
    by_name = {n.lower(): m for m in data.head_milestones for n in m.names}
    for old, new in changed_tasks:
        if not new.done or (old is not None and old.done) or new.milestone is None:
            continue
        wanted = new.milestone.lower()
        milestone = by_name.get(wanted)
        keys = {wanted} | ({n.lower() for n in milestone.names} if milestone else set())
        tasks = [t for t in data.head_tasks if t.milestone and t.milestone.lower() in keys]
        if tasks and all(t.done for t in tasks):
            entry = milestone or BacklogEntry(new.path, new.milestone, new.milestone, None, None)
            require("milestone-completed", entry, new.path, f"all {len(tasks)} task(s) are Done")
    return out


# --------------------------------------------------------------------------- entry points


def requirements(data: DiffInput, cfg: DiagramSettings) -> tuple[list[Requirement], list[Finding]]:
    """What the diff requires of the diagrams, and warnings about files it cannot read."""
    diagram_paths = {
        normalize_path(p) for p in (cfg.architecture, cfg.data_model, cfg.states, cfg.roadmap)
    }
    out: list[Requirement] = []
    warnings: list[Finding] = []
    python: list[tuple[SourceChange, pm.ModuleInfo | None, pm.ModuleInfo | None]] = []
    for change in data.changes:
        path = change.path
        if backlog_kind(path) or backlog_kind(change.source_path):
            continue
        ignored_new = matches_any(path, cfg.ignore)
        ignored_old = matches_any(change.source_path, cfg.ignore)
        if ignored_new and ignored_old:
            continue
        if _is_python(path) or _is_python(change.source_path):
            old_ok = (
                change.status not in ("A",)
                and (
                    change.old_text is not None or change.old_binary or change.old_info is not None
                )
                and _is_python(change.source_path)
                and not ignored_old
                and under_roots(change.source_path, cfg.source_roots) is not None
            )
            new_ok = (
                change.status != "D"
                and _is_python(path)
                and not ignored_new
                and under_roots(path, cfg.source_roots) is not None
            )
            # A stub next to its module describes that module: read the module only.
            old_ok = old_ok and not _stub_of_module(change.source_path, data.python_old)
            new_ok = new_ok and not _stub_of_module(path, data.python_new)
            if not (old_ok or new_ok):
                continue
            if path.endswith(".py") or change.source_path.endswith(".py"):
                out += _module_requirements(change, old_ok, new_ok, cfg, data)
            if (change.new_binary and new_ok) or (change.old_binary and old_ok):
                warnings.append(
                    Finding(
                        "python-unreadable",
                        "",
                        path,
                        1,
                        path,
                        f"{path} is binary or not UTF-8; DiagramCheck did not read its classes",
                        level="warning",
                    )
                )
                continue
            old_text = change.old_text if old_ok else None
            new_text = change.new_text if new_ok else None
            new_info = change.new_info if new_ok else None
            if new_info is None and new_text is not None:
                new_info = pm.read_module(new_text)
            if new_info is not None and (problem := new_info.error):
                warnings.append(
                    Finding(
                        "python-syntax-error",
                        "",
                        path,
                        problem.line,
                        path,
                        f"{path}:{problem.line}: cannot parse ({problem.message}); its classes"
                        " and states were not compared with the diagrams",
                        level="warning",
                    )
                )
                continue
            old_info = change.old_info if old_ok else None
            if old_info is None and old_text is not None:
                old_info = pm.read_module(old_text)
            if old_info is not None and old_info.error is not None:
                old_info = None
            view = SourceChange(change.status, path, change.old_path, old_text, new_text)
            python.append((view, old_info, new_info))
        elif _is_mermaid_source(path, diagram_paths) and not ignored_new:
            out += _mermaid_source_requirements(change, cfg)
    analysis = _analyse(python, cfg, data)
    out += _class_requirements(analysis, cfg)
    out += _state_requirements(analysis, cfg)
    out += _milestone_requirements(data.changes, data, cfg)
    return _dedupe(_moves(out)), warnings


def _stub_of_module(path: str, python_files: frozenset[str]) -> bool:
    return path.endswith(".pyi") and path[:-1] in python_files


def _moves(reqs: list[Requirement]) -> list[Requirement]:
    """A module removed and one added under the same name (``x.py`` -> ``x/__init__.py``):
    one move, met when the architecture names it."""
    added = {(r.diagram, r.name): r for r in reqs if r.kind == "module-added"}
    removed = {(r.diagram, r.name): r for r in reqs if r.kind == "module-removed"}
    both = added.keys() & removed.keys()
    if not both:
        return reqs
    out: list[Requirement] = []
    for r in reqs:
        key = (r.diagram, r.name)
        if key not in both or r.kind == "module-removed":
            if key not in both:
                out.append(r)
            continue
        gone = removed[key]
        what = "package" if r.source.endswith(("__init__.py", "__init__.pyi")) else "module"
        out.append(
            replace(
                r,
                kind="module-moved",
                what=f"{what} `{r.name}` ({r.source}, moved from {gone.source})",
                needs_change=False,
            )
        )
    return out


def _dedupe(reqs: Iterable[Requirement]) -> list[Requirement]:
    seen: set[tuple[str, str, str, bool, str | None]] = set()
    out: list[Requirement] = []
    for r in reqs:
        key = (r.kind, r.diagram, r.name, r.remove, r.scope)
        if key in seen:
            continue
        seen.add(key)
        out.append(r)
    return out


def _named(req: Requirement, index: mermaid.DiagramIndex, text: str) -> bool:
    if req.match == "text":
        low = text.lower()
        return any(a.lower() in low for a in req.accept)
    if req.match == "state":
        pool = {_norm(n) for n in (index.states | index.names)}
        return any(_norm(a) in pool for a in req.accept)
    if req.match == "edge":
        srcs = {_norm(a) for a in req.accept}
        dsts = {_norm(b) for b in req.target}
        return any(_norm(a) in srcs and _norm(b) in dsts for a, b in index.edges)
    if req.scope is not None:
        body = index.members.get(req.scope)
        if body is not None:
            ok = any(a in body for a in req.accept)
            return ok and (req.remove or all(w in body or w in index.names for w in req.also))
    ok = index.names_any(req.accept)
    return ok and (req.remove or all(w in index.names for w in req.also))


def _suffix(req: Requirement) -> str:
    if not req.draft or len(req.draft) > 12:
        return ""
    if len(req.draft) == 1:
        return f", e.g. `{req.draft[0].strip()}`"
    return ", e.g. a block " + " ".join(line.strip() for line in req.draft)


def judge(reqs: Sequence[Requirement], data: DiffInput) -> list[Finding]:
    """The requirements the diagrams at the head do not meet, and broken Mermaid."""
    indexes: dict[str, mermaid.DiagramIndex] = {}
    texts: dict[str, str] = {}
    needed = {r.diagram for r in reqs} | {p for p, d in data.diagrams.items() if d.changed}
    for path, dfile in data.diagrams.items():
        if path in needed:
            found = dfile.index if dfile.index is not None else read_diagram(dfile)
            indexes[path], texts[path] = found
    missing_classes: set[tuple[str, str]] = set()
    pending: list[tuple[Finding, Requirement]] = []
    for req in reqs:
        diagram = data.diagrams.get(req.diagram)
        index = indexes.get(req.diagram, mermaid.DiagramIndex())
        exists = diagram is not None and diagram.text is not None
        if req.remove:
            if exists and _named(req, index, texts[req.diagram]):
                pending.append((_finding(req, f"remove {req.what} from {req.diagram}"), req))
            continue
        if not req.needs_change and exists and _named(req, index, texts[req.diagram]):
            continue
        if not exists:
            message = (
                f"{req.diagram} does not exist: create it with a Mermaid diagram that names "
                f"{req.what}{_suffix(req)}"
            )
        elif diagram is not None and not diagram.changed and req.needs_change:
            message = f"{req.diagram} is not updated in this change: add {req.what}{_suffix(req)}"
        elif not _named(req, index, texts[req.diagram]):
            message = f"add {req.what} to {req.diagram}{_suffix(req)}"
        else:
            continue
        if req.kind == "class-added":
            missing_classes.add((req.diagram, req.name))
        pending.append((_finding(req, message), req))
    # A class the diagram lacks altogether is one finding, not one per field.
    findings = [
        f
        for f, r in pending
        if r.kind == "class-added" or r.scope is None or (r.diagram, r.scope) not in missing_classes
    ]
    for path, dfile in data.diagrams.items():
        if not dfile.changed or dfile.text is None:
            continue
        for problem in indexes[path].problems:
            findings.append(
                Finding(
                    "mermaid-invalid",
                    path,
                    path,
                    problem.line,
                    path,
                    f"{path}:{problem.line}: Mermaid does not parse: {problem.message}",
                )
            )
    return findings


def _finding(req: Requirement, message: str) -> Finding:
    return Finding(req.kind, req.diagram, req.source, req.line, req.name, message, draft=req.draft)


def invalid_sources(changes: Sequence[SourceChange], cfg: DiagramSettings) -> list[Finding]:
    """Broken Mermaid in changed Markdown/``.mmd`` files outside the configured diagrams."""
    findings: list[Finding] = []
    diagram_paths = {
        normalize_path(p) for p in (cfg.architecture, cfg.data_model, cfg.states, cfg.roadmap)
    }
    for change in changes:
        if change.new_text is None or change.path in diagram_paths:
            continue
        if not change.path.endswith((".md", ".markdown", ".mmd", ".mermaid")):
            continue
        if matches_any(change.path, cfg.ignore):
            continue
        for block in mermaid.extract_blocks(change.new_text, change.path):
            for problem in mermaid.parse_block(block).problems:
                findings.append(
                    Finding(
                        "mermaid-invalid",
                        change.path,
                        change.path,
                        problem.line,
                        change.path,
                        f"{change.path}:{problem.line}: Mermaid does not parse: {problem.message}",
                    )
                )
    return findings
