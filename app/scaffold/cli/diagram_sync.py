"""Keep the generated parts of scaffold's own ``docs/diagrams/`` in step with the code.

The architecture, state-machine and data-model pages hold prose a person writes and
Mermaid blocks drawn from this installed ``scaffold`` (the module graph and the quest
file's class diagram by :mod:`scaffold.diagramcheck.generate`, the lifecycle and planning
tables), each between ``<!-- diagramcheck:<name>:begin -->`` and ``...:end -->`` markers;
rendering replaces what is between the markers and keeps the rest.

``python -m scaffold.cli.diagram_sync [--check] [ROOT]`` rewrites the pages under ROOT
(default: the current directory, a scaffold checkout); ``--check`` exits 1 when a page
is stale. It documents scaffold itself, not the repositories scaffold works on.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from scaffold.core import lifecycle, planning
from scaffold.diagramcheck import generate
from scaffold.diagramcheck.settings import DEFAULTS

ARCHITECTURE_PATH = Path(DEFAULTS.architecture)
STATE_DIAGRAM_PATH = Path(DEFAULTS.states)
DATA_MODEL_PATH = Path(DEFAULTS.data_model)
# The package the pages draw: this installed ``scaffold``.
PACKAGE_DIR = Path(__file__).resolve().parents[1]
# The quest file, the state branch's file around it and the signals, as under app/.
SETTINGS = dataclasses.replace(
    DEFAULTS,
    data_model_sources=(
        "scaffold/quest/model.py",
        "scaffold/state/document.py",
        "scaffold/signals.py",
    ),
)

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
    "scaffold.git": "git: worktrees, hand-off commits, merges",
    "scaffold.diagramcheck": "DiagramCheck: the ast analyzer of a diff, Mermaid, drafts",
    "scaffold.diagramcheck.rules": "what a diff requires of each diagram, and the judge",
    "scaffold.runtime": "the imperative shell: executes effects",
    "scaffold.cli": "the scaffold command",
    "scaffold.server": "the webhook server: verify, store (sqlite), queue, metrics",
    "scaffold.github": "the GitHub App: auth, REST client, flows, forge, checks",
    "scaffold.action": "the GitHub Action's entry points",
    "scaffold.demo": "scaffold demo, and the scripted stand-in agent it runs",
}

# (name, heading used when missing, Mermaid bodies)
Block = tuple[str, str, Callable[[], list[str]]]


def sources(package_dir: Path = PACKAGE_DIR) -> list[generate.SourceFile]:
    """The modules of ``package_dir``, parsed as DiagramCheck parses them."""
    root = package_dir.parent
    names = [str(p.relative_to(root)) for p in package_dir.rglob("*.py")]
    return generate.parse_sources(root, names, SETTINGS)


def architecture_mermaid(package_dir: Path = PACKAGE_DIR) -> str:
    """Every module, boxed by package, with an arrow to each package its imports name."""
    return generate.architecture_draft(sources(package_dir), PACKAGE_ROLES)


def data_model_mermaid(package_dir: Path = PACKAGE_DIR) -> str:
    """The class diagram of the quest file, the state branch's file and the signals."""
    return generate.data_model_draft(sources(package_dir), SETTINGS)


PAGES: dict[Path, tuple[Block, ...]] = {
    ARCHITECTURE_PATH: (("architecture", "Modules", lambda: [architecture_mermaid()]),),
    STATE_DIAGRAM_PATH: (
        ("lifecycle", "Task lifecycle", lambda: [lifecycle.mermaid()]),
        ("planning", "Planning phases", lambda: [planning.mermaid()]),
    ),
    DATA_MODEL_PATH: (("data-model", "Data model", lambda: [data_model_mermaid()]),),
}


def render_page(path: Path, existing_text: str) -> str:
    """The page at ``path`` (one of :data:`PAGES`) with its generated blocks rewritten."""
    text = existing_text
    for name, heading, bodies in PAGES[path]:
        text = generate.replace_block(text, name, bodies(), heading)
    return text


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m scaffold.cli.diagram_sync [--check] [ROOT]``."""
    parser = argparse.ArgumentParser(prog="python -m scaffold.cli.diagram_sync")
    parser.add_argument("--check", action="store_true", help="exit 1 when a page is stale")
    parser.add_argument("root", nargs="?", type=Path, default=Path.cwd(), help="a checkout")
    args = parser.parse_args(argv)
    root, check = args.root, args.check
    stale = 0
    for rel in PAGES:
        path = root / rel
        try:
            current = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            current = ""
        except (OSError, UnicodeDecodeError) as exc:
            print(f"{path}: cannot read: {exc}", file=sys.stderr)
            return 2
        wanted = render_page(rel, current)
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
        print("run `python -m scaffold.cli.diagram_sync` to regenerate", file=sys.stderr)
    return 1 if stale else 0


if __name__ == "__main__":
    raise SystemExit(main())
