"""Keep ``docs/diagrams/03-state-machine.md`` generated from the transition tables.

The document holds prose a person writes and Mermaid blocks the tables write. Each
generated block sits between ``<!-- generated:<name>:begin -->`` and
``<!-- generated:<name>:end -->``; :func:`render_state_diagram_doc` replaces what is
between the markers and keeps everything else, so the picture cannot drift from
``lifecycle.TABLE`` and ``planning.PLAN_TABLE``. ``python -m scaffold.core.diagram_sync``
rewrites the file; ``--check`` exits 1 when it is stale.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from scaffold.config import DiagramsConfig
from scaffold.core import lifecycle, planning

STATE_DIAGRAM_PATH = Path(DiagramsConfig().states)

# name -> (heading used when the block is missing, the generator of its Mermaid text)
GENERATED_BLOCKS: dict[str, tuple[str, Callable[[], str]]] = {
    "lifecycle": ("Task lifecycle", lambda: lifecycle.mermaid()),
    "planning": ("Planning phases", lambda: planning.mermaid()),
}


def begin_marker(name: str) -> str:
    return f"<!-- generated:{name}:begin -->"


def end_marker(name: str) -> str:
    return f"<!-- generated:{name}:end -->"


def generated_block(name: str) -> str:
    """The full generated block for ``name``, markers included."""
    _, generate = GENERATED_BLOCKS[name]
    body = generate().rstrip("\n")
    return f"{begin_marker(name)}\n```mermaid\n{body}\n```\n{end_marker(name)}"


def render_state_diagram_doc(existing_text: str) -> str:
    """Return ``existing_text`` with every generated block replaced by the tables' output.

    A block whose markers are missing is appended under its own heading, so a new or
    damaged file heals on the next run instead of silently losing the diagram.
    """
    text = existing_text
    for name, (heading, _) in GENERATED_BLOCKS.items():
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


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m scaffold.core.diagram_sync [--check] [PATH]``."""
    args = list(sys.argv[1:] if argv is None else argv)
    check = "--check" in args
    rest = [a for a in args if a != "--check"]
    if len(rest) > 1 or any(a.startswith("-") for a in rest):
        print("usage: python -m scaffold.core.diagram_sync [--check] [PATH]", file=sys.stderr)
        return 2
    path = Path(rest[0]) if rest else STATE_DIAGRAM_PATH
    try:
        current = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        current = ""
    except (OSError, UnicodeDecodeError) as exc:
        print(f"{path}: cannot read: {exc}", file=sys.stderr)
        return 2
    wanted = render_state_diagram_doc(current)
    if check:
        if current != wanted:
            print(f"{path} lags the transition tables;", file=sys.stderr)
            print("run `python -m scaffold.core.diagram_sync` to regenerate", file=sys.stderr)
            return 1
        return 0
    if current != wanted:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(wanted, encoding="utf-8")
        print(f"rewrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
