"""The architecture diagram: modules added, moved or deleted."""

from __future__ import annotations

from dataclasses import replace

from scaffold.diagramcheck.paths import module_name, normalize_path
from scaffold.diagramcheck.rules.model import DiffInput, Requirement, SourceChange, mermaid_id
from scaffold.diagramcheck.settings import DiagramSettings


def module_requirements(
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
                draft=(f'    {mermaid_id(new_name)}["{new_name}"]',),
            )
        )
    # A diagram names a module by its dotted suffixes too: a module that only gained a
    # parent package (``cli.x`` -> ``scaffold.cli.x``) is still named by its old name.
    renamed = old_name != new_name and not (new_name or "").endswith(f".{old_name}")
    if old_name and renamed and not copied:
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


def moves(reqs: list[Requirement]) -> list[Requirement]:
    """A module removed and one added under the same name (``x.py`` -> ``x/__init__.py``):
    one move, met when the architecture names it."""
    added = {(r.diagram, r.name): r for r in reqs if r.kind == "module-added"}
    removed = {(r.diagram, r.name): r for r in reqs if r.kind == "module-removed"}
    both = added.keys() & removed.keys()
    out: list[Requirement] = []
    for r in reqs:
        key = (r.diagram, r.name)
        if key not in both:
            out.append(r)
        elif r.kind != "module-removed":
            what = "package" if r.source.endswith(("__init__.py", "__init__.pyi")) else "module"
            what = f"{what} `{r.name}` ({r.source}, moved from {removed[key].source})"
            out.append(replace(r, kind="module-moved", what=what, needs_change=False))
    return out
