"""Mermaid drafts of a repository's architecture, data model and states.

``scaffold diagrams generate`` reads the Python files of the working tree (never
git-ignored ones; the ``diagrams`` ignore globs and source roots apply) with the readers
DiagramCheck uses, so a draft names everything the checker would ask for: a
``flowchart`` of the modules boxed by package with the package import graph, a
``classDiagram`` of the data classes and Enums, and one ``stateDiagram-v2`` per state
machine. Written, each draft replaces the block between ``<!-- diagramcheck:<kind>:begin
-->`` and ``<!-- diagramcheck:<kind>:end -->`` of its diagram file (appended under a
heading when absent), so the prose around it stays as written.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from scaffold.diagramcheck import python_model as pm
from scaffold.diagramcheck import python_reader
from scaffold.diagramcheck.paths import matches_any, module_name, normalize_path
from scaffold.diagramcheck.rules.model import mermaid_id
from scaffold.diagramcheck.rules.type_text import class_draft
from scaffold.diagramcheck.settings import DiagramSettings
from scaffold.git.runner import run_git

KINDS = ("architecture", "data-model", "states")
_HEADINGS = {"architecture": "Modules", "data-model": "Data model", "states": "States"}


@dataclass(frozen=True)
class SourceFile:
    path: str
    module: str
    info: pm.ModuleInfo


def read_sources(repo: Path, cfg: DiagramSettings) -> list[SourceFile]:
    """Every Python file of the working tree DiagramCheck would read, parsed."""
    out = run_git(
        ["ls-files", "-z", "--cached", "--others", "--exclude-standard", "--", "*.py"], repo
    )
    return parse_sources(repo, [p for p in out.stdout.split("\0") if p.endswith(".py")], cfg)


def parse_sources(root: Path, names: Iterable[str], cfg: DiagramSettings) -> list[SourceFile]:
    """The files ``names`` (paths under ``root``) the settings do not leave out, parsed."""
    paths = sorted(set(names))
    packages = frozenset(p for p in paths if p.endswith("__init__.py"))
    files: list[SourceFile] = []
    for path in paths:
        name = module_name(path, cfg.source_roots, packages)  # None outside the roots
        if name is None or matches_any(path, cfg.ignore):
            continue
        try:
            text = (root / path).read_text(encoding="utf-8-sig")
        except (OSError, UnicodeDecodeError):
            continue
        files.append(
            SourceFile(
                path,
                name,
                python_reader.read_module(text, name, path.endswith("__init__.py"), imports=True),
            )
        )
    return files


def architecture_draft(files: Sequence[SourceFile], titles: Mapping[str, str] | None = None) -> str:
    """A flowchart of the modules, boxed by package, with the package import graph.

    ``titles``: what a package is for, shown after its name on its box.
    """
    package_of = {
        f.module: f.module if f.path.endswith("__init__.py") else f.module.rpartition(".")[0]
        for f in files
    }
    modules = set(package_of)
    groups: dict[str, list[str]] = {}
    for module in sorted(modules):
        groups.setdefault(package_of[module], []).append(module)
    lines = ["flowchart LR"]
    for pkg in sorted(groups):
        members = groups[pkg]
        if not pkg:
            lines += [f'    {mermaid_id(m)}["{m}"]' for m in members]
            continue
        title = f"{pkg} · {titles[pkg]}" if titles and pkg in titles else pkg
        lines.append(f'    subgraph pkg_{mermaid_id(pkg)}["{title}"]')
        lines += [f'        {mermaid_id(m)}["{m}"]' for m in members if m != pkg]
        if pkg in members:
            lines.append(f'        {mermaid_id(pkg)}["{pkg}"]')
        lines.append("    end")

    def endpoint(module: str) -> str:
        pkg = package_of[module]
        return f"pkg_{mermaid_id(pkg)}" if pkg else mermaid_id(module)

    edges: set[tuple[str, str]] = set()
    for f in files:
        for imported in f.info.imports:
            if imported not in modules or imported == f.module:
                continue
            src, dst = endpoint(f.module), endpoint(imported)
            if src != dst:
                edges.add((src, dst))
    lines += [f"    {a} --> {b}" for a, b in sorted(edges)]
    return "\n".join(lines) + "\n"


def _kinds(files: Iterable[SourceFile]) -> dict[str, str]:
    classes = [c for f in files for c in f.info.classes]
    bases = [b for f in files for b in f.info.declarative_bases]
    return pm.classify(classes, bases)


def data_model_draft(files: Sequence[SourceFile], cfg: DiagramSettings) -> str:
    """A class diagram of the data classes and Enums with their fields and members."""
    kinds = _kinds(files)
    states = pm.state_enums((f.info for f in files), kinds.items(), cfg.state_enum_suffixes)
    drawn: dict[str, pm.ClassInfo] = {}
    for f in files:
        if cfg.data_model_sources and not matches_any(f.path, cfg.data_model_sources):
            continue
        for cls in f.info.classes:
            kind = kinds.get(cls.name)
            if kind in pm.DATA_KINDS and not cls.name.startswith("_") and cls.name not in states:
                drawn.setdefault(cls.name, cls)
    lines = ["classDiagram"]
    links: list[str] = []
    for name, cls in drawn.items():
        lines += class_draft(cls, kinds[name], limit=None, stereotype=True)
        for fld in cls.fields if kinds[name] != pm.ENUM else ():
            for word in set(re.findall(r"[A-Za-z_]\w*", fld.type)):
                if word in drawn and word != name:
                    links.append(f"    {name} --> {word} : {fld.name}")
    lines += sorted(set(links))
    if not drawn:
        # Mermaid refuses a class diagram with nothing in it; say why it is empty.
        lines.append('    note "no data classes found"')
    return "\n".join(lines) + "\n"


def _state_block(title: str, shown: Mapping[str, str], rows: Iterable[pm.Transition]) -> str:
    """A ``stateDiagram-v2``; ``shown`` maps each state to the name the diagram gives it."""
    lines = ["stateDiagram-v2", f"    %% {title}"]
    seen: set[str] = set()
    edges = [(shown.get(r.source, r.source), shown.get(r.target, r.target), r.event) for r in rows]
    for a, b, event in dict.fromkeys(edges):
        lines.append(f"    {mermaid_id(a)} --> {mermaid_id(b)}" + (f" : {event}" if event else ""))
        seen.update((a, b))
    lines += [f"    state {mermaid_id(s)}" for s in shown.values() if s not in seen]
    return "\n".join(lines) + "\n"


def states_drafts(files: Sequence[SourceFile], cfg: DiagramSettings) -> list[str]:
    """One ``stateDiagram-v2`` per table, state Enum, statemachine class and machine."""
    kinds = _kinds(files)
    # Each Enum's members as a diagram shows them: the value, else the name.
    labels: dict[str, dict[str, str]] = {}
    for f in files:
        for cls in f.info.classes:
            if kinds.get(cls.name) == pm.ENUM:
                labels.setdefault(cls.name, {m.name: m.value or m.name for m in cls.members})
    blocks = [
        _state_block(f"{f.module}.{t.name} ({t.enum})", labels.get(t.enum, {}), t.rows)
        for f in files
        for t in f.info.tables
    ]
    tabled = {t.enum for f in files for t in f.info.tables}
    enums = pm.state_enums((f.info for f in files), kinds.items(), cfg.state_enum_suffixes)
    for name in sorted(enums - tabled):
        if name in labels:
            blocks.append(_state_block(name, labels[name], ()))
    for f in files:
        for cls in f.info.classes:
            if kinds.get(cls.name) == pm.STATEMACHINE and cls.states:
                names = {s.name: (s.value or s.name) for s in cls.states}
                blocks.append(_state_block(f"{f.module}.{cls.name}", names, cls.transitions))
        for machine in f.info.machines:
            states = [s.name for s in machine.states if not s.name.startswith("@enum:")]
            for s in machine.states:
                if s.name.startswith("@enum:"):
                    states += labels.get(s.name.removeprefix("@enum:"), {}).values()
            shown = {s: s for s in states}
            blocks.append(_state_block(f"{f.module}.{machine.name}", shown, machine.transitions))
    return blocks


def begin_marker(kind: str) -> str:
    return f"<!-- diagramcheck:{kind}:begin -->"


def end_marker(kind: str) -> str:
    return f"<!-- diagramcheck:{kind}:end -->"


def fenced(bodies: Sequence[str]) -> str:
    return "\n".join(f"```mermaid\n{b.rstrip()}\n```" for b in bodies)


def replace_block(
    existing: str, kind: str, bodies: Sequence[str], heading: str | None = None
) -> str:
    """``existing`` with the generated block of ``kind`` replaced (or appended under
    ``heading``, by default the kind's)."""
    begin, end = begin_marker(kind), end_marker(kind)
    block = f"{begin}\n{fenced(bodies)}\n{end}"
    found = re.search(re.escape(begin) + r".*?" + re.escape(end), existing, re.DOTALL)
    if found:
        text = existing[: found.start()] + block + existing[found.end() :]
    else:
        lead = existing.rstrip("\n") + "\n\n" if existing.strip() else ""
        text = f"{lead}## {heading or _HEADINGS[kind]}\n\n{block}\n"
    return text if text.endswith("\n") else text + "\n"


def drafts(
    files: Sequence[SourceFile], cfg: DiagramSettings, kinds: Iterable[str]
) -> dict[str, list[str]]:
    """Mermaid bodies per kind."""
    build = {
        "architecture": lambda: [architecture_draft(files)],
        "data-model": lambda: [data_model_draft(files, cfg)],
        "states": lambda: (
            states_drafts(files, cfg) or ["stateDiagram-v2\n    %% no states found\n"]
        ),
    }
    return {kind: build[kind]() for kind in kinds}


def target_path(cfg: DiagramSettings, kind: str) -> str:
    paths = {"architecture": cfg.architecture, "data-model": cfg.data_model, "states": cfg.states}
    return normalize_path(paths[kind])


def write_drafts(repo: Path, cfg: DiagramSettings, bodies: Mapping[str, list[str]]) -> list[str]:
    """Write each kind's block into its diagram file; returns the paths rewritten."""
    written: list[str] = []
    for kind, blocks in bodies.items():
        rel = target_path(cfg, kind)
        path = repo / rel
        try:
            current = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            current = f"# {_HEADINGS[kind]}\n"
        wanted = replace_block(current, kind, blocks)
        if wanted != current:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(wanted, encoding="utf-8")
            written.append(rel)
    return written
