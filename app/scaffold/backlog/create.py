"""Create a new task file exactly as ``backlog task create`` would write it.

Same id allocation (next number after the highest in use; ``N.M`` for a
subtask), same file name (``task-<n> - <Title-with-hyphens>.md``), same
frontmatter key order and YAML quoting, same ``ordinal`` rule and the same
body layout, so the tool, people and diffs cannot tell who wrote it.

One deliberate difference: ids of archived tasks and of legacy ``task-*``
drafts are never reused (the tool reuses archived ids), so an id always
names one piece of work in the git history.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import os
import re
from collections.abc import Iterator, Sequence
from pathlib import Path

from scaffold.backlog import sections
from scaffold.backlog.config import BacklogConfig, config_path, find_backlog_dir, load_config
from scaffold.backlog.format import BacklogTask, parse_task, read_task
from scaffold.backlog.jsyaml import dump_key_value
from scaffold.backlog.writer import timestamp
from scaffold.errors import BacklogError, InvalidIdError
from scaffold.fsutil import write_file
from scaffold.ids import normalize_task_id

ORDINAL_STEP = 1000
MAX_NAME_BYTES = 255

# JavaScript's \s, which the tool's file-name sanitiser uses.
_JS_SPACE = "[\t\n\v\f\r \u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000\ufeff]"
_ID_LINE = re.compile(r"^id:[ \t]*['\"]?([A-Za-z]+-[0-9.]+)['\"]?[ \t]*$", re.M)


def sanitize_filename(title: str) -> str:
    """The tool's ``sanitizeFilename``: the title part of a task file name."""
    name = re.sub(r'[<>:"/\\|?*]', "-", title)
    name = re.sub(r"['(),!@#$%^&+=\[\]{};]", "", name)
    name = re.sub(f"{_JS_SPACE}+", "-", name)
    name = re.sub(r"-+", "-", name)
    name = re.sub(r"^-|-$", "", name)
    return name or "untitled"


def task_filename(task_id: str, title: str) -> str:
    return f"{task_id.lower()} - {sanitize_filename(title)}.md"


@contextlib.contextmanager
def _folder_lock(folder: Path) -> Iterator[None]:
    """Serialise scaffold's own creators on this folder (the tool has its own lock)."""
    fd = os.open(folder, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _ids_in(folder: Path, prefix: str) -> set[str]:
    """Ids named by file names and ``id:`` lines of the ``*.md`` files in ``folder``."""
    ids: set[str] = set()
    name_re = re.compile(rf"^({re.escape(prefix)}-\d+(?:\.\d+)*)", re.I)
    for path in folder.glob("*.md"):
        match = name_re.match(path.name)
        if match:
            ids.add(match.group(1).upper())
        with contextlib.suppress(OSError, UnicodeDecodeError):
            head = path.read_bytes()[:4096].decode("utf-8", "ignore")
            found = _ID_LINE.search(head)
            if found and found.group(1).lower().startswith(prefix + "-"):
                ids.add(found.group(1).upper())
    return ids


def _number_parts(task_id: str) -> list[int] | None:
    tail = task_id.split("-", 1)[1]
    parts = tail.split(".")
    return [int(p) for p in parts] if all(p.isdigit() for p in parts) else None


def next_task_id(used: set[str], config: BacklogConfig, parent: str | None = None) -> str:
    """The next free id: one past the highest top-level number, or the next ``parent.N``."""
    prefix = config.task_prefix.upper()
    numbers = [_number_parts(u) for u in used if u.upper().startswith(f"{prefix}-")]
    base = [] if parent is None else _number_parts(parent)
    if base is None:
        raise BacklogError(str(parent), "parent id is not numeric")
    siblings = [
        p[len(base)]
        for p in numbers
        if p is not None and len(p) == len(base) + 1 and p[: len(base)] == base
    ]
    number = str(max(siblings, default=0) + 1)
    if config.zero_padded_ids > 0:
        number = number.zfill(2 if parent else config.zero_padded_ids)
    return f"{parent}.{number}" if parent else f"{prefix}-{number}"


def _next_ordinal(tasks_dir: Path, prefix: str) -> int | float | None:
    """Highest ordinal among active tasks plus 1000; 1000 for an empty backlog; else none."""
    parsed = []
    for path in sorted(tasks_dir.glob("*.md")):
        with contextlib.suppress(BacklogError):
            parsed.append(read_task(path, prefix=prefix))
    ordinals = [t.ordinal for t in parsed if t.ordinal is not None]
    if ordinals:
        return max(ordinals) + ORDINAL_STEP
    return ORDINAL_STEP if not parsed else None


def _canonical(value: str, prefix: str, what: str, where: Path) -> str:
    try:
        return normalize_task_id(value, prefix)
    except InvalidIdError as exc:
        raise BacklogError(where, f"{what} {value!r} is not a task id") from exc


def _criteria(items: Sequence[str]) -> list[str]:
    lines = (" ".join(p.strip() for p in item.splitlines() if p.strip()) for item in items)
    return [text for text in lines if text]


def render_task(
    *,
    task_id: str,
    title: str,
    status: str,
    created_date: str,
    description: str = "",
    dependencies: Sequence[str] = (),
    labels: Sequence[str] = (),
    parent: str | None = None,
    priority: str | None = None,
    ordinal: int | float | None = None,
    acceptance_criteria: Sequence[str] = (),
) -> str:
    """The file text the tool writes for a new task with these fields."""
    yaml = "".join(
        [
            dump_key_value("id", task_id),
            dump_key_value("title", title),
            dump_key_value("status", status),
            dump_key_value("assignee", []),
            dump_key_value("created_date", created_date),
            dump_key_value("labels", list(labels)),
            dump_key_value("dependencies", list(dependencies)),
            dump_key_value("parent_task_id", parent) if parent else "",
            dump_key_value("priority", priority) if priority else "",
            dump_key_value("ordinal", ordinal) if ordinal is not None else "",
        ]
    )
    blocks = []
    desc = description.replace("\r\n", "\n").strip()
    if desc:
        blocks.append(sections.build_block(sections.DESCRIPTION, desc))
    criteria = _criteria(acceptance_criteria)
    if criteria:
        lines = "\n".join(f"- [ ] #{i} {text}" for i, text in enumerate(criteria, 1))
        blocks.append(sections.build_block(sections.ACCEPTANCE_CRITERIA, lines))
    body = "\n\n".join(blocks)
    return f"---\n{yaml}---\n" + (f"\n{body}\n" if body else "\n\n")


def create_task(
    root: Path,
    title: str,
    description: str = "",
    dependencies: Sequence[str] = (),
    priority: str | None = None,
    acceptance_criteria: Sequence[str] = (),
    parent: str | None = None,
    *,
    labels: Sequence[str] = (),
    now: dt.datetime | None = None,
) -> BacklogTask:
    """Write a new task into ``backlog/tasks/`` and return it as read back.

    ``root`` is the repository root (or the backlog folder itself).
    Dependencies and the parent must be existing tasks (in ``tasks/`` or
    ``completed/``), the priority one of the configured priorities; like the
    tool, scaffold refuses anything else with a BacklogError.
    """
    backlog_dir = find_backlog_dir(root)
    config, problems = load_config(backlog_dir)
    if problems:
        raise BacklogError(config_path(backlog_dir), problems[0])
    clean_title = title.strip()
    if not clean_title:
        raise BacklogError(backlog_dir, "a task needs a title")
    if "\n" in clean_title or "\r" in clean_title:
        raise BacklogError(backlog_dir, f"a task title must be one line: {clean_title!r}")
    level = None
    if priority is not None and priority.strip():
        level = " ".join(priority.split()).lower()
        if level not in config.priorities:
            known = ", ".join(config.priorities)
            raise BacklogError(backlog_dir, f"unknown priority {priority!r} (known: {known})")
    prefix = config.task_prefix
    tasks_dir = backlog_dir / "tasks"
    tasks_dir.mkdir(parents=True, exist_ok=True)
    with _folder_lock(tasks_dir):
        existing = _ids_in(tasks_dir, prefix) | _ids_in(backlog_dir / "completed", prefix)
        used = (
            existing
            | _ids_in(backlog_dir / "drafts", prefix)
            | _ids_in(backlog_dir / "archive" / "tasks", prefix)
        )
        deps = list(
            dict.fromkeys(_canonical(d, prefix, "dependency", backlog_dir) for d in dependencies)
        )
        for dep_id in deps:
            if dep_id not in existing:
                raise BacklogError(backlog_dir, f"dependency {dep_id} does not exist")
        parent_id = None
        if parent is not None:
            parent_id = _canonical(parent, prefix, "parent", backlog_dir)
            if parent_id not in existing:
                raise BacklogError(backlog_dir, f"parent task {parent_id} does not exist")
        task_id = next_task_id(used, config, parent_id)
        content = render_task(
            task_id=task_id,
            title=clean_title,
            status=config.default_status,
            created_date=timestamp(now),
            description=description,
            dependencies=deps,
            labels=list(dict.fromkeys(x.strip() for x in labels if x.strip())),
            parent=parent_id,
            priority=level,
            ordinal=_next_ordinal(tasks_dir, prefix),
            acceptance_criteria=acceptance_criteria,
        )
        name = task_filename(task_id, clean_title)
        if len(name.encode("utf-8")) > MAX_NAME_BYTES:
            raise BacklogError(tasks_dir / name, "title too long for a file name")
        target = tasks_dir / name
        try:
            write_file(target, content.encode("utf-8"), exclusive=True)
        except FileExistsError as exc:
            raise BacklogError(target, "a file with this name already exists") from exc
        except OSError as exc:
            raise BacklogError(target, f"cannot write: {exc.strerror or exc}") from exc
    return parse_task(content, target, prefix=prefix, folder="tasks")
