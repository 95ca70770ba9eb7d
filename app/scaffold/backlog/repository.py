"""Load a whole Backlog.md folder into one consistent snapshot.

The tool silently drops tasks it cannot parse and tolerates hand-written
cycles and dangling dependencies. Scaffold schedules work from this data, so
it reads everything and returns each such defect as a
:class:`BacklogProblem` (path, reason, task id, kind) next to the tasks:
nothing is skipped without a trace.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from scaffold.backlog.config import BacklogConfig, config_path, find_backlog_dir, load_config
from scaffold.backlog.format import BacklogTask, read_task
from scaffold.backlog.graph import (
    Readiness,
    compute_readiness,
    describe_cycle,
    find_cycles,
    id_order,
)
from scaffold.errors import BacklogError, InvalidIdError, UnknownTask
from scaffold.fsutil import racy
from scaffold.ids import normalize_task_id

MALFORMED: Final = "malformed"
CONFIG: Final = "config"
UNKNOWN_STATUS: Final = "unknown_status"
DUPLICATE_ID: Final = "duplicate_id"
MISSING_DEPENDENCY: Final = "missing_dependency"
CYCLE: Final = "cycle"


@dataclass(frozen=True, slots=True)
class BacklogProblem:
    """One defect in the backlog; ``path`` is relative to the repository root when possible."""

    path: str
    reason: str
    task_id: str | None
    kind: str

    def __str__(self) -> str:
        return f"{self.path}: {self.reason}"


@dataclass(frozen=True, slots=True)
class BacklogSnapshot:
    """Everything read from one backlog at one moment.

    ``tasks`` holds the tasks of ``tasks/`` and ``completed/`` (in id order,
    duplicates included); ``drafts`` the drafts, which are listed but never
    scheduled.
    """

    root: Path
    backlog_dir: Path
    config: BacklogConfig
    tasks: list[BacklogTask]
    drafts: list[BacklogTask]
    problems: list[BacklogProblem]
    readiness: dict[str, Readiness] = field(default_factory=dict)

    def get(self, task_id: str) -> BacklogTask | None:
        """The task with this id (``2``, ``task-2`` or ``TASK-2``), or None."""
        try:
            wanted = normalize_task_id(task_id, self.config.task_prefix)
        except InvalidIdError:
            return None
        return next((t for t in self.tasks if t.id == wanted), None)

    def task(self, task_id: str) -> BacklogTask:
        """The task with this id; raises UnknownTask."""
        found = self.get(task_id)
        if found is None:
            raise UnknownTask(task_id)
        return found


def _relative(path: Path, root: Path) -> str:
    try:
        return path.relative_to(root).as_posix()
    except ValueError:
        return str(path)


def _name_pattern(prefixes: Iterable[str]) -> re.Pattern[str]:
    """A task file's name: ``task-<n>`` (the id, group 1), then a space, '.', '-' or nothing."""
    names = "|".join(re.escape(p) for p in prefixes)
    return re.compile(rf"^((?:{names})-\d+(?:\.\d+)*)(?:[ .-]|$)", re.I)


def _task_files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.glob("*.md") if p.is_file() and not p.name.startswith("."))


@dataclass
class _Loader:
    root: Path
    backlog_dir: Path
    config: BacklogConfig
    problems: list[BacklogProblem] = field(default_factory=list)

    def problem(self, path: Path | str, reason: str, task_id: str | None, kind: str) -> None:
        where = _relative(path, self.root) if isinstance(path, Path) else path
        self.problems.append(BacklogProblem(where, reason, task_id, kind))

    def read_folder(self, name: str, prefixes: Iterable[str]) -> list[BacklogTask]:
        pattern = _name_pattern(prefixes)
        tasks: list[BacklogTask] = []
        for path in _task_files(self.backlog_dir / name):
            if not pattern.match(path.name):
                self.problem(
                    path,
                    f"file name does not look like '{self.config.task_prefix}-<n> - <title>.md'; "
                    "Backlog.md ignores it",
                    None,
                    MALFORMED,
                )
                continue
            try:
                tasks.append(read_task(path, prefix=self.config.task_prefix, folder=name))
            except BacklogError as exc:
                self.problem(path, exc.reason, None, MALFORMED)
        return tasks

    def archived_ids(self) -> set[str]:
        pattern = _name_pattern([self.config.task_prefix])
        paths = _task_files(self.backlog_dir / "archive" / "tasks")
        return {m.group(1).upper() for p in paths if (m := pattern.match(p.name))}

    def check_duplicates(self, tasks: list[BacklogTask]) -> set[str]:
        first: dict[str, BacklogTask] = {}
        duplicated: set[str] = set()
        for task in tasks:
            if (earlier := first.setdefault(task.id, task)) is not task:
                duplicated.add(task.id)
                other = _relative(earlier.path, self.root)
                self.problem(
                    task.path, f"id {task.id} is also used by {other}", task.id, DUPLICATE_ID
                )
        return duplicated

    def check_tasks(self, active: list[BacklogTask], known: set[str], drafts: set[str]) -> None:
        archived = self.archived_ids()
        statuses = ", ".join(repr(s) for s in self.config.statuses)
        for task in active:
            if not self.config.is_known_status(task.status):
                self.problem(
                    task.path,
                    f"unknown status {task.status!r} (config statuses: {statuses})",
                    task.id,
                    UNKNOWN_STATUS,
                )
            for dep in task.dependencies:
                if dep in known:
                    continue
                if dep in drafts:
                    why = "which is a draft"
                elif dep in archived:
                    why = "which is archived"
                else:
                    why = "which does not exist"
                self.problem(task.path, f"depends on {dep}, {why}", task.id, MISSING_DEPENDENCY)

    def check_cycles(self, tasks: list[BacklogTask]) -> None:
        by_id = {t.id: t for t in reversed(tasks)}  # the first task of each id
        edges = {tid: t.dependencies for tid, t in by_id.items()}
        for cycle in find_cycles(edges):
            head = by_id[cycle[0]]
            members = ", ".join(cycle)
            self.problem(
                head.path,
                f"dependency cycle {describe_cycle(cycle)} (members: {members})",
                head.id,
                CYCLE,
            )


def load_backlog(repo_root: Path) -> BacklogSnapshot:
    """Read config, tasks, completed tasks and drafts of the backlog under ``repo_root``.

    Raises BacklogError only when the backlog folder cannot be located; every
    other defect is returned in ``problems``.
    """
    root = repo_root.resolve()
    backlog_dir = find_backlog_dir(root)
    # The orchestrator reads the backlog on every turn of its loop: while no file of it
    # changed (name, inode, size, modification time), the last snapshot is the answer.
    marks = _fingerprint(backlog_dir, config_path(backlog_dir))
    key = (backlog_dir, *marks)
    if (last := _LAST.get(root)) is not None and last[0] == key:
        return last[1]
    snapshot = _load(root, backlog_dir)
    if any(racy(mtime_ns) for _, _, mtime_ns, _ in marks):
        return snapshot  # a file may change again unseen by its stat: not kept
    if len(_LAST) >= 64:
        _LAST.clear()
    _LAST[root] = key, snapshot
    return snapshot


_LAST: dict[Path, tuple[tuple[object, ...], BacklogSnapshot]] = {}
_FOLDERS = ("tasks", "completed", "drafts", "archive/tasks")


def _fingerprint(backlog_dir: Path, config: Path) -> list[tuple[str, int, int, int]]:
    """Name, inode, modification time and size of the config and of every task file
    (the files :func:`_task_files` lists; one ``stat`` each)."""
    marks = []
    with contextlib.suppress(OSError):
        st = config.stat()
        marks.append((str(config), st.st_ino, st.st_mtime_ns, st.st_size))
    for folder in _FOLDERS:
        try:
            entries = list(os.scandir(backlog_dir / folder))
        except OSError:
            continue
        for entry in entries:
            name = entry.name
            with contextlib.suppress(OSError):  # gone since: not part of the backlog
                if name.endswith(".md") and not name.startswith(".") and entry.is_file():
                    st = entry.stat()
                    marks.append((entry.path, st.st_ino, st.st_mtime_ns, st.st_size))
    return sorted(marks)


def _load(root: Path, backlog_dir: Path) -> BacklogSnapshot:
    config, config_problems = load_config(backlog_dir)
    loader = _Loader(root, backlog_dir, config)
    for reason in config_problems:
        loader.problem(config_path(backlog_dir), reason, None, CONFIG)
    prefix = config.task_prefix
    active = loader.read_folder("tasks", [prefix])
    completed = loader.read_folder("completed", [prefix])
    drafts = loader.read_folder("drafts", ["draft", prefix])
    scheduled = sorted([*active, *completed], key=lambda t: id_order(t.id))
    duplicated = loader.check_duplicates([*active, *completed])
    loader.check_duplicates(drafts)
    known = {t.id for t in scheduled}
    loader.check_tasks(active, known, {d.id for d in drafts})
    loader.check_cycles([*active, *completed])
    readiness = compute_readiness([*active, *completed], config, ambiguous=duplicated)
    return BacklogSnapshot(
        root=root,
        backlog_dir=backlog_dir,
        config=config,
        tasks=scheduled,
        drafts=sorted(drafts, key=lambda t: id_order(t.id)),
        problems=loader.problems,
        readiness=readiness,
    )
