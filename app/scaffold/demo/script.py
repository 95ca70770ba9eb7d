"""The scripted agent's script: runs, each matched to an invocation, and their actions.

A script is a JSON list of runs (or ``{"runs": [...], "strict_resume": bool}``); see
:mod:`scaffold.demo.scripted` for what each action does.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from scaffold.errors import InvalidIdError
from scaffold.ids import normalize_task_id


class Action(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Write(Action):
    write: str
    content: str


class Append(Action):
    append: str
    content: str


class Delete(Action):
    delete: str


class RunCommand(Action):
    run: Annotated[list[str], Field(min_length=1)]


class Say(Action):
    say: str


class Sleep(Action):
    sleep: Annotated[float, Field(ge=0)]


class PrintGarbage(Action):
    print_garbage: str


class PrintLongLine(Action):
    print_long_line: Annotated[int, Field(gt=0)]


class Hang(Action):
    hang: Literal[True]


class Crash(Action):
    crash: Annotated[int, Field(ge=0, le=255)]


class SendSignal(Action):
    signal: dict[str, Any]


class CallTool(Action):
    """Any of the run's tools (``write-requirements``, ``create-tasks``) with ``arguments``."""

    call: str
    arguments: dict[str, Any]


class ExpectPromptContains(Action):
    expect_prompt_contains: str


# Each action is an object with exactly one of these keys (its first field).
_ACTIONS: dict[str, type[Action]] = {
    next(iter(cls.model_fields)): cls for cls in Action.__subclasses__()
}


class Run(BaseModel):
    """One scripted agent run and the invocations it answers."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    role: str | None = None
    step: str | None = None
    attempt: Annotated[int, Field(ge=1)] | None = None
    prompt_contains: str | None = None
    resumed: bool | None = None
    expect_resumed: bool | None = None
    cost_usd: Annotated[float, Field(ge=0)] = 0.01
    actions: list[dict[str, Any]] = Field(default_factory=list)

    def matches(self, role: str, step: str, attempt: int, prompt: str, resumed: bool) -> bool:
        return (
            (self.role is None or self.role.lower() == role.lower())
            and (self.step is None or _same_step(self.step, step))
            and (self.attempt is None or self.attempt == attempt)
            and (self.prompt_contains is None or self.prompt_contains in prompt)
            and (self.resumed is None or self.resumed == resumed)
        )

    def parsed_actions(self) -> list[Action]:
        return [parse_action(raw) for raw in self.actions]


class Script(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    runs: list[Run]
    strict_resume: bool = False
    """Refuse ``--resume`` of a session this state dir never saw, as Claude does."""


class ScriptError(Exception):
    """The script is unusable or one of its expectations failed (exit 3)."""


def parse_action(raw: Any) -> Action:
    if not isinstance(raw, dict):
        raise ScriptError(f"an action must be an object, got {raw!r}")
    kinds = [k for k in raw if k in _ACTIONS]
    if len(kinds) != 1:
        raise ScriptError(f"an action needs exactly one of {sorted(_ACTIONS)}: {raw!r}")
    try:
        return _ACTIONS[kinds[0]].model_validate(raw)
    except ValidationError as exc:
        raise ScriptError(f"bad {kinds[0]} action {raw!r}: {exc.errors()[0]['msg']}") from None


def load_script(path: Path) -> Script:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ScriptError(f"cannot read agent script {path}: {exc}") from None
    if isinstance(data, list):
        data = {"runs": data}
    try:
        script = Script.model_validate(data)
        for run in script.runs:
            run.parsed_actions()
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"])
        raise ScriptError(f"bad agent script {path}: {where}: {err['msg']}") from None
    return script


def _same_step(a: str, b: str) -> bool:
    if a == b:
        return True
    try:
        return normalize_task_id(a) == normalize_task_id(b)
    except InvalidIdError:
        return False
