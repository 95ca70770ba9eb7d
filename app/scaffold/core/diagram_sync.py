"""Keep the generated parts of scaffold's own ``docs/diagrams/`` in step with the code.

The architecture page (``02-architecture.md``), the state-machine page
(``03-state-machine.md``) and the data-model page (``05-data-model.md``) hold prose a
person writes and Mermaid blocks the code writes: the module graph (read from the
imports of ``app/scaffold``), the lifecycle and planning transition tables, and the
quest-file models. Each generated block sits between ``<!-- generated:<name>:begin -->``
and ``<!-- generated:<name>:end -->``; rendering replaces what is between the markers
and keeps everything else, so the pictures cannot drift from the code.

``python -m scaffold.core.diagram_sync [--check] [ROOT]`` rewrites the pages under ROOT
(default: the current directory, i.e. a scaffold checkout); ``--check`` exits 1 when a
page is stale. It documents scaffold itself, not the repositories scaffold works on.
"""

from __future__ import annotations

import ast
import functools
import re
import sys
import types
from collections.abc import Callable, Iterable, Sequence
from enum import Enum
from pathlib import Path
from typing import Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel

from scaffold.config import DiagramsConfig
from scaffold.core import lifecycle, planning
from scaffold.core.states import Lifecycle, Stage
from scaffold.quest import model as qm
from scaffold.roles import Role
from scaffold.signals import Complete, NeedsRoleFollowup, NeedsUserInput, PartiallyComplete
from scaffold.state import document as sd

ARCHITECTURE_PATH = Path(DiagramsConfig().architecture)
STATE_DIAGRAM_PATH = Path(DiagramsConfig().states)
DATA_MODEL_PATH = Path(DiagramsConfig().data_model)
# The package whose modules the architecture page draws: this installed ``scaffold``.
PACKAGE_DIR = Path(__file__).resolve().parents[1]

Block = tuple[str, str, Callable[[], str]]  # (name, heading used when missing, generator)

# --------------------------------------------------------------------------- data model

# The quest file and what it refers to, in the order the diagram lists them.
DATA_MODEL_CLASSES: tuple[type[BaseModel], ...] = (
    sd.QuestStateFile,
    sd.StateHistory,
    sd.HistorySummary,
    qm.Quest,
    qm.QuestSource,
    qm.Requirements,
    qm.Context,
    qm.Observable,
    qm.PlanningState,
    qm.TaskRecord,
    qm.AgentRun,
    qm.RoleFrame,
    qm.PullRequest,
    qm.ReviewRound,
    qm.Feedback,
    qm.ReviewComment,
    qm.CheckFailure,
    qm.SignalEntry,
    qm.Question,
    qm.HistoryEntry,
    Complete,
    PartiallyComplete,
    NeedsUserInput,
    NeedsRoleFollowup,
)
DATA_MODEL_ENUMS: tuple[type[Enum], ...] = (qm.QuestPhase, Lifecycle, Stage, Role)
_SIGNALS = (Complete, PartiallyComplete, NeedsUserInput, NeedsRoleFollowup)


def _type_name(annotation: Any) -> str:
    """A short Mermaid-safe spelling of a field's type (``dict~str,TaskRecord~``, ``str?``)."""
    origin, args = get_origin(annotation), get_args(annotation)
    if origin in (Union, types.UnionType):
        present = [a for a in args if a is not type(None)]
        inner = "_or_".join(_type_name(a) for a in present)
        return inner + "?" if len(present) < len(args) else inner
    if origin is Literal:
        return "Literal~" + ",".join(str(a) for a in args) + "~"
    if origin is tuple:
        return f"tuple~{_type_name(args[0])}~"
    if origin is dict:
        return f"dict~{_type_name(args[0])},{_type_name(args[1])}~"
    if annotation is Any:
        return "Any"
    return getattr(annotation, "__name__", str(annotation))


def _referenced(annotation: Any) -> tuple[list[type], str]:
    """The listed classes a field points to, and the multiplicity of the link."""
    origin, args = get_origin(annotation), get_args(annotation)
    if origin in (Union, types.UnionType):
        found: list[type] = []
        many = "0..1"
        for a in args:
            refs, mult = _referenced(a)
            found += refs
            many = "*" if mult == "*" else many
        return found, many
    if origin in (tuple, dict):
        return [r for a in args for r in _referenced(a)[0]], "*"
    known = (*DATA_MODEL_CLASSES, *DATA_MODEL_ENUMS)
    return ([annotation] if annotation in known else []), "1"


def data_model_mermaid() -> str:
    """The class diagram of the quest file, the journal entry and the four signals."""
    lines = ["classDiagram", "    direction LR"]
    links: list[str] = []
    for cls in DATA_MODEL_CLASSES:
        lines.append(f"    class {cls.__name__} {{")
        for name, field in cls.model_fields.items():
            lines.append(f"        +{_type_name(field.annotation)} {name}")
            refs, mult = _referenced(field.annotation)
            for ref in refs:
                if issubclass(ref, Enum):
                    links.append(f"    {cls.__name__} --> {ref.__name__} : {name}")
                else:
                    links.append(f'    {cls.__name__} *-- "{mult}" {ref.__name__} : {name}')
        lines.append("    }")
    for enum in DATA_MODEL_ENUMS:
        lines.append(f"    class {enum.__name__} {{")
        lines.append("        <<enumeration>>")
        lines += [f"        {member.value}" for member in enum]
        lines.append("    }")
    lines += links
    # Relations the field types do not spell out.
    lines.append("    Quest ..> HistoryEntry : journal (append-only, beside the file)")
    lines.append("    QuestStateFile ..> Quest : quests/[done/]<id>.json on the state branch")
    lines += [f"    SignalEntry ..> {s.__name__} : signal (one of)" for s in _SIGNALS]
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- architecture

# What each package is for; shown as the title of its box.
PACKAGE_ROLES = {
    "scaffold": "contracts: errors, ids, roles, signals, config, schemas",
    "scaffold.core": "pure decisions: tables, routing, scheduling, safety",
    "scaffold.quest": "the quest file and its journal",
    "scaffold.state": "the state branch: quests in the repository, rebuilt from it",
    "scaffold.backlog": "Backlog.md tasks, read and written like the backlog CLI",
    "scaffold.agent": "agent processes and their stream-json",
    "scaffold.signal_back": "signal-back: the run's tools, served by the mcp SDK, and its records",
    "scaffold.sandbox": "the trust boundary: bubblewrap views, egress routes, the bridge",
    "scaffold.git": "git, worktrees, Ward",
    "scaffold.diagramcheck": "DiagramCheck: the ast analyzer of a diff, its cache, Mermaid, drafts",
    "scaffold.runtime": "the imperative shell: executes effects",
    "scaffold.cli": "the scaffold command",
    "scaffold.server": "the webhook server: verify, dedupe, spool, queue, metrics",
    "scaffold.github": "the GitHub App: auth, REST client, flows, forge, checks",
    "scaffold.action": "the GitHub Action's entry points",
    "scaffold.demo": "scaffold demo, and the scripted stand-in agent it runs",
}


def module_names(package_dir: Path = PACKAGE_DIR) -> list[str]:
    """Dotted names of every module file under ``package_dir`` (``scaffold.core.__init__`` too)."""
    base = package_dir.parent
    return sorted(
        ".".join(p.relative_to(base).with_suffix("").parts) for p in package_dir.rglob("*.py")
    )


def _package_of(module: str) -> str:
    parts = module.split(".")
    return ".".join(parts[:2]) if len(parts) > 2 else parts[0]


@functools.lru_cache(maxsize=512)
def _imported_names(path: Path, mtime_ns: int) -> frozenset[tuple[str, str]]:
    """``(module, name)`` for every absolute import in a file (cached: parsing is slow)."""
    found: set[tuple[str, str]] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.update((node.module, alias.name) for alias in node.names)
        elif isinstance(node, ast.Import):
            found.update((alias.name, "") for alias in node.names)
    return frozenset(found)


def _imports(path: Path, modules: set[str]) -> set[str]:
    """The modules of ``modules`` a file imports (``from a.b import c`` is ``a.b.c`` if a module)."""
    found: set[str] = set()
    for module, name in _imported_names(path, path.stat().st_mtime_ns):
        full = f"{module}.{name}"
        found.add(full if name and full in modules else module)
    return {m for m in found if m in modules or f"{m}.__init__" in modules}


def _node_id(name: str) -> str:
    return name.replace(".", "_")


def architecture_mermaid(package_dir: Path = PACKAGE_DIR) -> str:
    """Every module, boxed by package, with the dependencies its imports declare.

    Arrows go from a package (or a top-level module) to what it imports: another
    package's box, or one of the top-level contract modules. Imports of the bare
    ``scaffold`` package (for ``__version__``) are left out as noise.
    """
    names = module_names(package_dir)
    modules = set(names)
    base = package_dir.parent
    by_package: dict[str, list[str]] = {}
    for name in names:
        by_package.setdefault(_package_of(name), []).append(name)
    top = package_dir.name

    def endpoint(module: str) -> str:
        pkg = _package_of(module)
        return _node_id(module) if pkg == top else _node_id(pkg)

    edges: set[tuple[str, str]] = set()
    for name in names:
        path = base.joinpath(*name.split(".")).with_suffix(".py")
        for target in _imports(path, modules):
            if target in (top, f"{top}.__init__"):
                continue
            src, dst = endpoint(name), endpoint(target)
            if src != dst and not (_package_of(name) == _package_of(target) != top):
                edges.add((src, dst))
    lines = ["flowchart LR"]
    for pkg in sorted(by_package, key=lambda p: (p != top, p)):
        title = f"{pkg} · {PACKAGE_ROLES[pkg]}" if pkg in PACKAGE_ROLES else pkg
        lines.append(f'    subgraph {_node_id(pkg)}["{title}"]')
        lines += [f'        {_node_id(m)}["{m}"]' for m in by_package[pkg]]
        lines.append("    end")
    lines += [f"    {src} --> {dst}" for src, dst in sorted(edges)]
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- blocks

STATE_BLOCKS: tuple[Block, ...] = (
    ("lifecycle", "Task lifecycle", lifecycle.mermaid),
    ("planning", "Planning phases", planning.mermaid),
)
DATA_MODEL_BLOCKS: tuple[Block, ...] = (("data-model", "Classes", data_model_mermaid),)
ARCHITECTURE_BLOCKS: tuple[Block, ...] = (("architecture", "Modules", architecture_mermaid),)
_ALL_BLOCKS = {
    name: gen for name, _, gen in (*ARCHITECTURE_BLOCKS, *STATE_BLOCKS, *DATA_MODEL_BLOCKS)
}


def begin_marker(name: str) -> str:
    return f"<!-- generated:{name}:begin -->"


def end_marker(name: str) -> str:
    return f"<!-- generated:{name}:end -->"


def generated_block(name: str) -> str:
    """The full generated block for ``name``, markers included."""
    body = _ALL_BLOCKS[name]().rstrip("\n")
    return f"{begin_marker(name)}\n```mermaid\n{body}\n```\n{end_marker(name)}"


def render_blocks(existing_text: str, blocks: Iterable[Block]) -> str:
    """Replace each named block in ``existing_text``; append, under a heading, any missing.

    Appending (rather than failing) lets a new or damaged page heal on the next run
    instead of silently losing its diagram.
    """
    text = existing_text
    for name, heading, _ in blocks:
        block = generated_block(name)
        pattern = re.compile(
            re.escape(begin_marker(name)) + r".*?" + re.escape(end_marker(name)), re.DOTALL
        )
        found = pattern.search(text)
        if found:
            text = text[: found.start()] + block + text[found.end() :]
        else:
            text = text.rstrip("\n") + ("\n\n" if text.strip() else "") + f"## {heading}\n\n"
            text += block + "\n"
    return text if text.endswith("\n") else text + "\n"


def render_state_diagram_doc(existing_text: str) -> str:
    """``03-state-machine.md`` with the lifecycle and planning blocks regenerated."""
    return render_blocks(existing_text, STATE_BLOCKS)


def render_data_model_doc(existing_text: str) -> str:
    """``05-data-model.md`` with the class diagram regenerated."""
    return render_blocks(existing_text, DATA_MODEL_BLOCKS)


def render_architecture_doc(existing_text: str) -> str:
    """``02-architecture.md`` with the module graph regenerated."""
    return render_blocks(existing_text, ARCHITECTURE_BLOCKS)


# --------------------------------------------------------------------------- command


PAGES: tuple[tuple[Path, Callable[[str], str]], ...] = (
    (ARCHITECTURE_PATH, render_architecture_doc),
    (STATE_DIAGRAM_PATH, render_state_diagram_doc),
    (DATA_MODEL_PATH, render_data_model_doc),
)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m scaffold.core.diagram_sync [--check] [ROOT]``."""
    args = list(sys.argv[1:] if argv is None else argv)
    check = "--check" in args
    rest = [a for a in args if a != "--check"]
    if len(rest) > 1 or any(a.startswith("-") for a in rest):
        print("usage: python -m scaffold.core.diagram_sync [--check] [ROOT]", file=sys.stderr)
        return 2
    root = Path(rest[0]) if rest else Path.cwd()
    stale = 0
    for rel, render in PAGES:
        path = root / rel
        try:
            current = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            current = ""
        except (OSError, UnicodeDecodeError) as exc:
            print(f"{path}: cannot read: {exc}", file=sys.stderr)
            return 2
        wanted = render(current)
        if current == wanted:
            continue
        if check:
            stale += 1
            print(f"{path} lags the code", file=sys.stderr)
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(wanted, encoding="utf-8")
        print(f"rewrote {path}")
    if stale:
        print("run `python -m scaffold.core.diagram_sync` to regenerate", file=sys.stderr)
    return 1 if stale else 0


if __name__ == "__main__":
    raise SystemExit(main())
