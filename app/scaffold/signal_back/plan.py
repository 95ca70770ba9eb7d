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
from dataclasses import dataclass, field
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
    _read_bytes,
    _refusal,
    _remove_durably,
    problems_from,
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
    """A plan that passed every check: creation order and each task's resolved dependencies.

    ``depends_on`` maps a key to its dependencies, each either ``("key", k)`` for a task
    of this plan or ``("id", "TASK-3")`` for a task already in the backlog.
    """

    file_map: tuple[str, ...]
    order: tuple[TaskSpec, ...]
    depends_on: Mapping[str, tuple[tuple[str, str], ...]]


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
        level = _level(spec.priority)
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
    path = Path(signal_dir) / PLAN_FILE
    data = _read_bytes(path)
    if data is None:
        return None
    try:
        return PlanRecord.model_validate_json(data)
    except ValidationError as exc:
        raise StoreError(path, f"not a plan record: {problems_from(exc)[0]}") from None


@dataclass
class _Creation:
    """Creates the tasks of one valid plan, recording progress in ``plan.json``."""

    repo_root: Path
    signal_dir: Path
    plan: ValidPlan
    labels: tuple[str, ...]
    created: list[BacklogTask] = field(default_factory=list)
    planned: list[PlannedTask] = field(default_factory=list)

    def record(self, *, complete: bool) -> PlanRecord:
        return PlanRecord(file_map=self.plan.file_map, tasks=tuple(self.planned), complete=complete)

    def save(self, *, complete: bool = False, claim: bool = False) -> bool:
        """Write ``plan.json``; with ``claim`` only if there is none yet (else False)."""
        data = self.record(complete=complete).model_dump_json(indent=2).encode()
        return write_durably(self.signal_dir, PLAN_FILE, data, exclusive=claim)

    def create_all(self) -> None:
        ids: dict[str, str] = {}
        for spec in self.plan.order:
            deps = [ids[v] if kind == "key" else v for kind, v in self.plan.depends_on[spec.key]]
            task = create_task(
                self.repo_root,
                spec.title.strip(),
                description=spec.description,
                dependencies=deps,
                priority=_level(spec.priority),
                acceptance_criteria=[c.strip() for c in spec.acceptance_criteria],
                labels=self.labels,
            )
            self.created.append(task)
            ids[spec.key] = task.id
            self.planned.append(
                PlannedTask(
                    key=spec.key, id=task.id, title=task.title, dependencies=task.dependencies
                )
            )
            self.save()
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
                self.save()  # keep the claim: a retry must not duplicate them
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


def create_planned_tasks(
    repo_root: Path, signal_dir: Path, plan: ValidPlan, *, quest_id: str | None = None
) -> ToolReply:
    """Claim ``plan.json``, create the tasks in order, record each; roll back on failure.

    With ``quest_id`` each task is labelled ``quest:<id>``: the quest that planned it
    owns it, and no other quest of the repository adopts it."""
    labels = (f"{QUEST_LABEL_PREFIX}{quest_id}",) if quest_id else ()
    creation = _Creation(repo_root, signal_dir, plan, labels)
    try:
        claimed = creation.save(claim=True)
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
