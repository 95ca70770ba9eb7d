"""Signal routing at run time: a role hands work to another and is resumed after it."""

from __future__ import annotations

from repo_builder import MakeProject, codeweaver_done, complete, write

GAP = "the empty input case is not handled"


def test_followup_runs_codeweaver_then_resumes_siegemaster(make_project: MakeProject) -> None:
    followup = {
        "signal": "needs-role-followup",
        "targetRole": "codeweaver",
        "reason": GAP,
        "context": "parse('') raises IndexError",
        "resume": True,
    }
    project = make_project(
        ["Parse the input"],
        [
            codeweaver_done("TASK-1", attempt=1),
            {"role": "siegemaster", "attempt": 1, "actions": [{"signal": followup}]},
            {
                "role": "codeweaver",
                "attempt": 2,
                "expect_resumed": False,
                "actions": [
                    {"expect_prompt_contains": GAP},
                    write("notes/empty.txt", "handled\n"),
                    complete("empty input handled"),
                ],
            },
            {
                "role": "siegemaster",
                "attempt": 2,
                "expect_resumed": True,
                "actions": [
                    {"expect_prompt_contains": "empty input handled"},
                    complete("edge cases hold now"),
                ],
            },
        ],
    )

    result = project.run()

    assert result.exit_code == 0, result.output
    order = [r["role"] for r in project.invocations()]
    assert order == ["codeweaver", "siegemaster", "codeweaver", "siegemaster", "lawbringer"]
    siege_first, siege_resumed = project.invocations(role="siegemaster")
    assert siege_first["resumed"] is False
    assert siege_resumed["resumed"] is True
    assert siege_resumed["session_id"] == siege_first["session_id"]
    _weaver_first, weaver_followup = project.invocations(role="codeweaver")
    assert weaver_followup["resumed"] is False  # the follow-up role starts its own session
    assert weaver_followup["session_id"] != siege_first["session_id"]
    events = project.events("TASK-1")
    assert events.index("role_followup") < events.index("followup_done")
    assert project.task("TASK-1").outcome == "merged"
    assert project.task("TASK-1").role_stack == ()
