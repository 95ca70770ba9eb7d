"""The classes a diff touches, on both sides, with the kind each inherits."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from scaffold.diagramcheck import python_model as pm
from scaffold.diagramcheck.paths import matches_any, module_name
from scaffold.diagramcheck.rules.model import Analysis, DiffInput, Side, SourceChange
from scaffold.diagramcheck.settings import DiagramSettings

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


def analyse(
    parsed: Sequence[tuple[SourceChange, pm.ModuleInfo | None, pm.ModuleInfo | None]],
    cfg: DiagramSettings,
    data: DiffInput | None = None,
) -> Analysis:
    result = Analysis()
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
class Located:
    cls: pm.ClassInfo
    path: str
    kind: str


def data_classes(
    analysis: Analysis, cfg: DiagramSettings, side: Literal["old", "new"]
) -> dict[str, Located]:
    kinds = analysis.kinds_old if side == "old" else analysis.kinds_new
    found: dict[str, Located] = {}
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
                found.setdefault(cls.name, Located(cls, path, kind or ""))
    return found
