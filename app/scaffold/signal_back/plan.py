"""``create-tasks``: PathSeeker's plan, checked and created in the backlog once.

Accepted tasks are created in the repository's Backlog.md backlog in dependency
order (plan keys become ``TASK-<n>`` ids), and ``plan.json`` in the signal dir
records which key became which id. ``plan.json`` is claimed *before* the first task
is created and rewritten after each one, so a second call -- or a call after a crash
half-way -- is refused instead of creating duplicates; ``complete`` is false while
(or if) the creation did not finish. The orchestrator reads it with :func:`read_plan`.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Mapping, Sequence
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
from scaffold.ids import normalize_task_id
from scaffold.signal_back.planning import (
    CREATE_TASKS_TOOL,
    Problem,
    ToolReply,
    _hint,
    _Input,
    _refusal,
    _remove_durably,
    problems_from,
    read_model,
    write_durably,
)

PLAN_FILE = "plan.json"
PRIORITIES = ("high", "medium", "low")
MAX_TITLE = 200
KEY_RE = re.compile(r"^[a-z0-9-]{1,40}\Z", re.ASCII)
# Room a file name needs beside the title: "task-123456789.12 - " + ".md".
_NAME_OVERHEAD = 32
_MAX_NAME_BYTES = 255
DESCRIPTION = (
    "Create the quest's tasks in the repository backlog, once: the file map and the tasks "
    "with their dependencies (dependsOn: keys of this plan or existing ids like 'TASK-3'; "
    "no cycles). Answers with the backlog id each key became. A refused plan creates "
    "nothing; fix it and call again. Call it before signal-back complete."
)


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


@dataclass(frozen=True)
class ValidPlan:
    """A plan that passed every check: creation order and each task's dependencies, each
    a key of this plan or an existing backlog id (keys never look like ids)."""

    file_map: tuple[str, ...]
    order: tuple[TaskSpec, ...]
    depends_on: Mapping[str, tuple[str, ...]]


def _level(priority: str | None) -> str | None:
    return " ".join(priority.split()).lower() if priority else None


def _creation_order(edges: Mapping[str, list[str]]) -> list[str]:
    """Dependencies first; among tasks free to go, the first in the plan (no cycles here)."""
    order: list[str] = []
    pending = list(edges)
    while pending:
        key = next(k for k in pending if all(d in order for d in edges[k]))
        order.append(key)
        pending.remove(key)
    return order


def _path_problem(raw: str) -> str | None:
    path = raw.strip()
    if not path:
        return "must not be empty"
    if any(ord(ch) < 32 for ch in path):
        return f"{raw!r} contains a control character"
    if PurePosixPath(path).is_absolute() or PureWindowsPath(path).anchor:
        return f"{raw!r} is absolute; give it relative to the repo root"
    if ".." in re.split(r"[/\\]", path):
        return f"{raw!r} leaves the repository ('..' is not allowed)"
    return None


def _title_problem(title: str) -> str | None:
    text = title.strip()
    if not text:
        return "must not be empty"
    if "\n" in text or "\r" in text:
        return "must be a single line"
    if len(text) > MAX_TITLE:
        return f"at most {MAX_TITLE} characters (got {len(text)})"
    if len(sanitize_filename(text).encode()) + _NAME_OVERHEAD > _MAX_NAME_BYTES:
        return "too long for a task file name; shorten it"
    return None


def _key_problem(key: str, prefix: str) -> str | None:
    if not KEY_RE.match(key):
        return f"{key!r} is not a key; use 1-40 characters of a-z, 0-9 and '-'"
    with contextlib.suppress(InvalidIdError):
        normalize_task_id(key, prefix)
        return f"{key!r} looks like a backlog task id; choose a descriptive key"
    return None


def validate_plan(
    arguments: Mapping[str, Any] | None, snapshot: BacklogSnapshot
) -> ValidPlan | list[Problem]:
    """Check a ``create-tasks`` call against itself and the backlog; every problem, or the plan."""
    try:
        plan = PlanInput.model_validate(dict(arguments or {}))
    except ValidationError as exc:
        return problems_from(exc)
    found = [(f"fileMap.{i}", _path_problem(path)) for i, path in enumerate(plan.file_map)]
    first_of_key: dict[str, int] = {}
    for i, spec in enumerate(plan.tasks):
        first_of_key.setdefault(spec.key, i)
    priorities = [p for p in PRIORITIES if p in snapshot.config.priorities]
    depends_on: dict[str, tuple[str, ...]] = {}
    for i, spec in enumerate(plan.tasks):
        at = f"tasks.{i}"
        key_problem = _key_problem(spec.key, snapshot.config.task_prefix)
        if key_problem is None and first_of_key[spec.key] != i:
            key_problem = f"duplicate key {spec.key!r} (tasks.{first_of_key[spec.key]})"
        found += [(f"{at}.key", key_problem), (f"{at}.title", _title_problem(spec.title))]
        for k, item in enumerate(spec.acceptance_criteria):
            found.append(
                (f"{at}.acceptanceCriteria.{k}", None if item.strip() else "must not be empty")
            )
        if spec.priority is not None and _level(spec.priority) not in priorities:
            reason = f"{spec.priority!r} is not a priority; use one of {', '.join(priorities)}"
            found.append((f"{at}.priority", reason))
        deps: list[str] = []
        for k, dep in enumerate(spec.depends_on):
            name = dep.strip()
            existing = snapshot.get(name) if name and name not in first_of_key else None
            target = name if name in first_of_key else existing.id if existing else None
            if target is None:
                reason = f"{dep!r} is neither a key of this plan nor an existing backlog task id"
                found.append((f"{at}.dependsOn.{k}", reason))
            elif target not in deps:
                deps.append(target)
        depends_on.setdefault(spec.key, tuple(deps))
    edges = {key: [d for d in deps if d in first_of_key] for key, deps in depends_on.items()}
    for cycle in find_cycles(edges):
        reason = (
            f"dependency cycle among {', '.join(sorted(cycle))}: {describe_cycle(cycle)} "
            "(read 'a -> b' as 'a depends on b'); remove one of these dependencies"
        )
        found.append(("tasks.dependsOn", reason))
    problems = [Problem(where, reason) for where, reason in found if reason]
    if problems:
        return problems
    file_map = tuple(dict.fromkeys(p.strip() for p in plan.file_map))
    by_key = {s.key: s for s in plan.tasks}  # the keys are unique by now
    order = tuple(by_key[k] for k in _creation_order(edges))
    return ValidPlan(file_map, order, depends_on)


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


def read_plan(signal_dir: Path | str) -> PlanRecord | None:
    """What PathSeeker's ``create-tasks`` created, or None if it never did; StoreError
    (with the path) for an unreadable or malformed file."""
    return read_model(Path(signal_dir) / PLAN_FILE, PlanRecord, "a plan record")


def _mapping_text(tasks: Sequence[PlannedTask]) -> str:
    return ", ".join(f"{t.key} -> {t.id}" for t in tasks) or "none"


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
            f"{_mapping_text(earlier.tasks)}; nothing new was created, to avoid duplicates. "
            "Report this with signal-back (needs-user-input)."
        )
        return ToolReply(text, True)
    text = (
        f"{CREATE_TASKS_TOOL} refused: the tasks of this plan were already created "
        f"({_mapping_text(earlier.tasks)}); nothing new was created. Do not call {CREATE_TASKS_TOOL} "
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


def create_planned_tasks(
    repo_root: Path, signal_dir: Path, plan: ValidPlan, *, quest_id: str | None = None
) -> ToolReply:
    """Claim ``plan.json``, create the tasks in order, record each; roll back on failure.

    With ``quest_id`` each task is labelled ``quest:<id>``: the quest that planned it
    owns it, and no other quest of the repository adopts it."""
    labels = (f"{QUEST_LABEL_PREFIX}{quest_id}",) if quest_id else ()
    created: list[BacklogTask] = []
    planned: list[PlannedTask] = []

    def save(*, complete: bool = False, claim: bool = False) -> bool:
        record = PlanRecord(file_map=plan.file_map, tasks=tuple(planned), complete=complete)
        data = record.model_dump_json(indent=2).encode()
        return write_durably(signal_dir, PLAN_FILE, data, exclusive=claim)

    try:
        claimed = save(claim=True)
    except OSError as exc:
        text = f"{CREATE_TASKS_TOOL} failed (storage error: {exc.strerror or exc}); no tasks were created."
        return ToolReply(text, True)
    if not claimed:
        return _already_created(signal_dir) or ToolReply(
            f"{CREATE_TASKS_TOOL} refused: already running.", True
        )
    ids: dict[str, str] = {}
    try:
        for spec in plan.order:
            task = create_task(
                repo_root,
                spec.title.strip(),
                description=spec.description,
                dependencies=[ids.get(d, d) for d in plan.depends_on[spec.key]],
                priority=_level(spec.priority),
                acceptance_criteria=[c.strip() for c in spec.acceptance_criteria],
                labels=labels,
            )
            created.append(task)
            ids[spec.key] = task.id
            planned.append(
                PlannedTask(
                    key=spec.key, id=task.id, title=task.title, dependencies=task.dependencies
                )
            )
            save()
        save(complete=True)
    except (BacklogError, OSError) as exc:
        left: list[str] = []  # roll back: the ids that could not be removed
        for task in reversed(created):
            try:
                _remove_durably(task.path)
            except OSError:
                left.append(task.id)
        planned[:] = [p for p in planned if p.id in left]
        with contextlib.suppress(OSError):
            if left:
                save()  # keep the claim: a retry must not duplicate them
            else:
                _remove_durably(signal_dir / PLAN_FILE)
        if left:
            tail = (
                f"tasks {', '.join(left)} could not be removed again; do not call "
                f"{CREATE_TASKS_TOOL} again. Report this with signal-back (needs-user-input)."
            )
        else:
            tail = f"no tasks were left behind. Call {CREATE_TASKS_TOOL} again."
        return ToolReply(f"{CREATE_TASKS_TOOL} failed: {exc}; {tail}", True)
    text = (
        f"tasks created: {_mapping_text(planned)}. Refer to them by these ids from now on; "
        f"do not call {CREATE_TASKS_TOOL} again."
    )
    return ToolReply(text, False)
