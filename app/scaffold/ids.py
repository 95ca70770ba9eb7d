"""Validated identifiers: task ids, quest ids, question ids, branch names.

Ids end up in file names, branch names and argv, so anything that could escape
a folder or be read as an option is refused here, once.
"""

from __future__ import annotations

import re

from scaffold.errors import InvalidIdError

# Backlog.md ids: TASK-1, TASK-2.1, task-12 (prefix configurable, but letters only).
# re.ASCII: \d must not match other scripts' digits; \Z: "$" would accept a trailing newline.
_TASK_ID = re.compile(
    r"^(?P<prefix>[A-Za-z][A-Za-z_]{0,19})-(?P<num>\d{1,9}(?:\.\d{1,9}){0,4})\Z", re.ASCII
)
_BARE_NUM = re.compile(r"^\d{1,9}(?:\.\d{1,9}){0,4}\Z", re.ASCII)
_QUEST_ID = re.compile(r"^[a-z0-9][a-z0-9-]{0,62}\Z", re.ASCII)
_QUESTION_ID = re.compile(r"^q-[a-z0-9][a-z0-9-]{0,62}\Z", re.ASCII)

BRANCH_PREFIX = "scaffold/task-"
# The planning step's key among a run's jobs (a task's key is its id) and its step id.
PLAN_KEY = "plan"
PLAN_STEP = "PLAN"
_STATE_BRANCH = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_./-]{0,199}\Z", re.ASCII)


def normalize_task_id(value: str, prefix: str = "task") -> str:
    """Return the canonical upper-case id (``TASK-2.1``) for ``2.1``, ``task-2.1`` or ``TASK-2.1``."""
    raw = value.strip()
    if _BARE_NUM.match(raw):
        return f"{prefix.upper()}-{raw}"
    m = _TASK_ID.match(raw)
    if not m:
        raise InvalidIdError(value, "task id")
    return f"{m.group('prefix').upper()}-{m.group('num')}"


def task_number(task_id: str) -> str:
    """``TASK-2.1`` -> ``2.1``."""
    return normalize_task_id(task_id).split("-", 1)[1]


def task_sort_key(task_id: str) -> tuple[int, ...]:
    """Numeric order: TASK-2 < TASK-2.1 < TASK-10."""
    return tuple(int(p) for p in task_number(task_id).split("."))


def branch_for_task(task_id: str) -> str:
    """``TASK-2.1`` -> ``scaffold/task-2.1``."""
    return BRANCH_PREFIX + task_number(task_id)


def task_for_branch(branch: str) -> str:
    if not branch.startswith(BRANCH_PREFIX):
        raise InvalidIdError(branch, "scaffold branch")
    num = branch[len(BRANCH_PREFIX) :]
    if not _BARE_NUM.match(num):
        raise InvalidIdError(branch, "scaffold branch")
    return f"TASK-{num}"


def validate_quest_id(value: str) -> str:
    if not _QUEST_ID.match(value):
        raise InvalidIdError(value, "quest id")
    return value


def validate_question_id(value: str) -> str:
    if not _QUESTION_ID.match(value):
        raise InvalidIdError(value, "question id")
    return value


def validate_state_branch(value: str) -> str:
    """The state branch's name: a plain branch name, not one of the task branches."""
    ok = (
        _STATE_BRANCH.match(value) is not None
        and ".." not in value
        and "//" not in value
        and "/." not in value
        and not value.endswith((".lock", "/", "."))
        and not value.startswith((BRANCH_PREFIX, "refs/"))
    )
    if not ok:
        raise InvalidIdError(value, "state branch")
    return value
