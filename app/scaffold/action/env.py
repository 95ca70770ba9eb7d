"""What the GitHub Actions runner tells a step: its environment and the event payload."""

from __future__ import annotations

import json
import os
import re
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scaffold.errors import UsageError

SHA = re.compile(r"^[0-9a-f]{40}([0-9a-f]{24})?\Z", re.ASCII)
# Where a slot step writes its files, under $RUNNER_TEMP.
SLOT_OUTPUT_DIR = "scaffold-slot"


@dataclass(frozen=True)
class ActionEnv:
    """The variables of a step. Paths are ``None`` when the variable is unset or empty."""

    event_name: str
    event_path: Path | None
    workspace: Path | None
    output: Path | None
    step_summary: Path | None
    runner_temp: Path | None
    sha: str | None

    def temp_dir(self) -> Path:
        """``$RUNNER_TEMP``, or the system's temporary folder outside Actions."""
        return self.runner_temp or Path(tempfile.gettempdir())


def _path(environ: Mapping[str, str], name: str) -> Path | None:
    value = environ.get(name, "")
    return Path(value) if value else None


def action_env() -> ActionEnv:
    env = os.environ
    sha = env.get("GITHUB_SHA", "").strip().lower()
    return ActionEnv(
        event_name=env.get("GITHUB_EVENT_NAME", "").strip(),
        event_path=_path(env, "GITHUB_EVENT_PATH"),
        workspace=_path(env, "GITHUB_WORKSPACE"),
        output=_path(env, "GITHUB_OUTPUT"),
        step_summary=_path(env, "GITHUB_STEP_SUMMARY"),
        runner_temp=_path(env, "RUNNER_TEMP"),
        sha=sha if SHA.match(sha) else None,
    )


def load_event(path: Path | None) -> dict[str, Any]:
    """The webhook payload the run was triggered by (``{}`` when there is none)."""
    if path is None:
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise UsageError(f"cannot read the event payload {path}: {exc}") from None
    if not isinstance(data, dict):
        raise UsageError(f"the event payload {path} is not a JSON object")
    return data
