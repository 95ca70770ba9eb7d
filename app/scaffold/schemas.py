"""JSON Schemas of the files and payloads other programs read or write.

The quest file, its file on the state branch, the ``signal-back`` payload,
``.github/scaffold.yml`` and a journal history entry are described by pydantic models; their schemas are exported to
``schemas/`` so editors, agents and other tools can validate against them. The
files are generated, never edited: ``python -m scaffold.schemas`` rewrites them and
``python -m scaffold.schemas --check`` exits 1 when they lag the models (a test does
the same).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from scaffold.config import ScaffoldConfig
from scaffold.quest.model import HistoryEntry, Quest
from scaffold.signals import signal_json_schema
from scaffold.state.document import QuestStateFile

DIALECT = "https://json-schema.org/draft/2020-12/schema"

# Stem of each exported file (``schemas/<stem>.schema.json``), in a stable order, with the
# schema's source, title and description.
_EXPORTS: dict[str, tuple[Callable[[], dict[str, Any]], str, str]] = {
    "quest": (
        Quest.model_json_schema,
        "Quest",
        "The scaffold quest file: requirements, tasks, sessions, questions and cost.",
    ),
    "signal-back": (
        signal_json_schema,
        "SignalBack",
        "The payload of the signal-back MCP tool an agent calls to report its state.",
    ),
    "scaffold-config": (
        ScaffoldConfig.model_json_schema,
        "ScaffoldConfig",
        "The .github/scaffold.yml configuration; every key is optional.",
    ),
    "history-entry": (
        HistoryEntry.model_json_schema,
        "HistoryEntry",
        "One line of a quest's append-only journal.",
    ),
    "quest-state": (
        QuestStateFile.model_json_schema,
        "QuestStateFile",
        "A quest's file on the state branch (quests/<id>.json, quests/done/<id>.json): "
        "the quest, the forge's link and a bounded history.",
    ),
}


def export_schemas() -> dict[str, dict[str, Any]]:
    """The JSON Schema of each exported model, keyed by the stem of its file name."""
    out: dict[str, dict[str, Any]] = {}
    for name, (schema, title, description) in _EXPORTS.items():
        out[name] = {"$schema": DIALECT, **schema(), "title": title}
        out[name].setdefault("description", description)
    return out


def render_schema(schema: dict[str, Any]) -> str:
    """The exact text written to disk: sorted keys, indent 2, trailing newline."""
    return json.dumps(schema, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def rendered_schemas() -> dict[str, str]:
    """File name -> file text, for every exported schema."""
    return {f"{k}.schema.json": render_schema(v) for k, v in export_schemas().items()}


def write_schemas(directory: Path) -> list[Path]:
    """Write every schema into ``directory`` (created if missing); return the paths written."""
    directory.mkdir(parents=True, exist_ok=True)
    written = rendered_schemas()
    for name, text in written.items():
        (directory / name).write_text(text, encoding="utf-8")
    return [directory / name for name in written]


def stale_schemas(directory: Path) -> list[str]:
    """Names of the schema files in ``directory`` that are missing or differ from the models."""
    stale: list[str] = []
    for name, text in rendered_schemas().items():
        path = directory / name
        try:
            current = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            current = None
        if current != text:
            stale.append(name)
    return stale


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m scaffold.schemas")
    parser.add_argument("--check", action="store_true", help="exit 1 when the files lag")
    parser.add_argument("directory", nargs="?", type=Path, default=Path("schemas"))
    args = parser.parse_args(argv)
    if not args.check:
        for path in write_schemas(args.directory):
            print(path)
        return 0
    stale = stale_schemas(args.directory)
    for name in stale:
        print(f"{args.directory / name} is out of date", file=sys.stderr)
    if stale:
        print("run `python -m scaffold.schemas` to regenerate", file=sys.stderr)
    return 1 if stale else 0


if __name__ == "__main__":
    raise SystemExit(main())
