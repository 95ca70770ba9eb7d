"""Step outputs (``$GITHUB_OUTPUT``) and the job summary (``$GITHUB_STEP_SUMMARY``).

Outputs use the heredoc form with a random delimiter, so a value with newlines (or
one that looks like ``other=...``) stays one value.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Mapping
from pathlib import Path

from scaffold.errors import UsageError

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]{0,99}\Z", re.ASCII)


def format_output(name: str, value: str) -> str:
    """One output in the multiline-safe form, ending with a newline."""
    if not _NAME.match(name):
        raise UsageError(f"not a valid output name: {name!r}")
    delim = f"ghadelimiter_{secrets.token_hex(16)}"
    if delim in value or delim in name:
        raise UsageError(f"the output delimiter occurs in the value of {name!r}")
    return f"{name}<<{delim}\n{value}\n{delim}\n"


def write_outputs(path: Path | None, values: Mapping[str, str]) -> None:
    """Append ``values`` to the outputs file; nothing when there is none (a local run)."""
    if path is None:
        return
    with path.open("a", encoding="utf-8") as fh:
        fh.write("".join(format_output(name, value) for name, value in values.items()))


def append_summary(path: Path | None, markdown: str) -> None:
    """Add ``markdown`` to the job summary (no file: not running in Actions)."""
    if path is None:
        return
    with path.open("a", encoding="utf-8") as fh:
        fh.write(markdown if markdown.endswith("\n") else markdown + "\n")
