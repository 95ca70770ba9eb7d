"""What the planning tools share: their problems, their durable files, their schemas.

ChaosWhisperer hands over the BDD requirements (:mod:`~scaffold.signal_back.requirements`)
and PathSeeker the file map and the tasks (:mod:`~scaffold.signal_back.plan`) as tool
calls, not as prose: a malformed call is refused with every problem named by its field
path (``contexts.0.observables: at least one observable``) so the agent can fix it and
call again, and nothing refused reaches the disk or the backlog. Each tool's input
schema is generated from the pydantic model it is read with (:func:`input_schema`).

No MCP types here: :mod:`scaffold.signal_back.tools` serves these.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from scaffold.errors import StoreError
from scaffold.fsutil import fsync_dir, write_file
from scaffold.roles import Role

if TYPE_CHECKING:
    from scaffold.signal_back.records import SignalRecord

REQUIREMENTS_TOOL = "write-requirements"
CREATE_TASKS_TOOL = "create-tasks"

# Which role each planning tool is offered to (and the only role it serves).
TOOL_ROLES: dict[str, Role] = {
    REQUIREMENTS_TOOL: Role.CHAOSWHISPERER,
    CREATE_TASKS_TOOL: Role.PATHSEEKER,
}

_MAX_PROBLEMS = 20
_M = TypeVar("_M", bound=BaseModel)


@dataclass(frozen=True)
class Problem:
    """One reason a tool call was refused, addressed by its field path."""

    field: str
    reason: str

    def __str__(self) -> str:
        return f"{self.field}: {self.reason}" if self.field else self.reason


@dataclass(frozen=True)
class ToolReply:
    """What a tool answers: text for the agent, whether it is an error, the signal stored."""

    text: str
    is_error: bool
    record: SignalRecord | None = None


_ITEM_NAMES = {"contexts": "context", "observables": "observable", "tasks": "task"}
_TYPE_REASONS = {
    "missing": "required",
    "extra_forbidden": "unknown field",
    "string_type": "must be a string",
    "list_type": "must be a list",
    "tuple_type": "must be a list",
    "model_type": "must be an object",
    "model_attributes_type": "must be an object",
    "dict_type": "must be an object",
    "bool_type": "must be true or false",
    "string_too_short": "must not be empty",
}


def _reason(err: Mapping[str, Any]) -> str:
    kind = str(err["type"])
    ctx: Mapping[str, Any] = err.get("ctx") or {}
    loc = err["loc"]
    if kind in _TYPE_REASONS:
        return _TYPE_REASONS[kind]
    if kind == "string_too_long":
        return f"at most {ctx.get('max_length')} characters"
    if kind == "too_short":
        least = ctx.get("min_length", 1)
        item = _ITEM_NAMES.get(str(loc[-1]) if loc else "", "item")
        return f"at least one {item}" if least == 1 else f"at least {least} items"
    if kind == "too_long":
        return f"at most {ctx.get('max_length')} items"
    return str(err["msg"])


def problems_from(exc: ValidationError) -> list[Problem]:
    """Pydantic's errors as field paths and reasons an agent understands."""
    return [Problem(".".join(str(p) for p in e["loc"]), _reason(e)) for e in exc.errors()]


def _refusal(tool: str, problems: Sequence[Problem], nothing: str) -> ToolReply:
    shown = [f"- {p}" for p in problems[:_MAX_PROBLEMS]]
    if len(problems) > _MAX_PROBLEMS:
        shown.append(f"- ... and {len(problems) - _MAX_PROBLEMS} more")
    count = "1 problem" if len(problems) == 1 else f"{len(problems)} problems"
    text = (
        f"{tool} refused ({count}); {nothing}.\n"
        + "\n".join(shown)
        + f"\nFix these and call {tool} again."
    )
    return ToolReply(text, True)


def write_durably(directory: Path, name: str, data: bytes, *, exclusive: bool = False) -> bool:
    """``name`` in ``directory`` (made if needed), written atomically and fsynced.

    With ``exclusive`` an existing ``name`` is never replaced: False, nothing written."""
    if not directory.is_dir():
        directory.mkdir(parents=True, exist_ok=True)
        fsync_dir(directory.parent)  # the new directory's own name must survive too
    try:
        write_file(directory / name, data, exclusive=exclusive)
    except FileExistsError:
        return False
    return True


def _remove_durably(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
    fsync_dir(path.parent)


def read_model(path: Path, model: type[_M], what: str) -> _M | None:
    """``path`` read as ``model``, or None if it does not exist; StoreError (with the path)
    for a file that is unreadable or not ``what``."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise StoreError(path, f"unreadable: {exc.strerror or exc}") from exc
    try:
        return model.model_validate_json(data)
    except ValidationError as exc:
        raise StoreError(path, f"not {what}: {problems_from(exc)[0]}") from None


class _Input(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, validate_by_alias=True)


def _hint(description: str, **schema: Any) -> Any:
    """A field's description and schema keywords for the model, not checked by pydantic
    (the checks below name each problem in the agent's terms)."""
    return Field(description=description, json_schema_extra=schema or None)


def input_schema(model: type[BaseModel]) -> dict[str, Any]:
    """``model``'s JSON schema as one self-contained object (``$defs`` inlined, titles
    dropped): what a tool's ``inputSchema`` carries to the model."""
    schema = model.model_json_schema(by_alias=True)
    defs = schema.pop("$defs", {})

    def inline(node: Any, properties: bool = False) -> Any:
        if isinstance(node, list):
            return [inline(item) for item in node]
        if not isinstance(node, dict):
            return node
        if "$ref" in node:
            return inline(defs[node["$ref"].rsplit("/", 1)[-1]])
        return {
            key: inline(value, key == "properties")
            for key, value in node.items()
            if properties or key != "title"
        }

    result: dict[str, Any] = inline(schema)
    return result


@dataclass(frozen=True)
class PlanningTool:
    """A planning tool as the server offers it, bound to one run."""

    name: str
    description: str
    input_schema: dict[str, Any]
    handle: Callable[[Mapping[str, Any] | None], ToolReply]
