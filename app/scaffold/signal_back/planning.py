"""The planning tools of the ``scaffold`` MCP server: ``write-requirements`` and ``create-tasks``.

ChaosWhisperer hands over the BDD requirements (contexts and their observables) and
PathSeeker hands over the file map and the tasks with their dependencies as tool
calls, not as prose: a malformed plan is refused with every problem named by its
field path (``contexts.0.observables: at least one observable``) so the agent can
fix it and call again, and nothing refused reaches the disk or the backlog.

Accepted requirements replace ``requirements.json`` in the run's signal dir.
Accepted tasks are created in the repository's Backlog.md backlog in dependency
order (plan keys become ``TASK-<n>`` ids), and ``plan.json`` in the signal dir
records which key became which id. ``plan.json`` is claimed *before* the first task
is created and rewritten after each one, so a second call -- or a call after a crash
half-way -- is refused instead of creating duplicates; ``complete`` is false while
(or if) the creation did not finish. The orchestrator reads both files with
:func:`read_requirements` and :func:`read_plan`.

No MCP types here: :mod:`scaffold.signal_back.tools` serves these.
"""

from __future__ import annotations

import contextlib
import heapq
import os
import re
import secrets
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, WithJsonSchema

from scaffold.backlog import (
    BacklogSnapshot,
    BacklogTask,
    create_task,
    describe_cycle,
    find_cycles,
    load_backlog,
    sanitize_filename,
)
from scaffold.errors import BacklogError, InvalidIdError, StoreError
from scaffold.fsutil import fsync_dir
from scaffold.ids import normalize_task_id
from scaffold.quest.model import Context, Requirements
from scaffold.roles import Role

REQUIREMENTS_TOOL = "write-requirements"
CREATE_TASKS_TOOL = "create-tasks"
REQUIREMENTS_FILE = "requirements.json"
PLAN_FILE = "plan.json"

# Which role each planning tool is offered to (and the only role it serves).
TOOL_ROLES: dict[str, Role] = {
    REQUIREMENTS_TOOL: Role.CHAOSWHISPERER,
    CREATE_TASKS_TOOL: Role.PATHSEEKER,
}

PRIORITIES = ("high", "medium", "low")
MAX_TITLE = 200
KEY_RE = re.compile(r"^[a-z0-9-]{1,40}\Z", re.ASCII)
# Room a file name needs beside the title: "task-123456789.12 - " + ".md".
_NAME_OVERHEAD = 32
_MAX_NAME_BYTES = 255
_MAX_PROBLEMS = 20


# --------------------------------------------------------------------------- problems


@dataclass(frozen=True)
class Problem:
    """One reason a tool call was refused, addressed by its field path."""

    field: str
    reason: str

    def __str__(self) -> str:
        return f"{self.field}: {self.reason}" if self.field else self.reason


@dataclass(frozen=True)
class ToolReply:
    """What a planning tool answers: text for the agent, and whether it is an error."""

    text: str
    is_error: bool


def _loc(parts: Sequence[int | str]) -> str:
    return ".".join(str(p) for p in parts)


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
    return [Problem(_loc(e["loc"]), _reason(e)) for e in exc.errors()]


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


# --------------------------------------------------------------------------- durable files


def _ensure_dir(directory: Path) -> None:
    if not directory.is_dir():
        directory.mkdir(parents=True, exist_ok=True)
        fsync_dir(directory.parent)  # the new directory's own name must survive too


def _temp_file(directory: Path, name: str, data: bytes) -> Path:
    tmp = directory / f".{name}.{os.getpid()}.{secrets.token_hex(4)}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    return tmp


def write_durably(directory: Path, name: str, data: bytes) -> Path:
    """Temp file + fsync, ``os.replace`` over ``name``, fsync the directory."""
    _ensure_dir(directory)
    tmp = _temp_file(directory, name, data)
    try:
        os.replace(tmp, directory / name)
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
    fsync_dir(directory)
    return directory / name


def claim_durably(directory: Path, name: str, data: bytes) -> bool:
    """Like :func:`write_durably`, but only if ``name`` does not exist yet (no clobber).

    Returns False when it exists. A hard link is the atomic "create if absent"; a file
    system without hard links falls back to a check and ``os.replace``.
    """
    _ensure_dir(directory)
    tmp = _temp_file(directory, name, data)
    target = directory / name
    try:
        try:
            os.link(tmp, target)
        except FileExistsError:
            return False
        except OSError:
            if target.exists():
                return False
            os.replace(tmp, target)
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
    fsync_dir(directory)
    return True


def _remove_durably(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
    fsync_dir(path.parent)


def _read_bytes(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise StoreError(path, f"unreadable: {exc.strerror or exc}") from exc


# --------------------------------------------------------------------------- requirements


def requirements_problems(requirements: Requirements) -> list[Problem]:
    """What the model's types do not say: at least one context, unique ids, no blank text."""
    problems: list[Problem] = []
    if not requirements.contexts:
        problems.append(Problem("contexts", "at least one context"))
    seen_contexts: dict[str, int] = {}
    for i, ctx in enumerate(requirements.contexts):
        where = f"contexts.{i}"
        problems += _blank(where, ("id", ctx.id), ("description", ctx.description))
        if ctx.id in seen_contexts:
            first = seen_contexts[ctx.id]
            problems.append(Problem(f"{where}.id", f"duplicate id {ctx.id!r} (contexts.{first})"))
        seen_contexts.setdefault(ctx.id, i)
        seen_observables: dict[str, int] = {}
        for j, obs in enumerate(ctx.observables):
            at = f"{where}.observables.{j}"
            problems += _blank(at, ("id", obs.id), ("description", obs.description))
            if obs.id in seen_observables:
                first = seen_observables[obs.id]
                reason = f"duplicate id {obs.id!r} in this context ({where}.observables.{first})"
                problems.append(Problem(f"{at}.id", reason))
            seen_observables.setdefault(obs.id, j)
    return problems


def _blank(where: str, *fields: tuple[str, str]) -> list[Problem]:
    return [Problem(f"{where}.{name}", "must not be blank") for name, v in fields if not v.strip()]


def parse_requirements(arguments: Mapping[str, Any] | None) -> Requirements | list[Problem]:
    """The requirements in a ``write-requirements`` call, or every problem with it."""
    args = dict(arguments or {})
    extra = sorted(set(args) - {"contexts"})
    if extra:
        return [Problem(name, "unknown field (only 'contexts' is accepted)") for name in extra]
    if "contexts" not in args:
        return [Problem("contexts", "required")]
    try:
        requirements = Requirements.model_validate({"contexts": args["contexts"]})
    except ValidationError as exc:
        return problems_from(exc)
    return requirements_problems(requirements) or requirements


def write_requirements(signal_dir: Path | str, requirements: Requirements) -> Path:
    """Store the requirements durably as ``requirements.json``, replacing earlier ones."""
    data = requirements.model_dump_json(indent=2).encode()
    return write_durably(Path(signal_dir), REQUIREMENTS_FILE, data)


def read_requirements(signal_dir: Path | str) -> Requirements | None:
    """The requirements ChaosWhisperer handed over, or None if it never did.

    Raises :class:`StoreError` (with the path) for a file that is unreadable or not
    valid requirements.
    """
    path = Path(signal_dir) / REQUIREMENTS_FILE
    data = _read_bytes(path)
    if data is None:
        return None
    try:
        requirements = Requirements.model_validate_json(data)
    except ValidationError as exc:
        raise StoreError(path, f"not a requirements file: {problems_from(exc)[0]}") from None
    problems = requirements_problems(requirements)
    if problems:
        raise StoreError(path, f"invalid requirements: {problems[0]}")
    return requirements


def write_requirements_tool(signal_dir: Path, arguments: Mapping[str, Any] | None) -> ToolReply:
    """The ``write-requirements`` tool: check, store, confirm."""
    parsed = parse_requirements(arguments)
    if isinstance(parsed, list):
        return _refusal(REQUIREMENTS_TOOL, parsed, "nothing was stored")
    try:
        write_requirements(signal_dir, parsed)
    except OSError as exc:
        reason = f"storage error: {exc.strerror or exc}"
        return ToolReply(
            f"requirements NOT recorded ({reason}). Call {REQUIREMENTS_TOOL} again.", True
        )
    contexts = len(parsed.contexts)
    observables = sum(len(c.observables) for c in parsed.contexts)
    text = (
        f"requirements recorded: {contexts} context{'s' * (contexts != 1)}, "
        f"{observables} observable{'s' * (observables != 1)} (replacing any earlier version)."
    )
    return ToolReply(text, False)


# --------------------------------------------------------------------------- plan input


class _Input(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, validate_by_alias=True)


def _hint(description: str, **schema: Any) -> Any:
    """A field's description and schema keywords for the model, not checked by pydantic
    (the checks below name each problem in the agent's terms)."""
    return Field(description=description, json_schema_extra=schema or None)


class TaskSpec(_Input):
    """One task as PathSeeker proposes it; ``key`` names it inside the plan."""

    key: Annotated[
        str,
        _hint(
            "Your name for the task inside this plan: 1-40 of a-z, 0-9, '-'.",
            pattern="^[a-z0-9-]{1,40}$",
        ),
    ]
    title: Annotated[str, _hint("One line, at most 200 characters.", maxLength=MAX_TITLE)]
    description: Annotated[str, _hint("What the task is about and why.")] = ""
    acceptance_criteria: list[str] = Field(
        default_factory=list, alias="acceptanceCriteria", description="Checkable outcomes."
    )
    depends_on: list[str] = Field(
        default_factory=list,
        alias="dependsOn",
        description="Keys of tasks in this plan, or ids of existing backlog tasks "
        "(e.g. 'TASK-3'), that must be done first.",
    )
    priority: Annotated[
        str | None, WithJsonSchema({"type": "string", "enum": list(PRIORITIES)})
    ] = None


class PlanInput(_Input):
    """The arguments of a ``create-tasks`` call."""

    file_map: list[str] = Field(
        alias="fileMap",
        description="Files the work touches, relative to the repository root (no '..').",
    )
    tasks: Annotated[list[TaskSpec], Field(min_length=1)]


class RequirementsInput(_Input):
    """The arguments of a ``write-requirements`` call."""

    contexts: Annotated[tuple[Context, ...], Field(min_length=1)]


@dataclass(frozen=True)
class ValidPlan:
    """A plan that passed every check: creation order and each task's resolved dependencies.

    ``depends_on`` maps a key to its dependencies, each either ``("key", k)`` for a task
    of this plan or ``("id", "TASK-3")`` for a task already in the backlog.
    """

    file_map: tuple[str, ...]
    order: tuple[TaskSpec, ...]
    depends_on: Mapping[str, tuple[tuple[str, str], ...]]
    priorities: Mapping[str, str | None]


def _file_map_problems(paths: Sequence[str]) -> list[Problem]:
    problems: list[Problem] = []
    for i, raw in enumerate(paths):
        where = f"fileMap.{i}"
        path = raw.strip()
        if not path:
            problems.append(Problem(where, "must not be empty"))
        elif any(ord(ch) < 32 for ch in path):
            problems.append(Problem(where, f"{raw!r} contains a control character"))
        elif PurePosixPath(path).is_absolute() or PureWindowsPath(path).anchor:
            problems.append(
                Problem(where, f"{raw!r} is absolute; give it relative to the repo root")
            )
        elif ".." in re.split(r"[/\\]", path):
            problems.append(Problem(where, f"{raw!r} leaves the repository ('..' is not allowed)"))
    return problems


def _title_problems(where: str, title: str) -> list[Problem]:
    text = title.strip()
    if not text:
        return [Problem(where, "must not be empty")]
    if "\n" in text or "\r" in text:
        return [Problem(where, "must be a single line")]
    if len(text) > MAX_TITLE:
        return [Problem(where, f"at most {MAX_TITLE} characters (got {len(text)})")]
    if len(sanitize_filename(text).encode()) + _NAME_OVERHEAD > _MAX_NAME_BYTES:
        return [Problem(where, "too long for a task file name; shorten it")]
    return []


def _looks_like_id(key: str, prefix: str) -> bool:
    try:
        normalize_task_id(key, prefix)
    except InvalidIdError:
        return False
    return True


def _task_problems(
    i: int, spec: TaskSpec, snapshot: BacklogSnapshot, first_of_key: Mapping[str, int]
) -> list[Problem]:
    where = f"tasks.{i}"
    prefix = snapshot.config.task_prefix
    problems: list[Problem] = []
    if not KEY_RE.match(spec.key):
        reason = f"{spec.key!r} is not a key; use 1-40 characters of a-z, 0-9 and '-'"
        problems.append(Problem(f"{where}.key", reason))
    elif _looks_like_id(spec.key, prefix):
        reason = f"{spec.key!r} looks like a backlog task id; choose a descriptive key"
        problems.append(Problem(f"{where}.key", reason))
    elif first_of_key[spec.key] != i:
        reason = f"duplicate key {spec.key!r} (tasks.{first_of_key[spec.key]})"
        problems.append(Problem(f"{where}.key", reason))
    problems += _title_problems(f"{where}.title", spec.title)
    for k, item in enumerate(spec.acceptance_criteria):
        if not item.strip():
            problems.append(Problem(f"{where}.acceptanceCriteria.{k}", "must not be empty"))
    if spec.priority is not None:
        level = " ".join(spec.priority.split()).lower()
        allowed = [p for p in PRIORITIES if p in snapshot.config.priorities]
        if level not in allowed:
            reason = f"{spec.priority!r} is not a priority; use one of {', '.join(allowed)}"
            problems.append(Problem(f"{where}.priority", reason))
    return problems


def _resolve(
    i: int, spec: TaskSpec, keys: set[str], snapshot: BacklogSnapshot
) -> tuple[list[tuple[str, str]], list[Problem]]:
    resolved: list[tuple[str, str]] = []
    problems: list[Problem] = []
    for k, dep in enumerate(spec.depends_on):
        where = f"tasks.{i}.dependsOn.{k}"
        name = dep.strip()
        target: tuple[str, str] | None = None
        if name in keys:
            target = ("key", name)
        else:
            found = snapshot.get(name) if name else None
            if found is not None:
                target = ("id", found.id)
        if target is None:
            reason = f"{dep!r} is neither a key of this plan nor an existing backlog task id"
            problems.append(Problem(where, reason))
        elif target not in resolved:
            resolved.append(target)
    return resolved, problems


def _creation_order(
    specs: Sequence[TaskSpec], edges: Mapping[str, Sequence[str]]
) -> tuple[TaskSpec, ...]:
    """Dependencies first; among tasks free to go, the plan's own order (Kahn's algorithm)."""
    index = {s.key: n for n, s in enumerate(specs)}
    waiting = {s.key: {d for d in edges[s.key] if d != s.key} for s in specs}
    dependents: dict[str, list[str]] = {s.key: [] for s in specs}
    for key, deps in waiting.items():
        for dep in deps:
            dependents[dep].append(key)
    ready = [index[k] for k, deps in waiting.items() if not deps]
    heapq.heapify(ready)
    order: list[TaskSpec] = []
    while ready:
        spec = specs[heapq.heappop(ready)]
        order.append(spec)
        for child in dependents[spec.key]:
            waiting[child].discard(spec.key)
            if not waiting[child]:
                heapq.heappush(ready, index[child])
    return tuple(order)


def validate_plan(
    arguments: Mapping[str, Any] | None, snapshot: BacklogSnapshot
) -> ValidPlan | list[Problem]:
    """Check a ``create-tasks`` call against itself and the backlog; every problem, or the plan."""
    try:
        plan = PlanInput.model_validate(dict(arguments or {}))
    except ValidationError as exc:
        return problems_from(exc)
    problems = _file_map_problems(plan.file_map)
    first_of_key: dict[str, int] = {}
    for i, spec in enumerate(plan.tasks):
        first_of_key.setdefault(spec.key, i)
    keys = set(first_of_key)
    depends_on: dict[str, tuple[tuple[str, str], ...]] = {}
    for i, spec in enumerate(plan.tasks):
        problems += _task_problems(i, spec, snapshot, first_of_key)
        resolved, unresolved = _resolve(i, spec, keys, snapshot)
        problems += unresolved
        depends_on.setdefault(spec.key, tuple(resolved))
    edges = {key: [v for kind, v in deps if kind == "key"] for key, deps in depends_on.items()}
    for cycle in find_cycles(edges):
        members = ", ".join(sorted(cycle))
        reason = (
            f"dependency cycle among {members}: {describe_cycle(cycle)} "
            "(read 'a -> b' as 'a depends on b'); remove one of these dependencies"
        )
        problems.append(Problem("tasks.dependsOn", reason))
    if problems:
        return problems
    priorities = {
        s.key: " ".join(s.priority.split()).lower() if s.priority else None for s in plan.tasks
    }
    file_map = tuple(dict.fromkeys(p.strip() for p in plan.file_map))
    order = _creation_order(plan.tasks, edges)
    return ValidPlan(file_map, order, depends_on, priorities)


# --------------------------------------------------------------------------- plan record


class _Record(BaseModel):
    model_config = ConfigDict(
        extra="ignore",
        frozen=True,
        validate_by_alias=True,
        validate_by_name=True,
        serialize_by_alias=True,
    )


class PlannedTask(_Record):
    """One created task: the plan's key, the backlog id it became, and its dependencies."""

    key: str
    id: str
    title: str
    dependencies: tuple[str, ...] = ()


class PlanRecord(_Record):
    """``plan.json``: the file map and the tasks created, in creation order.

    ``complete`` is false while the tasks are being created, and stays false if that
    was interrupted: then ``tasks`` lists what exists.
    """

    file_map: tuple[str, ...] = Field(alias="fileMap")
    tasks: tuple[PlannedTask, ...]
    complete: bool = True


QUEST_LABEL_PREFIX = "quest:"


def _plan_bytes(record: PlanRecord) -> bytes:
    return record.model_dump_json(indent=2).encode()


def read_plan(signal_dir: Path | str) -> PlanRecord | None:
    """What PathSeeker's ``create-tasks`` created, or None if it never did.

    Raises :class:`StoreError` (with the path) for an unreadable or malformed file.
    """
    path = Path(signal_dir) / PLAN_FILE
    data = _read_bytes(path)
    if data is None:
        return None
    try:
        return PlanRecord.model_validate_json(data)
    except ValidationError as exc:
        raise StoreError(path, f"not a plan record: {problems_from(exc)[0]}") from None


class _Creation:
    """Creates the tasks of one valid plan, recording progress in ``plan.json``."""

    def __init__(
        self, repo_root: Path, signal_dir: Path, plan: ValidPlan, labels: tuple[str, ...] = ()
    ) -> None:
        self.repo_root = repo_root
        self.signal_dir = signal_dir
        self.plan = plan
        self.labels = labels
        self.created: list[BacklogTask] = []
        self.planned: list[PlannedTask] = []

    def record(self, *, complete: bool) -> PlanRecord:
        return PlanRecord(file_map=self.plan.file_map, tasks=tuple(self.planned), complete=complete)

    def claim(self) -> bool:
        return claim_durably(self.signal_dir, PLAN_FILE, _plan_bytes(self.record(complete=False)))

    def save(self, *, complete: bool) -> None:
        write_durably(self.signal_dir, PLAN_FILE, _plan_bytes(self.record(complete=complete)))

    def create_all(self) -> None:
        ids: dict[str, str] = {}
        for spec in self.plan.order:
            deps = [ids[v] if kind == "key" else v for kind, v in self.plan.depends_on[spec.key]]
            task = create_task(
                self.repo_root,
                spec.title.strip(),
                description=spec.description,
                dependencies=deps,
                priority=self.plan.priorities[spec.key],
                acceptance_criteria=[c.strip() for c in spec.acceptance_criteria],
                labels=self.labels,
            )
            self.created.append(task)
            ids[spec.key] = task.id
            self.planned.append(
                PlannedTask(
                    key=spec.key,
                    id=task.id,
                    title=task.title,
                    dependencies=tuple(task.dependencies),
                )
            )
            self.save(complete=False)
        self.save(complete=True)

    def roll_back(self) -> list[str]:
        """Remove the tasks created so far; returns the ids that could not be removed."""
        left: list[str] = []
        for task in reversed(self.created):
            try:
                _remove_durably(task.path)
            except OSError:
                left.append(task.id)
        if left:
            self.planned = [p for p in self.planned if p.id in left]
            with contextlib.suppress(OSError):
                self.save(complete=False)  # keep the claim: a retry must not duplicate them
        else:
            with contextlib.suppress(OSError):
                _remove_durably(self.signal_dir / PLAN_FILE)
        return left


def _mapping_text(record: PlanRecord) -> str:
    return ", ".join(f"{t.key} -> {t.id}" for t in record.tasks) or "none"


def _already_created(signal_dir: Path) -> ToolReply | None:
    try:
        earlier = read_plan(signal_dir)
    except StoreError as exc:
        text = (
            f"{CREATE_TASKS_TOOL} refused: a plan was already recorded but cannot be read "
            f"({exc}); nothing new was created. Report this with signal-back."
        )
        return ToolReply(text, True)
    if earlier is None:
        return None
    if not earlier.complete:
        text = (
            f"{CREATE_TASKS_TOOL} refused: an earlier call was interrupted after creating "
            f"{_mapping_text(earlier)}; nothing new was created, to avoid duplicates. "
            "Report this with signal-back (needs-user-input)."
        )
        return ToolReply(text, True)
    text = (
        f"{CREATE_TASKS_TOOL} refused: the tasks of this plan were already created "
        f"({_mapping_text(earlier)}); nothing new was created. Do not call {CREATE_TASKS_TOOL} "
        "again; use these ids."
    )
    return ToolReply(text, True)


def create_tasks_tool(
    signal_dir: Path,
    repo_root: Path | None,
    arguments: Mapping[str, Any] | None,
    *,
    quest_id: str | None = None,
) -> ToolReply:
    """The ``create-tasks`` tool: refuse a repeat, check the plan, create, record, answer."""
    if repo_root is None:
        text = (
            f"{CREATE_TASKS_TOOL} is unavailable: this scaffold server was started without a "
            "repository root (--repo-root or SCAFFOLD_REPO_ROOT); no tasks were created. "
            "Report this with signal-back (needs-user-input)."
        )
        return ToolReply(text, True)
    repeat = _already_created(signal_dir)
    if repeat is not None:
        return repeat
    try:
        snapshot = load_backlog(repo_root)
    except BacklogError as exc:
        text = (
            f"{CREATE_TASKS_TOOL} failed: cannot read the backlog ({exc}); no tasks were created."
        )
        return ToolReply(text, True)
    checked = validate_plan(arguments, snapshot)
    if isinstance(checked, list):
        return _refusal(CREATE_TASKS_TOOL, checked, "no tasks were created")
    return create_planned_tasks(repo_root, signal_dir, checked, quest_id=quest_id)


def quest_label(quest_id: str) -> str:
    """The Backlog.md label that says which quest planned a task (and so owns it)."""
    return f"{QUEST_LABEL_PREFIX}{quest_id}"


def create_planned_tasks(
    repo_root: Path, signal_dir: Path, plan: ValidPlan, *, quest_id: str | None = None
) -> ToolReply:
    """Claim ``plan.json``, create the tasks in order, record each; roll back on failure.

    With ``quest_id`` each task is labelled ``quest:<id>``: the quest that planned it
    owns it, and no other quest of the repository adopts it."""
    labels = (quest_label(quest_id),) if quest_id else ()
    creation = _Creation(repo_root, signal_dir, plan, labels)
    try:
        claimed = creation.claim()
    except OSError as exc:
        text = f"{CREATE_TASKS_TOOL} failed (storage error: {exc.strerror or exc}); no tasks were created."
        return ToolReply(text, True)
    if not claimed:
        return _already_created(signal_dir) or ToolReply(
            f"{CREATE_TASKS_TOOL} refused: already running.", True
        )
    try:
        creation.create_all()
    except (BacklogError, OSError) as exc:
        left = creation.roll_back()
        if left:
            tail = (
                f"tasks {', '.join(left)} could not be removed again; do not call "
                f"{CREATE_TASKS_TOOL} again. Report this with signal-back (needs-user-input)."
            )
        else:
            tail = f"no tasks were left behind. Call {CREATE_TASKS_TOOL} again."
        return ToolReply(f"{CREATE_TASKS_TOOL} failed: {exc}; {tail}", True)
    record = creation.record(complete=True)
    text = (
        f"tasks created: {_mapping_text(record)}. Refer to them by these ids from now on; "
        f"do not call {CREATE_TASKS_TOOL} again."
    )
    return ToolReply(text, False)


# --------------------------------------------------------------------------- tool specs


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


REQUIREMENTS_DESCRIPTION = (
    "Hand the BDD requirements of this quest to the scaffold orchestrator: contexts "
    "(situations) each with at least one observable (what a person can see). Ids must be "
    "unique (contexts among themselves, observables within their context). Calling it "
    "again replaces the earlier requirements. Call it before signal-back complete."
)
TASKS_DESCRIPTION = (
    "Create the quest's tasks in the repository backlog, once: the file map and the tasks "
    "with their dependencies (dependsOn: keys of this plan or existing ids like 'TASK-3'; "
    "no cycles). Answers with the backlog id each key became. A refused plan creates "
    "nothing; fix it and call again. Call it before signal-back complete."
)


@dataclass(frozen=True)
class PlanningTool:
    """A planning tool as the server offers it, bound to one run."""

    name: str
    description: str
    input_schema: dict[str, Any]
    handle: Callable[[Mapping[str, Any] | None], ToolReply]


def planning_tools(
    role: Role, signal_dir: Path, repo_root: Path | None, quest_id: str | None = None
) -> list[PlanningTool]:
    """The planning tools offered to ``role``: one for ChaosWhisperer and PathSeeker, else none."""
    if role is Role.CHAOSWHISPERER:

        def write(arguments: Mapping[str, Any] | None) -> ToolReply:
            return write_requirements_tool(signal_dir, arguments)

        return [
            PlanningTool(
                REQUIREMENTS_TOOL, REQUIREMENTS_DESCRIPTION, input_schema(RequirementsInput), write
            )
        ]
    if role is Role.PATHSEEKER:

        def create(arguments: Mapping[str, Any] | None) -> ToolReply:
            return create_tasks_tool(signal_dir, repo_root, arguments, quest_id=quest_id)

        return [PlanningTool(CREATE_TASKS_TOOL, TASKS_DESCRIPTION, input_schema(PlanInput), create)]
    return []
