"""The exported JSON Schemas match the models, and real data validates against them."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator, FormatChecker
from jsonschema.exceptions import ValidationError
from ruamel.yaml import YAML

from scaffold.config import DEFAULT_CONFIG_TEXT, parse_config
from scaffold.core.events import Event, signal_event
from scaffold.core.lifecycle import Limits
from scaffold.core.quest_flow import add_cost, answer_question, apply_task_event, stop_quest
from scaffold.core.states import EventName as E
from scaffold.core.states import Lifecycle as S
from scaffold.quest.model import (
    Context,
    HistoryEntry,
    Observable,
    PullRequest,
    Quest,
    QuestSource,
    Requirements,
    TaskRecord,
)
from scaffold.roles import Role
from scaffold.schemas import (
    export_schemas,
    main,
    render_schema,
    rendered_schemas,
    stale_schemas,
    write_schemas,
)
from scaffold.signals import parse_signal

ROOT = Path(__file__).resolve().parents[2]
SCHEMA_DIR = ROOT / "schemas"
NOW = datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)

SIGNALS: list[dict[str, Any]] = [
    {"signal": "complete", "stepId": "TASK-1", "summary": "added login"},
    {
        "signal": "partially-complete",
        "stepId": "TASK-1",
        "progress": "the model",
        "continuationPoint": "the view",
    },
    {
        "signal": "needs-user-input",
        "stepId": "TASK-1",
        "question": "Which database?",
        "context": "Both are configured.",
    },
    {
        "signal": "needs-role-followup",
        "stepId": "TASK-1",
        "targetRole": "codeweaver",
        "reason": "a gap",
        "context": "empty passwords",
        "resume": True,
    },
]


def validator(name: str) -> Draft202012Validator:
    schema = json.loads((SCHEMA_DIR / f"{name}.schema.json").read_text(encoding="utf-8"))
    return Draft202012Validator(schema, format_checker=FormatChecker())


def test_schema_files_match_the_models() -> None:
    stale = stale_schemas(SCHEMA_DIR)
    assert not stale, (
        f"{', '.join(stale)} in schemas/ differ from the models; "
        "run `python -m scaffold.schemas` to regenerate"
    )
    on_disk = sorted(p.name for p in SCHEMA_DIR.glob("*.schema.json"))
    assert on_disk == sorted(rendered_schemas()), (
        "schemas/ holds files the models do not export; "
        "run `python -m scaffold.schemas` to regenerate"
    )


def test_export_names() -> None:
    schemas = export_schemas()
    assert sorted(rendered_schemas()) == sorted(f"{n}.schema.json" for n in schemas)
    for schema in schemas.values():
        Draft202012Validator.check_schema(schema)
        assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
        assert schema["title"]


def test_render_is_stable_sorted_and_ends_with_a_newline() -> None:
    text = render_schema({"b": 1, "a": {"d": 2, "c": 3}})
    assert text == '{\n  "a": {\n    "c": 3,\n    "d": 2\n  },\n  "b": 1\n}\n'


def test_write_schemas_and_check(tmp_path: Path) -> None:
    target = tmp_path / "out"
    assert sorted(stale_schemas(target)) == sorted(rendered_schemas())
    written = write_schemas(target)
    assert sorted(p.name for p in written) == sorted(rendered_schemas())
    assert stale_schemas(target) == []
    assert main(["--check", str(target)]) == 0
    (target / "quest.schema.json").write_text("{}\n", encoding="utf-8")
    assert stale_schemas(target) == ["quest.schema.json"]
    assert main(["--check", str(target)]) == 1
    assert main([str(target)]) == 0
    assert stale_schemas(target) == []
    with pytest.raises(SystemExit) as exited:
        main(["--bogus"])
    assert exited.value.code == 2


def test_module_is_runnable(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "scaffold.schemas", str(tmp_path)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert stale_schemas(tmp_path) == []


# --------------------------------------------------------------------------- real data


def _real_quest() -> tuple[Quest, list[HistoryEntry]]:
    """A quest taken through real decisions: a question, an answer, a failure, cost, a stop."""
    t1 = TaskRecord(id="TASK-1", title="Login form", dependencies=(), state=S.ALLOCATING)
    t2 = TaskRecord(
        id="TASK-2",
        title="Sessions",
        dependencies=("TASK-1",),
        state=S.PR_CREATED,
        pr=PullRequest(branch="scaffold/task-2", base="main", number=3, url="http://x/pr/3"),
    )
    q = Quest(
        id="login",
        request="Add a login page",
        source=QuestSource(kind="github", repo="acme/app", issue_number=12),
        requirements=Requirements(
            contexts=(
                Context(
                    id="C1",
                    description="Given a registered user on the login page",
                    observables=(Observable(id="O1", description="they see their dashboard"),),
                ),
            ),
            locked=True,
        ),
        tasks={"TASK-1": t1, "TASK-2": t2},
        started_at=NOW,
    )
    lim = Limits()
    entries: list[HistoryEntry] = []

    def step(task_id: str, event: Event) -> None:
        nonlocal q
        s = apply_task_event(q, task_id, event, lim, NOW)
        q = s.quest
        entries.extend(s.entries)

    step(
        "TASK-1",
        Event(E.WORKTREE_CREATED, extra={"worktree": "/wt/1", "branch": "scaffold/task-1"}),
    )
    ask = parse_signal(SIGNALS[2], role=Role.CODEWEAVER)
    step("TASK-1", signal_event(q.tasks["TASK-1"], ask, session_id="s-1", question_id="q-1"))
    answered = answer_question(q, "q-1", "Postgres", "alice", lim, NOW)
    q = answered.quest
    entries.extend(answered.entries)
    step("TASK-1", Event(E.AGENT_FAILED, role=Role.CODEWEAVER, detail="exited without a signal"))
    followup = parse_signal(SIGNALS[3] | {"targetRole": "spiritmender"}, role=Role.CODEWEAVER)
    step("TASK-1", signal_event(q.tasks["TASK-1"], followup, session_id="s-1"))
    step("TASK-2", Event(E.PR_APPROVED, detail="bob"))
    q = add_cost(q, "TASK-1", 0.42, "codeweaver", "claude")
    stopped = stop_quest(q, "time budget of 4 h spent", NOW)
    q = stopped.quest
    entries.extend(stopped.entries)
    return q, entries


def test_a_real_quest_validates() -> None:
    quest, _ = _real_quest()
    dump = quest.model_dump(mode="json")
    assert dump["tasks"]["TASK-1"]["role_stack"], "the sample should exercise nested models"
    assert dump["questions"]["q-1"]["answer"] == "Postgres"
    validator("quest").validate(dump)
    # The JSON the store writes is the same document.
    validator("quest").validate(json.loads(quest.model_dump_json()))


@pytest.mark.parametrize(
    ("path", "value"),
    [
        (("phase",), "sleeping"),
        (("tasks", "TASK-1", "state"), "Dreaming"),
        (("tasks", "TASK-1", "attempts"), "three"),
        (("schema_version",), 2),
        (("cost_usd",), "free"),
    ],
)
def test_a_broken_quest_does_not_validate(path: tuple[str, ...], value: Any) -> None:
    quest, _ = _real_quest()
    dump = quest.model_dump(mode="json")
    node = dump
    for part in path[:-1]:
        node = node[part]
    node[path[-1]] = value
    with pytest.raises(ValidationError):
        validator("quest").validate(dump)


def test_unknown_quest_field_does_not_validate() -> None:
    quest, _ = _real_quest()
    with pytest.raises(ValidationError):
        validator("quest").validate({**quest.model_dump(mode="json"), "owner": "x"})


def test_real_history_entries_validate() -> None:
    _, entries = _real_quest()
    assert {e.kind for e in entries} == {"transition", "quest"}
    v = validator("history-entry")
    for entry in entries:
        v.validate(entry.model_dump(mode="json"))
    with pytest.raises(ValidationError):
        v.validate({**entries[0].model_dump(mode="json"), "kind": "gossip"})


@pytest.mark.parametrize("payload", SIGNALS, ids=[s["signal"] for s in SIGNALS])
def test_real_signals_validate(payload: dict[str, Any]) -> None:
    v = validator("signal-back")
    v.validate(payload)
    v.validate(parse_signal(payload).model_dump(mode="json"))


@pytest.mark.parametrize(
    "payload",
    [
        {**SIGNALS[0], "extra": 1},
        {"signal": "complete", "stepId": "TASK-1"},
        {**SIGNALS[3], "resume": "yes"},
        {**SIGNALS[3], "targetRole": "chaoswhisperer"},
        {**SIGNALS[0], "signal": "done"},
    ],
)
def test_bad_signals_do_not_validate(payload: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        validator("signal-back").validate(payload)


def test_config_validates() -> None:
    v = validator("scaffold-config")
    v.validate(parse_config(DEFAULT_CONFIG_TEXT).model_dump(mode="json"))
    v.validate(YAML(typ="safe").load(DEFAULT_CONFIG_TEXT))
    with pytest.raises(ValidationError):
        v.validate({"slotz": 3})
    with pytest.raises(ValidationError):
        v.validate({"forge": "gitlab"})
