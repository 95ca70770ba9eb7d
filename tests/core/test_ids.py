"""Ids that end up in file names, branch names and argv: canonical forms and refusals."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scaffold.errors import InvalidIdError
from scaffold.ids import (
    BRANCH_PREFIX,
    branch_for_task,
    normalize_task_id,
    task_for_branch,
    task_number,
    task_sort_key,
    validate_quest_id,
    validate_question_id,
)


@pytest.mark.parametrize(
    ("raw", "canonical"),
    [
        ("1", "TASK-1"),
        ("2.1", "TASK-2.1"),
        ("task-2.1", "TASK-2.1"),
        ("TASK-2.1", "TASK-2.1"),
        ("Task-12", "TASK-12"),
        ("  task-3 \n", "TASK-3"),
        ("back-7", "BACK-7"),
        ("my_tasks-1.2.3.4.5", "MY_TASKS-1.2.3.4.5"),
    ],
)
def test_normalize(raw: str, canonical: str) -> None:
    assert normalize_task_id(raw) == canonical


def test_bare_number_takes_the_prefix() -> None:
    assert normalize_task_id("4", prefix="back") == "BACK-4"


@pytest.mark.parametrize(
    ("task_id", "branch"),
    [("TASK-1", "scaffold/task-1"), ("task-2.1", "scaffold/task-2.1"), ("7", "scaffold/task-7")],
)
def test_branch_round_trip(task_id: str, branch: str) -> None:
    assert branch_for_task(task_id) == branch
    assert task_for_branch(branch) == normalize_task_id(task_id)
    assert branch.startswith(BRANCH_PREFIX)


_NUMBER = st.lists(st.integers(min_value=0, max_value=999_999_999), min_size=1, max_size=5).map(
    lambda parts: ".".join(str(p) for p in parts)
)


@settings(database=None, deadline=None)  # no .hypothesis/ left in the checkout
@given(_NUMBER)
def test_every_valid_number_round_trips(number: str) -> None:
    task_id = normalize_task_id(number)
    assert task_id == f"TASK-{number}"
    assert task_number(task_id) == number
    assert task_for_branch(branch_for_task(task_id)) == task_id
    assert normalize_task_id(task_id.lower()) == task_id


def test_sort_is_numeric() -> None:
    ids = ["TASK-10", "TASK-2.1", "TASK-2", "TASK-1", "TASK-2.10", "TASK-2.2"]
    assert sorted(ids, key=task_sort_key) == [
        "TASK-1",
        "TASK-2",
        "TASK-2.1",
        "TASK-2.2",
        "TASK-2.10",
        "TASK-10",
    ]


HOSTILE = [
    "",
    " ",
    "../1",
    "task-../1",
    "1/2",
    "task-1/../../etc",
    "1;rm -rf /",
    "task-1;rm -rf",
    "$(reboot)",
    "`id`",
    "--upload-pack=x",
    "-1",
    "task--1",
    "task-1 2",
    "task-1\n2",
    "task-1\x00",
    "١٢",  # Arabic-Indic digits
    "task-٣",
    "task-１",  # fullwidth digit
    "1" * 10,
    "task-" + "1" * 10,
    "task-1.2.3.4.5.6",
    "a" * 21 + "-1",
    "x" * 10_000,
    "task-1.",
    "task-.1",
    "täsk-1",
    "1-task",
]


@pytest.mark.parametrize("value", HOSTILE, ids=repr)
def test_hostile_task_ids_are_refused(value: str) -> None:
    with pytest.raises(InvalidIdError) as info:
        normalize_task_id(value)
    assert info.value.value == value
    assert info.value.kind == "task id"
    assert info.value.exit_code == 2


@pytest.mark.parametrize("value", HOSTILE, ids=repr)
def test_hostile_ids_make_no_branch(value: str) -> None:
    with pytest.raises(InvalidIdError):
        branch_for_task(value)


@pytest.mark.parametrize(
    "branch",
    [
        "main",
        "scaffold/task-",
        "scaffold/task-../1",
        "scaffold/task-1;rm",
        "scaffold/task-1\n",
        "scaffold/task-١",
        "scaffold/task-TASK-1",
        "refs/heads/scaffold/task-1",
        "scaffold/task-1 ",
    ],
    ids=repr,
)
def test_foreign_branches_are_refused(branch: str) -> None:
    with pytest.raises(InvalidIdError) as info:
        task_for_branch(branch)
    assert info.value.kind == "scaffold branch"


@pytest.mark.parametrize("value", ["login", "a", "issue-42", "0", "a" * 63])
def test_quest_ids(value: str) -> None:
    assert validate_quest_id(value) == value


@pytest.mark.parametrize(
    "value",
    ["", "-a", "Login", "a_b", "../a", "a/b", "a\n", "a" * 64, "ä", "--upload-pack=x", "a b"],
    ids=repr,
)
def test_hostile_quest_ids(value: str) -> None:
    with pytest.raises(InvalidIdError) as info:
        validate_quest_id(value)
    assert info.value.kind == "quest id"


@pytest.mark.parametrize("value", ["q-1", "q-abc-2", "q-" + "a" * 63])
def test_question_ids(value: str) -> None:
    assert validate_question_id(value) == value


@pytest.mark.parametrize(
    "value", ["", "q-", "1", "q-A", "q-../x", "q-1\n", "q-" + "a" * 64, "q-١"], ids=repr
)
def test_hostile_question_ids(value: str) -> None:
    with pytest.raises(InvalidIdError) as info:
        validate_question_id(value)
    assert info.value.kind == "question id"
