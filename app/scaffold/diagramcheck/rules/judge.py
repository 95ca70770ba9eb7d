"""What a whole diff requires of the diagrams, and whether the diagrams have it."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from scaffold.diagramcheck import mermaid, python_reader
from scaffold.diagramcheck import python_model as pm
from scaffold.diagramcheck.findings import Finding
from scaffold.diagramcheck.milestones import backlog_kind
from scaffold.diagramcheck.paths import matches_any, under_roots
from scaffold.diagramcheck.rules.architecture import module_requirements, moves
from scaffold.diagramcheck.rules.classes import analyse
from scaffold.diagramcheck.rules.data_model import class_requirements
from scaffold.diagramcheck.rules.model import (
    DiffInput,
    Requirement,
    SourceChange,
    is_python,
    norm,
    read_diagram,
)
from scaffold.diagramcheck.rules.roadmap import milestone_requirements
from scaffold.diagramcheck.rules.states import mermaid_source_requirements, state_requirements
from scaffold.diagramcheck.settings import DiagramSettings, diagram_paths


def _readable(path: str, present: bool, python: frozenset[str], cfg: DiagramSettings) -> bool:
    """Whether the rules read this side of a change (a stub next to its module describes
    that module: only the module is read)."""
    return (
        present
        and is_python(path)
        and not matches_any(path, cfg.ignore)
        and under_roots(path, cfg.source_roots) is not None
        and not (path.endswith(".pyi") and path[:-1] in python)
    )


def requirements(data: DiffInput, cfg: DiagramSettings) -> tuple[list[Requirement], list[Finding]]:
    """What the diff requires of the diagrams, and warnings about files it cannot read."""
    diagrams = set(diagram_paths(cfg))
    out: list[Requirement] = []
    warnings: list[Finding] = []
    python: list[tuple[SourceChange, pm.ModuleInfo | None, pm.ModuleInfo | None]] = []
    for change in data.changes:
        path = change.path
        if backlog_kind(path) or backlog_kind(change.source_path):
            continue
        ignored_new = matches_any(path, cfg.ignore)
        if ignored_new and matches_any(change.source_path, cfg.ignore):
            continue
        if is_python(path) or is_python(change.source_path):
            old_present = change.status != "A" and (
                change.old_text is not None or change.old_binary
            )
            old_ok = _readable(change.source_path, old_present, data.python_old, cfg)
            new_ok = _readable(path, change.status != "D", data.python_new, cfg)
            if not (old_ok or new_ok):
                continue
            if path.endswith(".py") or change.source_path.endswith(".py"):
                out += module_requirements(change, old_ok, new_ok, cfg, data)
            if (change.new_binary and new_ok) or (change.old_binary and old_ok):
                why = f"{path} is binary or not UTF-8; DiagramCheck did not read its classes"
                warnings.append(Finding("python-unreadable", "", path, 1, path, why, "warning"))
                continue
            texts = (change.old_text if old_ok else None, change.new_text if new_ok else None)
            old_info, new_info = (
                python_reader.read_module(t) if t is not None else None for t in texts
            )
            if new_info is not None and (problem := new_info.error):
                why = (
                    f"{path}:{problem.line}: cannot parse ({problem.message}); its classes"
                    " and states were not compared with the diagrams"
                )
                kind = "python-syntax-error"
                warnings.append(Finding(kind, "", path, problem.line, path, why, "warning"))
                continue
            if old_info is not None and old_info.error is not None:
                old_info = None
            python.append((change, old_info, new_info))
        elif path.endswith((".mmd", ".mermaid")) and path not in diagrams and not ignored_new:
            # A dedicated Mermaid file's state diagram is a machine the diagrams follow; a
            # block in Markdown (a README, a guide) is an example, never a state source.
            out += mermaid_source_requirements(change, cfg)
    analysis = analyse(python, cfg, data)
    out += class_requirements(analysis, cfg)
    out += state_requirements(analysis, cfg)
    out += milestone_requirements(data, cfg)
    return _dedupe(moves(out)), warnings


def _dedupe(reqs: Iterable[Requirement]) -> list[Requirement]:
    first: dict[tuple[str, str, str, bool, str | None], Requirement] = {}
    for r in reqs:
        first.setdefault((r.kind, r.diagram, r.name, r.remove, r.scope), r)
    return list(first.values())


def _named(req: Requirement, index: mermaid.DiagramIndex, text: str) -> bool:
    if req.match == "text":
        low = text.lower()
        return any(a.lower() in low for a in req.accept)
    if req.match == "state":
        pool = {norm(n) for n in (index.states | index.names)}
        return any(norm(a) in pool for a in req.accept)
    if req.match == "edge":
        srcs = {norm(a) for a in req.accept}
        dsts = {norm(b) for b in req.target}
        return any(norm(a) in srcs and norm(b) in dsts for a, b in index.edges)
    if req.scope is not None:
        body = index.members.get(req.scope)
        if body is not None:
            ok = any(a in body for a in req.accept)
            return ok and (req.remove or all(w in body or w in index.names for w in req.also))
    ok = any(a in index.names for a in req.accept)
    return ok and (req.remove or all(w in index.names for w in req.also))


def _suffix(req: Requirement) -> str:
    if not req.draft or len(req.draft) > 12:
        return ""
    if len(req.draft) == 1:
        return f", e.g. `{req.draft[0].strip()}`"
    return ", e.g. a block " + " ".join(line.strip() for line in req.draft)


def judge(reqs: Sequence[Requirement], data: DiffInput) -> list[Finding]:
    """The requirements the diagrams at the head do not meet, and broken Mermaid."""
    # Only the diagrams asked about or changed are parsed (a big generated one costs).
    needed = {r.diagram for r in reqs} | {p for p, d in data.diagrams.items() if d.changed}
    read = {p: read_diagram(d) for p, d in data.diagrams.items() if p in needed}
    missing_classes: set[tuple[str, str]] = set()
    pending: list[tuple[Finding, Requirement]] = []
    for req in reqs:
        diagram = data.diagrams.get(req.diagram)
        named = diagram is not None and diagram.text is not None and _named(req, *read[req.diagram])
        if req.remove:
            if named:
                pending.append((_finding(req, f"remove {req.what} from {req.diagram}"), req))
            continue
        if diagram is None or diagram.text is None:
            message = (
                f"{req.diagram} does not exist: create it with a Mermaid diagram that names "
                f"{req.what}{_suffix(req)}"
            )
        elif not req.needs_change and named:
            continue
        elif not diagram.changed and req.needs_change:
            message = f"{req.diagram} is not updated in this change: add {req.what}{_suffix(req)}"
        elif not named:
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
        findings += [_invalid(path, problem) for problem in read[path][0].problems]
    return findings


def _invalid(path: str, problem: mermaid.MermaidProblem) -> Finding:
    message = f"{path}:{problem.line}: Mermaid does not parse: {problem.message}"
    return Finding("mermaid-invalid", path, path, problem.line, path, message)


def _finding(req: Requirement, message: str) -> Finding:
    return Finding(req.kind, req.diagram, req.source, req.line, req.name, message, draft=req.draft)


def invalid_sources(changes: Sequence[SourceChange], cfg: DiagramSettings) -> list[Finding]:
    """Broken Mermaid in changed Markdown/``.mmd`` files outside the configured diagrams."""
    findings: list[Finding] = []
    diagrams = set(diagram_paths(cfg))
    for change in changes:
        if change.new_text is None or change.path in diagrams:
            continue
        if not change.path.endswith((".md", ".markdown", ".mmd", ".mermaid")):
            continue
        if matches_any(change.path, cfg.ignore):
            continue
        for block in mermaid.extract_blocks(change.new_text, change.path):
            findings += [_invalid(change.path, p) for p in mermaid.parse_block(block).problems]
    return findings
