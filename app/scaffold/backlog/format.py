"""Read one Backlog.md task file into a :class:`BacklogTask`.

The frontmatter is parsed with ruamel.yaml in round-trip mode; the body
sections are read both in the marker form the tool writes and in the plain
``## Description`` form people write by hand. Anything that makes the file
unusable raises :class:`~scaffold.errors.BacklogError` with the path and the
reason, so the loader can report it instead of skipping the task.
"""

from __future__ import annotations

import contextlib
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from io import StringIO
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.constructor import RoundTripConstructor
from ruamel.yaml.error import YAMLError
from ruamel.yaml.nodes import ScalarNode

from scaffold.backlog import sections
from scaffold.backlog.frontmatter import split_document
from scaffold.backlog.sections import ChecklistItem
from scaffold.errors import BacklogError, InvalidIdError
from scaffold.fsutil import racy
from scaffold.ids import normalize_task_id


@dataclass(frozen=True, slots=True)
class BacklogTask:
    """One task as stored in a Backlog.md file.

    ``id``, ``dependencies`` and ``parent_task_id`` are canonical upper-case
    ids (``TASK-2.1``). ``folder`` is the backlog sub-folder the file was read
    from (``tasks``, ``completed``, ``drafts`` or ``archive``); ``raw`` is the
    file's text exactly as read.
    """

    id: str
    title: str
    status: str
    path: Path
    raw: str = field(repr=False)
    priority: str | None = None
    dependencies: list[str] = field(default_factory=list)
    parent_task_id: str | None = None
    labels: list[str] = field(default_factory=list)
    assignee: list[str] = field(default_factory=list)
    ordinal: int | float | None = None
    created_date: str | None = None
    acceptance_criteria: list[ChecklistItem] = field(default_factory=list)
    description: str | None = None
    implementation_notes: str | None = None
    final_summary: str | None = None
    folder: str = "tasks"


class _TextScalarConstructor(RoundTripConstructor):
    """Round-trip constructor that keeps numbers, booleans and dates as their source text.

    YAML 1.2 (ruamel) and js-yaml 3 (the tool) disagree on which plain scalars
    are numbers (``0o17``, ``1:30``) or dates; every field scaffold reads is
    text except ``ordinal``, which is converted explicitly.
    """

    def construct_source_text(self, node: ScalarNode) -> str:
        return str(node.value)


for _tag in ("bool", "int", "float", "timestamp"):
    _TextScalarConstructor.add_constructor(
        f"tag:yaml.org,2002:{_tag}", _TextScalarConstructor.construct_source_text
    )


def _yaml() -> YAML:
    yaml = YAML(typ="rt", pure=True)
    yaml.Constructor = _TextScalarConstructor
    return yaml


def load_yaml_mapping(yaml_text: str, path: str) -> Mapping[str, Any]:
    """Parse frontmatter YAML; an empty frontmatter is an empty mapping."""
    try:
        data = _yaml().load(StringIO(yaml_text))
    except YAMLError as exc:
        reason = " ".join(str(exc).split())
        raise BacklogError(path, f"frontmatter is not valid YAML: {reason}") from exc
    if data is None:
        return {}
    if not isinstance(data, Mapping):
        raise BacklogError(path, "frontmatter is not a mapping of keys to values")
    return data


def scalar_text(value: Any) -> str | None:
    """A YAML scalar as text; None for null, empty, or a list or mapping."""
    return (value.strip() or None) if isinstance(value, str) else None


def _required_text(data: Mapping[str, Any], key: str, path: str) -> str:
    value = data.get(key)
    if isinstance(value, list | Mapping):
        raise BacklogError(path, f"'{key}' must be text, got a {type(value).__name__}")
    text = scalar_text(value)
    if text is None:
        raise BacklogError(path, f"'{key}' is missing or empty")
    return text


def _string_list(data: Mapping[str, Any], key: str, path: str) -> list[str]:
    value = data.get(key)
    if value is None:
        return []
    if isinstance(value, str):
        return [value.strip()] if value.strip() else []
    if not isinstance(value, list):
        raise BacklogError(path, f"'{key}' must be a list, got {type(value).__name__}")
    texts = [scalar_text(item) for item in value]
    if None in texts:
        bad = value[texts.index(None)]
        raise BacklogError(path, f"'{key}' holds an empty or non-text item: {bad!r}")
    return [t for t in texts if t is not None]


def _task_id(value: Any, key: str, path: str, prefix: str) -> str:
    text = scalar_text(value)
    if text is None:
        raise BacklogError(path, f"'{key}' is missing or empty")
    try:
        return normalize_task_id(text, prefix)
    except InvalidIdError as exc:
        raise BacklogError(path, f"'{key}' is not a task id: {text!r}") from exc


def _dependencies(data: Mapping[str, Any], path: str, prefix: str) -> list[str]:
    value = data.get("dependencies")
    if value is None:
        return []
    if not isinstance(value, list):
        raise BacklogError(
            path, f"'dependencies' must be a list of task ids, got {type(value).__name__}"
        )
    return list(dict.fromkeys(_task_id(item, "dependencies", path, prefix) for item in value))


def _ordinal(value: Any, path: str) -> int | float | None:
    if value is None:
        return None
    text = value.strip().replace("_", "") if isinstance(value, str) else ""
    with contextlib.suppress(ValueError):
        return int(text)
    with contextlib.suppress(ValueError):
        number = float(text)
        if math.isfinite(number):
            return number
    raise BacklogError(path, f"'ordinal' must be a number, got {value!r}")


def parse_task(raw: str, path: Path, *, prefix: str = "task", folder: str = "tasks") -> BacklogTask:
    """Parse the text of one task file; raise BacklogError if it is unusable."""
    where = str(path)
    doc = split_document(raw, where)
    data = load_yaml_mapping(doc.yaml, where)
    task_id = _task_id(data.get("id"), "id", where, prefix)
    title = _required_text(data, "title", where)
    status = _required_text(data, "status", where)
    parent_raw = data.get("parent_task_id")
    parent = (
        None if parent_raw in (None, "") else _task_id(parent_raw, "parent_task_id", where, prefix)
    )
    priority = scalar_text(data.get("priority"))
    body = doc.body
    spans = sections.find_sections(body)

    def text_of(key: str) -> str | None:
        span = spans.get(key)
        return (body[span.content_start : span.content_end].strip() or None) if span else None

    return BacklogTask(
        id=task_id,
        title=title,
        status=status,
        path=path,
        raw=raw,
        priority=priority.lower() if priority else None,
        dependencies=_dependencies(data, where, prefix),
        parent_task_id=parent,
        labels=_string_list(data, "labels", where),
        assignee=_string_list(data, "assignee", where),
        ordinal=_ordinal(data.get("ordinal"), where),
        created_date=scalar_text(data.get("created_date")),
        acceptance_criteria=sections.parse_checklist(text_of(sections.ACCEPTANCE_CRITERIA)),
        description=text_of(sections.DESCRIPTION),
        implementation_notes=text_of(sections.NOTES),
        final_summary=text_of(sections.FINAL_SUMMARY),
        folder=folder,
    )


# The orchestrator reads the whole backlog on every turn of its loop, and parsing YAML is
# some milliseconds a file (seconds a turn on a few hundred tasks): a file is parsed again
# only when it is another file (inode) or its size or modification time changed.
_PARSED: dict[tuple[str, str, str, int, int, int], BacklogTask] = {}
_PARSED_MAX = 8192


def read_task(path: Path, *, prefix: str = "task", folder: str = "tasks") -> BacklogTask:
    """Read and parse one task file."""
    try:
        st = os.stat(path)
        key = (str(path), prefix, folder, st.st_ino, st.st_mtime_ns, st.st_size)
        if (cached := _PARSED.get(key)) is not None:
            return cached
        raw = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BacklogError(path, f"not UTF-8 text: {exc.reason} at byte {exc.start}") from exc
    except OSError as exc:
        raise BacklogError(path, f"cannot read: {exc.strerror or exc}") from exc
    task = parse_task(raw, path, prefix=prefix, folder=folder)
    if racy(st.st_mtime_ns):
        return task
    if len(_PARSED) >= _PARSED_MAX:
        _PARSED.clear()
    _PARSED[key] = task
    return task
