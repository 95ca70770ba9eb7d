"""The classes a diff touches, on both sides, with the kind each inherits."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from scaffold.diagramcheck import python_model as pm
from scaffold.diagramcheck.paths import matches_any, module_name
from scaffold.diagramcheck.python_syntax import resolve_relative
from scaffold.diagramcheck.rules.model import Analysis, DiffInput, Side, SourceChange
from scaffold.diagramcheck.settings import DiagramSettings

_MAX_BASE_DEPTH = 4


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
        level, todo = todo, []
        for cls, module, is_pkg in level:
            for base in cls.bases:
                if "." not in base or base.rpartition(".")[2] in known:
                    continue
                full = resolve_relative(base, module, is_pkg) if base.startswith(".") else base
                if full in seen:
                    continue
                seen.add(full)
                mod, _, name = full.rpartition(".")
                # The module, then up to two re-exports (``from .models import Model`` in a
                # package's __init__).
                for _hop in range(3):
                    info = data.lookup(side, mod) if mod else None
                    found = info.class_named(name) if info is not None else None
                    ref = info.imported.get(name) if info is not None and found is None else None
                    if ref is None:
                        break
                    mod, _, name = resolve_relative(ref, mod, True).rpartition(".")
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
    data: DiffInput,
) -> Analysis:
    def kinds(side: Side) -> dict[str, str]:
        infos = [i for _, old, new in parsed if (i := old if side == "old" else new) is not None]
        classes = [c for info in infos for c in info.classes]
        bases = [b for info in infos for b in info.declarative_bases]
        found = pm.classify(classes, bases)
        extra = _inherited(parsed, side, found, cfg, data)
        return pm.classify([*extra, *classes], bases) if extra else found

    old, new = kinds("old"), kinds("new")
    infos = [info for _, before, after in parsed for info in (before, after) if info is not None]
    states = pm.state_enums(infos, [*old.items(), *new.items()], cfg.state_enum_suffixes)
    return Analysis(list(parsed), old, new, states)


@dataclass(frozen=True)
class Located:
    cls: pm.ClassInfo
    path: str
    kind: str


def data_classes(analysis: Analysis, cfg: DiagramSettings, side: Side) -> dict[str, Located]:
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
