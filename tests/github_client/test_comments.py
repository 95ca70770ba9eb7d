"""What the App writes (status, questions, PR body) and how it reads commands and answers."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from scaffold.core.states import Lifecycle
from scaffold.github.comments import (
    NOTICE_MARKER,
    AnswerMatch,
    Command,
    match_answer,
    parse_command,
    render_ambiguous,
    render_pr_body,
    render_question,
    render_status,
    task_graph,
)
from scaffold.quest.model import (
    Context,
    Observable,
    PlanningState,
    PullRequest,
    Quest,
    Question,
    QuestPhase,
    Requirements,
    TaskRecord,
)
from scaffold.roles import Role

T0 = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)

# ---------------------------------------------------------------------- commands


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("/scaffold status", Command("status")),
        ("  /scaffold   STATUS  ", Command("status")),
        ("/scaffold abort", Command("abort")),
        ("/scaffold retry task-3", Command("retry", task_id="TASK-3")),
        ("/scaffold retry TASK-3.1", Command("retry", task_id="TASK-3.1")),
        (
            "/scaffold fix  rename x to count\nplease",
            Command("fix", text="rename x to count\nplease"),
        ),
        ("thanks!\n/scaffold FIX the typo", Command("fix", text="the typo")),
    ],
)
def test_commands_are_parsed(body: str, expected: Command) -> None:
    assert parse_command(body) == expected


def test_retry_without_a_task_says_which_task() -> None:
    for body in ("/scaffold retry", "/scaffold retry everything"):
        command = parse_command(body)
        assert command is not None
        assert command.verb == "retry"
        assert command.task_id is None
        assert command.problem is not None
        assert "task-3" in command.problem


def test_fix_without_text_says_what_to_write() -> None:
    command = parse_command("/scaffold fix   ")
    assert command is not None
    assert command.verb == "fix"
    assert command.problem is not None
    assert "/scaffold fix <what to change>" in command.problem


def test_an_unknown_verb_is_a_help_with_the_problem() -> None:
    command = parse_command("/scaffold deploy")
    assert command == Command("help", problem="unknown command 'deploy'")


@pytest.mark.parametrize(
    "body",
    [
        "",
        "looks good to me",
        "please run `/scaffold status` later",  # mentioned inside a sentence
        "/scaffolding status",
        "/scaffold-status",
    ],
)
def test_text_that_is_not_a_command(body: str) -> None:
    assert parse_command(body) is None


def test_a_command_on_a_later_line_is_found() -> None:
    assert parse_command("Thanks for the update.\n\n/scaffold abort\n") == Command("abort")
    assert parse_command("> quoted\n/scaffold status\nbye") == Command("status")


def test_the_first_command_line_wins() -> None:
    assert parse_command("/scaffold status\n/scaffold abort") == Command("status")


# ---------------------------------------------------------------------- answers


def test_no_open_question_means_no_answer() -> None:
    assert match_answer("yes please", []) is None
    assert match_answer("/answer q-1-1 yes", []) is None


def test_a_plain_reply_answers_the_single_open_question() -> None:
    assert match_answer("  Use PostgreSQL.  ", ["q-1-1"]) == AnswerMatch("q-1-1", "Use PostgreSQL.")


def test_an_empty_reply_is_no_answer() -> None:
    assert match_answer("   \n ", ["q-1-1"]) is None


def test_slash_answer_names_the_question() -> None:
    got = match_answer("/answer q-2-1 Keep the old API.\nAnd log it.", ["q-1-1", "q-2-1"])
    assert got == AnswerMatch("q-2-1", "Keep the old API.\nAnd log it.")
    assert match_answer("/answer q-2-1: yes", ["q-2-1"]) == AnswerMatch("q-2-1", "yes")


def test_a_leading_id_names_the_question() -> None:
    assert match_answer("q-1-1: use tabs", ["q-1-1", "q-2-1"]) == AnswerMatch("q-1-1", "use tabs")
    assert match_answer("q-2-1 - no", ["q-1-1", "q-2-1"]) == AnswerMatch("q-2-1", "no")


def test_quoting_the_question_id_answers_it() -> None:
    body = "> **❓ Question `q-2-1`** from Codeweaver (task-2):\n> Which port?\n\nPort 8080."
    assert match_answer(body, ["q-1-1", "q-2-1"]) == AnswerMatch("q-2-1", "Port 8080.")


def test_several_open_and_none_named_is_ambiguous() -> None:
    got = match_answer("yes", ["q-1-1", "q-2-1"])
    assert got == AnswerMatch(None, "yes", "ambiguous")
    quoting_both = "`q-1-1` and `q-2-1`: yes"
    assert match_answer(quoting_both, ["q-1-1", "q-2-1"]) == AnswerMatch(
        None, quoting_both, "ambiguous"
    )


def test_an_unknown_id_is_refused() -> None:
    got = match_answer("/answer q-9-9 yes", ["q-1-1"])
    assert got is not None
    assert got.question_id is None
    assert got.problem == "`q-9-9` is not an open question"


def test_an_empty_named_answer_is_refused() -> None:
    got = match_answer("/answer q-1-1   ", ["q-1-1"])
    assert got == AnswerMatch(None, "", "the answer to `q-1-1` is empty")


# ---------------------------------------------------------------------- renderers


def question(
    qid: str, task_id: str | None, text: str = "Which port?", context: str = ""
) -> Question:
    return Question(
        id=qid,
        task_id=task_id,
        role=Role.CODEWEAVER,
        session_id=None,
        question=text,
        context=context,
        asked_at=T0,
    )


def quest() -> Quest:
    tasks = {
        "task-1": TaskRecord(
            id="task-1",
            title="Add the parser",
            state=Lifecycle.IDLE,
            role=Role.CODEWEAVER,
            cost_usd=1.5,
            started_at=T0,
            finished_at=T0 + timedelta(minutes=4, seconds=5),
            outcome="merged",
            pr=PullRequest(branch="scaffold/task-1", base="main", number=11, state="merged"),
        ),
        "task-2": TaskRecord(
            id="task-2",
            title="Wire | the CLI",
            dependencies=("task-1",),
            state=Lifecycle.PROCESSING,
            role=Role.CODEWEAVER,
            cost_usd=0.25,
            started_at=T0 + timedelta(minutes=5),
            question_id="q-2-1",
        ),
        "task-3": TaskRecord(
            id="task-3",
            title='Say "hello"',
            dependencies=("task-1", "task-2", "task-99"),
            state=Lifecycle.TEST_VALIDATION,
            role=Role.SIEGEMASTER,
            started_at=T0 + timedelta(minutes=6),
        ),
    }
    return Quest(
        id="q-7",
        phase=QuestPhase.EXECUTING,
        tasks=tasks,
        questions={"q-2-1": question("q-2-1", "task-2")},
        cost_usd=1.75,
        started_at=T0,
        requirements=Requirements(
            contexts=(
                Context(
                    id="C1",
                    description="A user runs the CLI",
                    observables=(Observable(id="O1", description="It prints hello"),),
                ),
            )
        ),
    )


def test_status_comment_has_marker_rows_graph_and_budget() -> None:
    text = render_status(
        quest(),
        now=T0 + timedelta(minutes=30),
        max_cost_usd=10.0,
        max_hours=4,
        slots=3,
        slot_of={"task-2": 1, "task-3": 2},
    )
    lines = text.splitlines()
    assert lines[0] == "<!-- scaffold:status q-7 -->"
    assert "q-7 · executing" in lines[1]
    rows = [line for line in lines if line.startswith("| task-")]
    assert rows == [
        "| task-1 Add the parser | ✅ merged | Codeweaver | - | 4m05s | $1.50 | #11 |",
        "| task-2 Wire \\| the CLI | ❓ waiting for an answer (q-2-1) | Codeweaver | 1 | "
        "25m00s | $0.25 | - |",
        '| task-3 Say "hello" | 🧪 TestValidation | Siegemaster | 2 | 24m00s | $0.00 | - |',
    ]
    graph = text.split("```mermaid\n", 1)[1].split("\n```", 1)[0]
    assert graph.startswith("flowchart LR")
    assert "  task_1 --> task_2" in graph
    assert "  task_1 --> task_3" in graph
    assert "  task_2 --> task_3" in graph
    assert "task_99" not in graph  # an unknown dependency draws no edge
    assert "task_3[\"task-3: Say 'hello'\"]" in graph
    assert "  class task_1 done" in graph
    assert "  class task_2,task_3 busy" in graph
    assert "Budget: $1.75 spent, $8.25 left of $10.00; 0.5 h of 4 h; slots busy 1/3." in lines
    assert "Waiting for answers: `q-2-1`." in lines


def test_status_while_planning_and_stopped() -> None:
    base = Quest(
        id="q-8",
        phase=QuestPhase.PLANNING,
        planning=PlanningState(role=Role.PATHSEEKER, question_id="q-8-1"),
        questions={"q-8-1": question("q-8-1", None)},
        cost_usd=12.0,
        started_at=T0,
        stop_reason="cost limit reached",
    )
    text = render_status(base, now=T0 + timedelta(hours=2), max_cost_usd=10, max_hours=3, slots=2)
    assert "> ⏹️ Stopped: cost limit reached" in text
    assert "Planning: PathSeeker, waiting for an answer (q-8-1)." in text
    assert "| task |" not in text
    assert "```mermaid" not in text
    assert "Budget: $12.00 spent, $0.00 left of $10.00; 2.0 h of 3 h; slots busy 0/2." in text
    assert "Waiting for answers: `q-8-1`." in text


def test_task_graph_names_are_mermaid_safe() -> None:
    q = Quest(id="q-1", tasks={"task-1.2": TaskRecord(id="task-1.2", title="x")})
    assert task_graph(q) == 'flowchart LR\n  task_1_2["task-1.2: x"]'


def test_question_comment_with_one_or_several_open() -> None:
    q = question("q-2-1", "task-2", "Which port?\nHTTP or HTTPS?", context="The config has none.")
    one = render_question(q, several_open=False)
    assert one.startswith("<!-- scaffold:question q-2-1 -->\n")
    assert "**❓ Question `q-2-1`** from Codeweaver (task-2):" in one
    assert "> Which port?\n> HTTP or HTTPS?" in one
    assert "<details><summary>Context</summary>\n\nThe config has none.\n\n</details>" in one
    assert "Reply to this comment with your answer" in one
    assert "write access" in one
    several = render_question(question("q-0-1", None), several_open=True)
    assert "(planning)" in several
    assert "Reply with `/answer q-0-1 <your answer>`" in several
    assert "<details>" not in several


def test_a_reply_quoting_the_rendered_question_answers_it() -> None:
    rendered = render_question(question("q-2-1", "task-2"), several_open=True)
    quoted = "\n".join(f"> {line}" for line in rendered.splitlines()) + "\n\n8080"
    assert match_answer(quoted, ["q-1-1", "q-2-1"]) == AnswerMatch("q-2-1", "8080")


def test_ambiguous_notice_lists_the_open_questions() -> None:
    text = render_ambiguous([question("q-1-1", None, "A?"), question("q-2-1", "task-2", "B?")])
    assert text.startswith(NOTICE_MARKER)
    assert "- `q-1-1` (planning): A?" in text
    assert "- `q-2-1` (task-2): B?" in text


def test_pr_body() -> None:
    q = quest()
    task = q.tasks["task-3"].model_copy(
        update={"branch": "scaffold/task-3", "last_summary": "  Greets politely.  "}
    )
    body = render_pr_body(
        q,
        task,
        issue_number=42,
        description="Print hello.",
        diagram_paths=["docs/flow.mmd", "docs/states.mmd"],
    )
    lines = body.splitlines()
    assert lines[0] == '## task-3: Say "hello"'
    assert "Greets politely." in lines
    assert "### Task" in lines
    assert "Print hello." in lines
    assert "- **C1**: A user runs the CLI" in lines
    assert "  - O1: It prints hello" in lines
    assert "- [x] `docs/flow.mmd` checked by `scaffold/diagram-check`" in lines
    assert "- [x] `docs/states.mmd` checked by `scaffold/diagram-check`" in lines
    assert "Depends on: task-1, task-2, task-99" in lines
    assert "Part of #42 (quest `q-7`)." in lines
    assert lines[-1] == "Branch `scaffold/task-3`; Backlog.md: this PR marks task-3 Done."


def test_pr_body_without_issue_requirements_or_description() -> None:
    q = Quest(id="q-1", tasks={"task-1": TaskRecord(id="task-1", title="x", branch="b")})
    body = render_pr_body(q, q.tasks["task-1"], issue_number=None, description="", diagram_paths=[])
    assert "Part of #" not in body
    assert "### Requirements" not in body
    assert "### Task" not in body
    assert "Depends on" not in body
    assert "### Diagrams" in body


def test_a_command_may_carry_more_words_on_its_line() -> None:
    assert parse_command("/scaffold abort now, please") == Command("abort")


def test_a_bare_command_asks_what_to_do() -> None:
    command = parse_command("/scaffold")
    assert command is not None
    assert command.verb == "help"
    assert command.problem


def test_a_reply_that_only_quotes_the_question_is_not_an_answer() -> None:
    assert match_answer("> **Question `q-1-1`**\n> How red?", ["q-1-1", "q-2-1"]) is None


def test_status_comment_shows_each_tasks_round() -> None:
    from scaffold.quest.model import CheckFailure, Feedback, ReviewRound

    ann = Feedback(key="review:1", kind="review", by="ann", at=T0, body="rename")
    check = CheckFailure(name="test (3.12)", conclusion="failure", head_sha="abc")
    ci = Feedback(key="check:ci/test@abc", kind="ci", by="ci", at=T0, check=check)
    base = quest()
    tasks = dict(base.tasks)
    tasks["task-2"] = tasks["task-2"].model_copy(
        update={
            "question_id": None,
            "state": Lifecycle.PROCESSING,
            "review_rounds": 2,
            "rounds": (
                ReviewRound(
                    number=1, kind="review", feedback=(ann,), commit="f" * 40, answered_at=T0
                ),
                ReviewRound(number=2, kind="review", feedback=(ann,)),
            ),
        }
    )
    tasks["task-3"] = tasks["task-3"].model_copy(
        update={"ci_fixes": 1, "rounds": (ReviewRound(number=1, kind="ci", feedback=(ci,)),)}
    )
    text = render_status(
        base.model_copy(update={"tasks": tasks}),
        now=T0 + timedelta(minutes=30),
        max_cost_usd=10.0,
        max_hours=4,
        slots=3,
        max_rounds=5,
        max_ci_fixes=2,
    )
    assert "- task-2: changes requested by @ann, round 2 of 5" in text
    assert "- task-3: fixing CI `test (3.12)`, 1 of 2" in text
    assert "task-1:" not in text.split("Review:", 1)[1].split("```", 1)[0]  # merged: no round
