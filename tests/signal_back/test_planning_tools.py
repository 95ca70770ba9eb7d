"""The planning tools ``write-requirements`` and ``create-tasks`` of the scaffold MCP server.

Three sessions go through the mcp SDK's client against the run's real endpoint (one per
role: ChaosWhisperer, PathSeeker, Codeweaver), each making many calls. The finer validation
cases call the tools' handlers directly (same code, no transport). Tasks are created
in a real git repository with a Backlog.md backlog and read back with load_backlog.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import anyio
import pytest

from scaffold import backlog as bl
from scaffold.errors import StoreError
from scaffold.quest.model import Requirements
from scaffold.roles import Role
from scaffold.signal_back import mcp_config
from scaffold.signal_back.cli import resolve_binding
from scaffold.signal_back.client import call_tool, connect
from scaffold.signal_back.endpoint import SignalEndpoint
from scaffold.signal_back.plan import (
    PLAN_FILE,
    PlanRecord,
    create_planned_tasks,
    create_tasks_tool,
    read_plan,
    validate_plan,
)
from scaffold.signal_back.planning import CREATE_TASKS_TOOL, REQUIREMENTS_TOOL
from scaffold.signal_back.records import Binding, SignalWriter, read_signals
from scaffold.signal_back.requirements import (
    REQUIREMENTS_FILE,
    parse_requirements,
    read_requirements,
    write_requirements_tool,
)
from scaffold.signal_back.tools import handle_call, planning_tools

GIT_IDENTITY = ("-c", "user.name=Test Person", "-c", "user.email=test@localhost")
BACKLOG_CONFIG = (
    'project_name: "planning-test"\n'
    'default_status: "To Do"\n'
    'statuses: ["To Do", "In Progress", "Done"]\n'
    "auto_commit: false\n"
    'task_prefix: "task"\n'
)

REQUIREMENTS: dict[str, Any] = {
    "contexts": [
        {
            "id": "C1",
            "description": "Given a logged-in user, when they open the dashboard",
            "observables": [
                {"id": "O1", "description": "their name is shown"},
                {"id": "O2", "description": "the last login time is shown"},
            ],
        },
        {
            "id": "C2",
            "description": "Given no session, when the dashboard is requested",
            "observables": [{"id": "O1", "description": "the login page is shown"}],
        },
    ]
}


def _ctx(**overrides: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "id": "C1",
        "description": "a situation",
        "observables": [{"id": "O1", "description": "a thing"}],
    }
    return {**base, **overrides}


# (arguments, field path and words the refusal must contain)
BAD_REQUIREMENTS: list[tuple[dict[str, Any], str]] = [
    ({}, "contexts: required"),
    ({"contexts": []}, "contexts: at least one context"),
    ({"contexts": [_ctx(observables=[])]}, "contexts.0.observables: at least one observable"),
    ({"contexts": [_ctx(), _ctx()]}, "contexts.1.id: duplicate id 'C1'"),
    (
        {"contexts": [_ctx(observables=[{"id": "O1", "description": "a"}] * 2)]},
        "contexts.0.observables.1.id: duplicate id 'O1' in this context",
    ),
    ({"contexts": [_ctx(id="")]}, "contexts.0.id: must not be empty"),
    ({"contexts": [_ctx(description="  ")]}, "contexts.0.description: must not be blank"),
    ({"contexts": [_ctx(id=7)]}, "contexts.0.id: must be a string"),
    (
        {"contexts": [_ctx(observables=[{"id": "O1"}])]},
        "contexts.0.observables.0.description: required",
    ),
    ({"contexts": [_ctx(mood="x")]}, "contexts.0.mood: unknown field"),
    ({"contexts": "C1"}, "contexts: must be a list"),
    ({"contexts": [_ctx()], "locked": True}, "locked: unknown field"),
]


def _task(key: str, *deps: str, **extra: Any) -> dict[str, Any]:
    return {
        "key": key,
        "title": f"Build the {key}",
        "description": f"The {key} of the app.",
        "acceptanceCriteria": [f"the {key} works"],
        "dependsOn": list(deps),
        "priority": "medium",
        **extra,
    }


def _plan(*tasks: dict[str, Any], files: list[str] | None = None) -> dict[str, Any]:
    return {"fileMap": ["src/app.py"] if files is None else files, "tasks": list(tasks)}


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", *GIT_IDENTITY, *args], cwd=repo, check=True, capture_output=True)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A git repository with a backlog holding TASK-1 (done) and TASK-2 (to do)."""
    root = tmp_path / "repo"
    root.mkdir()
    _git(root, "init", "-q", "-b", "main")
    for sub in ("tasks", "completed", "drafts"):
        (root / "backlog" / sub).mkdir(parents=True)
    (root / "backlog" / "config.yml").write_text(BACKLOG_CONFIG, encoding="utf-8")
    bl.create_task(root, "Set up the project", description="Scaffolding.")
    bl.create_task(root, "Write the README", dependencies=["TASK-1"])
    _git(root, "add", "-A")
    _git(root, "commit", "-q", "-m", "backlog")
    return root


def _ids(root: Path) -> list[str]:
    return [t.id for t in bl.load_backlog(root).tasks]


# --------------------------------------------------------------------------- MCP plumbing


def _binding(sig_dir: Path, role: Role, repo_root: Path | None = None) -> Binding:
    return Binding(sig_dir, "planning", role, "q-plan", repo_root)


Call = tuple[str, dict[str, Any] | None]


def _session(
    binding: Binding, calls: list[Call]
) -> tuple[dict[str, dict[str, Any]], list[tuple[bool, str]]]:
    """Serve the run's tools, list them, make the calls in order; (schemas by name, answers)."""
    answers: list[tuple[bool, str]] = []

    async def scenario() -> dict[str, dict[str, Any]]:
        async with SignalEndpoint(binding) as endpoint:
            entry = mcp_config(endpoint.url, endpoint.secret)["mcpServers"]["scaffold"]
            async with connect(entry) as client:
                tools = (await client.list_tools()).tools
                for name, arguments in calls:
                    text, is_error = await call_tool(client, name, arguments or {})
                    answers.append((is_error, text))
                return {t.name: dict(t.input_schema) for t in tools}

    return anyio.run(scenario), answers


# --------------------------------------------------------------------------- through MCP


def test_chaoswhisperer_writes_requirements_through_mcp(tmp_path: Path) -> None:
    sig = tmp_path / "sig"
    first = {"contexts": [_ctx()]}
    calls: list[Call] = [
        (REQUIREMENTS_TOOL, {"contexts": [_ctx(observables=[])]}),
        (REQUIREMENTS_TOOL, {"contexts": [_ctx(), _ctx()]}),
        (REQUIREMENTS_TOOL, None),
        (REQUIREMENTS_TOOL, first),
        (REQUIREMENTS_TOOL, REQUIREMENTS),  # a later call replaces the earlier requirements
        (CREATE_TASKS_TOOL, _plan(_task("parser"))),
        ("signal-back", {"signal": "complete", "stepId": "planning", "summary": "requirements"}),
    ]
    schemas, answers = _session(_binding(sig, Role.CHAOSWHISPERER), calls)

    assert list(schemas) == ["signal-back", REQUIREMENTS_TOOL]
    schema = schemas[REQUIREMENTS_TOOL]
    assert schema["required"] == ["contexts"]
    assert schema["properties"]["contexts"]["minItems"] == 1
    assert not {"oneOf", "anyOf", "allOf"} & set(schema)

    assert answers[0][0] is True
    assert "contexts.0.observables: at least one observable" in answers[0][1]
    assert "Fix these and call write-requirements again." in answers[0][1]
    assert answers[1][0] is True
    assert "contexts.1.id: duplicate id 'C1'" in answers[1][1]
    assert answers[2] == (
        True,
        "write-requirements refused (1 problem); nothing was stored.\n"
        "- contexts: required\nFix these and call write-requirements again.",
    )
    assert answers[3] == (
        False,
        "requirements recorded: 1 context, 1 observable (replacing any earlier version).",
    )
    assert answers[4] == (
        False,
        "requirements recorded: 2 contexts, 3 observables (replacing any earlier version).",
    )
    assert answers[5][0] is True
    assert "only for PathSeeker; you are ChaosWhisperer" in answers[5][1]
    assert answers[6][0] is False

    stored = read_requirements(sig)
    assert stored == Requirements.model_validate(REQUIREMENTS)
    assert [c.id for c in stored.contexts] == ["C1", "C2"]
    assert not (sig / PLAN_FILE).exists()
    assert [p.name for p in sig.iterdir() if p.name.startswith(".")] == []  # no temp files left
    assert [r.signal.signal for r in read_signals(sig)] == ["complete"]


def test_pathseeker_creates_tasks_through_mcp(tmp_path: Path, repo: Path) -> None:
    sig = tmp_path / "sig"
    plan = _plan(
        _task("api", "model", "TASK-1", priority="high"),
        _task("model"),
        _task("docs", "api", "model", "task-2", priority="low"),
        files=["src/app/api.py", "src/app/model.py", "docs/api.md"],
    )
    calls: list[Call] = [
        (CREATE_TASKS_TOOL, _plan(_task("a", "c"), _task("b", "a"), _task("c", "b"), _task("d"))),
        (CREATE_TASKS_TOOL, _plan(_task("a", "nowhere", "TASK-99"))),
        (CREATE_TASKS_TOOL, _plan(_task("a"), files=["src/../../etc/passwd"])),
        (CREATE_TASKS_TOOL, plan),
        (CREATE_TASKS_TOOL, plan),
        (REQUIREMENTS_TOOL, REQUIREMENTS),
    ]
    schemas, answers = _session(_binding(sig, Role.PATHSEEKER, repo), calls)

    assert list(schemas) == ["signal-back", CREATE_TASKS_TOOL]
    task_schema = schemas[CREATE_TASKS_TOOL]["properties"]["tasks"]["items"]
    assert task_schema["properties"]["priority"]["enum"] == ["high", "medium", "low"]

    cycle, unknown, escape, created, again, foreign = answers
    assert cycle[0] is True
    assert "dependency cycle among a, b, c: a -> c -> b -> a" in cycle[1]
    assert "no tasks were created" in cycle[1]
    assert unknown[0] is True
    assert "tasks.0.dependsOn.0: 'nowhere' is neither a key of this plan" in unknown[1]
    assert "tasks.0.dependsOn.1: 'TASK-99' is neither" in unknown[1]
    assert escape[0] is True
    assert "fileMap.0: 'src/../../etc/passwd' leaves the repository" in escape[1]

    # nothing refused reached the backlog (the next free id is still TASK-3), and the
    # tasks are created in dependency order: model first, then api, then docs
    assert created == (
        False,
        "tasks created: model -> TASK-3, api -> TASK-4, docs -> TASK-5. Refer to them by "
        "these ids from now on; do not call create-tasks again.",
    )
    snapshot = bl.load_backlog(repo)
    assert [t.id for t in snapshot.tasks] == ["TASK-1", "TASK-2", "TASK-3", "TASK-4", "TASK-5"]
    assert snapshot.problems == []
    model, api, docs = (snapshot.task(i) for i in ("TASK-3", "TASK-4", "TASK-5"))
    assert (model.title, model.dependencies, model.priority) == ("Build the model", [], "medium")
    assert (api.dependencies, api.priority) == (["TASK-3", "TASK-1"], "high")
    assert docs.dependencies == ["TASK-4", "TASK-3", "TASK-2"]
    assert [c.text for c in api.acceptance_criteria] == ["the api works"]
    assert api.description == "The api of the app."

    assert again[0] is True
    assert "already created (model -> TASK-3, api -> TASK-4, docs -> TASK-5)" in again[1]
    assert len(bl.load_backlog(repo).tasks) == 5  # no duplicates
    assert foreign[0] is True
    assert "only for ChaosWhisperer; you are PathSeeker" in foreign[1]
    assert not (sig / REQUIREMENTS_FILE).exists()

    record = read_plan(sig)
    assert record is not None
    assert record.complete is True
    assert record.file_map == ("src/app/api.py", "src/app/model.py", "docs/api.md")
    assert {t.key: t.id for t in record.tasks} == {
        "model": "TASK-3",
        "api": "TASK-4",
        "docs": "TASK-5",
    }
    raw = json.loads((sig / PLAN_FILE).read_text())
    assert raw["fileMap"] == list(record.file_map)
    assert raw["tasks"][1] == {
        "key": "api",
        "id": "TASK-4",
        "title": "Build the api",
        "dependencies": ["TASK-3", "TASK-1"],
    }


def test_other_roles_neither_see_nor_use_planning_tools(tmp_path: Path, repo: Path) -> None:
    sig = tmp_path / "sig"
    calls: list[Call] = [
        (REQUIREMENTS_TOOL, REQUIREMENTS),
        (CREATE_TASKS_TOOL, _plan(_task("parser"))),
        ("write-plan", {}),
    ]
    schemas, answers = _session(_binding(sig, Role.CODEWEAVER, repo), calls)
    assert list(schemas) == ["signal-back"]
    assert answers == [
        (
            True,
            "tool 'write-requirements' is only for ChaosWhisperer; you are Codeweaver. "
            "Nothing was done. Report with signal-back.",
        ),
        (
            True,
            "tool 'create-tasks' is only for PathSeeker; you are Codeweaver. "
            "Nothing was done. Report with signal-back.",
        ),
        (True, "unknown tool 'write-plan'; the only tool is signal-back"),
    ]
    assert not sig.exists()
    assert _ids(repo) == ["TASK-1", "TASK-2"]


# --------------------------------------------------------------------------- binding


def test_repo_root_reaches_the_binding(tmp_path: Path) -> None:
    argv = [f"--signal-dir={tmp_path / 'sig'}", "--step-id=planning", "--role=pathseeker"]
    assert resolve_binding([*argv, f"--repo-root={tmp_path / 'repo'}"], {}) == Binding(
        tmp_path / "sig", "planning", Role.PATHSEEKER, None, tmp_path / "repo"
    )
    env = {"SCAFFOLD_REPO_ROOT": "rel/repo"}
    bound = resolve_binding(["--signal-dir=s", "--step-id=T", "--role=pathseeker"], env)
    assert bound.repo_root == Path("rel/repo").absolute()
    assert (
        resolve_binding(["--signal-dir=s", "--step-id=T", "--role=pathseeker"], {}).repo_root
        is None
    )


def test_create_tasks_without_repo_root_is_refused(tmp_path: Path) -> None:
    binding = Binding(tmp_path / "sig", "planning", Role.PATHSEEKER)
    planning = planning_tools(binding)
    outcome = handle_call(
        binding, SignalWriter(binding), planning, CREATE_TASKS_TOOL, _plan(_task("a"))
    )
    assert outcome.is_error
    assert "started without a repository root (--repo-root or SCAFFOLD_REPO_ROOT)" in outcome.text
    assert not (tmp_path / "sig").exists()
    unknown = handle_call(binding, SignalWriter(binding), planning, "nope", {})
    assert unknown.text == "unknown tool 'nope'; your tools are signal-back, create-tasks"


# --------------------------------------------------------------------------- write-requirements


@pytest.mark.parametrize(("arguments", "expected"), BAD_REQUIREMENTS)
def test_each_malformed_requirements_shape_is_refused_with_its_field(
    tmp_path: Path, arguments: dict[str, Any], expected: str
) -> None:
    reply = write_requirements_tool(tmp_path / "sig", arguments)
    assert reply.is_error
    assert f"- {expected}" in reply.text
    assert reply.text.endswith("Fix these and call write-requirements again.")
    assert not (tmp_path / "sig").exists()


def test_requirements_problems_are_all_named_at_once() -> None:
    problems = parse_requirements(
        {"contexts": [_ctx(id="C1"), _ctx(id="C1", observables=[]), _ctx(id=" ", description="")]}
    )
    assert isinstance(problems, list)
    assert [str(p) for p in problems] == [
        "contexts.1.observables: at least one observable",
        "contexts.2.description: must not be empty",
    ]  # type errors first; uniqueness is checked once the shape is right
    shaped = parse_requirements({"contexts": [_ctx(), _ctx(id=" ")]})
    assert isinstance(shaped, list)
    assert [str(p) for p in shaped] == ["contexts.1.id: must not be blank"]


def test_requirements_reader(tmp_path: Path) -> None:
    assert read_requirements(tmp_path / "none") is None
    assert not write_requirements_tool(tmp_path, REQUIREMENTS).is_error
    assert read_requirements(tmp_path) == Requirements.model_validate(REQUIREMENTS)
    (tmp_path / REQUIREMENTS_FILE).write_text("{not json")
    with pytest.raises(StoreError, match="not a requirements file") as info:
        read_requirements(tmp_path)
    assert info.value.path == str(tmp_path / REQUIREMENTS_FILE)
    (tmp_path / REQUIREMENTS_FILE).write_text(json.dumps({"contexts": [_ctx(), _ctx()]}))
    with pytest.raises(StoreError, match=r"invalid requirements: contexts\.1\.id: duplicate"):
        read_requirements(tmp_path)


# --------------------------------------------------------------------------- create-tasks


def _refused(tmp_path: Path, repo: Path, arguments: dict[str, Any]) -> str:
    reply = create_tasks_tool(tmp_path / "sig", repo, arguments)
    assert reply.is_error
    assert reply.text.startswith("create-tasks refused (")
    assert reply.text.endswith("Fix these and call create-tasks again.")
    assert _ids(repo) == ["TASK-1", "TASK-2"]
    assert not (tmp_path / "sig" / PLAN_FILE).exists()
    return reply.text


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ({"fileMap": []}, "- tasks: required"),
        (_plan(), "- tasks: at least one task"),
        ({"tasks": [_task("a")]}, "- fileMap: required"),
        (_plan(_task("Parser")), "- tasks.0.key: 'Parser' is not a key; use 1-40 characters"),
        (_plan(_task("x" * 41)), "- tasks.0.key: 'xxxx"),
        (_plan(_task("task-2")), "- tasks.0.key: 'task-2' looks like a backlog task id"),
        (_plan(_task("a"), _task("a")), "- tasks.1.key: duplicate key 'a' (tasks.0)"),
        (_plan(_task("a", title="   ")), "- tasks.0.title: must not be empty"),
        (_plan(_task("a", title="one\ntwo")), "- tasks.0.title: must be a single line"),
        (_plan(_task("a", title="t" * 201)), "- tasks.0.title: at most 200 characters (got 201)"),
        (_plan(_task("a", priority="urgent")), "- tasks.0.priority: 'urgent' is not a priority"),
        (_plan(_task("a", acceptanceCriteria=["ok", " "])), "- tasks.0.acceptanceCriteria.1: must"),
        (_plan(_task("a", owner="me")), "- tasks.0.owner: unknown field"),
        (_plan(_task("a", dependsOn="b")), "- tasks.0.dependsOn: must be a list"),
        (_plan(_task("a", "a")), "dependency cycle among a: a -> a"),
        (_plan(_task("a", "TASK-7")), "- tasks.0.dependsOn.0: 'TASK-7' is neither"),
        (_plan(_task("a"), files=["../x.py"]), "- fileMap.0: '../x.py' leaves the repository"),
        (_plan(_task("a"), files=["src\\..\\x"]), "leaves the repository"),
        (_plan(_task("a"), files=["/etc/passwd"]), "- fileMap.0: '/etc/passwd' is absolute"),
        (_plan(_task("a"), files=["C:/x.py"]), "- fileMap.0: 'C:/x.py' is absolute"),
        (_plan(_task("a"), files=[""]), "- fileMap.0: must not be empty"),
        ({"fileMap": [3], "tasks": [_task("a")]}, "- fileMap.0: must be a string"),
    ],
)
def test_each_malformed_plan_is_refused_with_its_field(
    tmp_path: Path, repo: Path, arguments: dict[str, Any], expected: str
) -> None:
    assert expected in _refused(tmp_path, repo, arguments)


def test_every_problem_of_a_plan_is_named_and_nothing_is_created(
    tmp_path: Path, repo: Path
) -> None:
    text = _refused(
        tmp_path,
        repo,
        _plan(
            _task("a", "b", title=""),
            _task("b", "c"),
            _task("c", "a", "ghost"),
            files=["ok.py", "/abs"],
        ),
    )
    assert text.splitlines() == [
        "create-tasks refused (4 problems); no tasks were created.",
        "- fileMap.1: '/abs' is absolute; give it relative to the repo root",
        "- tasks.0.title: must not be empty",
        "- tasks.2.dependsOn.1: 'ghost' is neither a key of this plan nor an existing backlog "
        "task id",
        "- tasks.dependsOn: dependency cycle among a, b, c: a -> b -> c -> a (read 'a -> b' as "
        "'a depends on b'); remove one of these dependencies",
        "Fix these and call create-tasks again.",
    ]


def test_create_tasks_needs_a_backlog(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    reply = create_tasks_tool(tmp_path / "sig", tmp_path / "empty", _plan(_task("a")))
    assert reply.is_error
    assert "cannot read the backlog" in reply.text
    assert "no Backlog.md folder" in reply.text


def test_a_failure_half_way_removes_the_tasks_again(tmp_path: Path, repo: Path) -> None:
    # a dependency that vanishes between the check and the creation: the backlog refuses it
    sig = tmp_path / "sig"
    task_one = bl.load_backlog(repo).task("TASK-1").path
    arguments = _plan(_task("first"), _task("second", "first", "TASK-1"))
    snapshot = bl.load_backlog(repo)
    plan = validate_plan(arguments, snapshot)
    assert not isinstance(plan, list)
    task_one.unlink()
    reply = create_planned_tasks(repo, sig, plan)
    assert reply.is_error
    assert "dependency TASK-1 does not exist" in reply.text
    assert "no tasks were left behind. Call create-tasks again." in reply.text
    assert _ids(repo) == ["TASK-2"]  # "first" (TASK-3) was created, then removed again
    assert not (sig / PLAN_FILE).exists()


def test_an_interrupted_creation_is_never_repeated(tmp_path: Path, repo: Path) -> None:
    sig = tmp_path / "sig"
    sig.mkdir()
    half = {"fileMap": [], "tasks": [{"key": "a", "id": "TASK-3", "title": "A"}], "complete": False}
    (sig / PLAN_FILE).write_text(json.dumps(half))
    reply = create_tasks_tool(sig, repo, _plan(_task("a")))
    assert reply.is_error
    assert "interrupted after creating a -> TASK-3; nothing new was created" in reply.text
    (sig / PLAN_FILE).write_text("[]")
    broken = create_tasks_tool(sig, repo, _plan(_task("a")))
    assert broken.is_error
    assert "cannot be read" in broken.text
    assert _ids(repo) == ["TASK-1", "TASK-2"]


def test_plan_reader(tmp_path: Path) -> None:
    assert read_plan(tmp_path) is None
    (tmp_path / PLAN_FILE).write_text(json.dumps({"fileMap": ["a.py"], "tasks": []}))
    assert read_plan(tmp_path) == PlanRecord(file_map=("a.py",), tasks=())
    (tmp_path / PLAN_FILE).write_text(json.dumps({"tasks": []}))
    with pytest.raises(StoreError, match="not a plan record: fileMap: required") as info:
        read_plan(tmp_path)
    assert info.value.path == str(tmp_path / PLAN_FILE)


def test_a_quests_planned_tasks_carry_its_label(tmp_path: Path, repo: Path) -> None:
    """The quest that planned a task owns it: ``quest:<id>``, which the real backlog CLI
    shows as a label and no other quest of the repository adopts."""
    reply = create_tasks_tool(
        tmp_path / "sig", repo, _plan(_task("a"), _task("b")), quest_id="issue-4"
    )
    assert not reply.is_error, reply.text
    new = [t for t in bl.load_backlog(repo).tasks if t.id not in ("TASK-1", "TASK-2")]
    assert [t.labels for t in new] == [["quest:issue-4"], ["quest:issue-4"]]
    unlabelled = create_tasks_tool(tmp_path / "sig2", repo, _plan(_task("c")))
    assert not unlabelled.is_error, unlabelled.text
    assert [t.labels for t in bl.load_backlog(repo).tasks][-1] == []
