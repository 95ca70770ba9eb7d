"""``/scaffold`` commands from a writer, in an issue comment or on a task's pull request."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from scaffold.github.comments import COMMENT_REACTIONS, NOTICE_MARKER
from scaffold.github.links import QuestLink
from scaffold.github.runner import RepoContext
from scaffold.runtime import inbox

if TYPE_CHECKING:
    from scaffold.github.service import AppService


async def run_command(
    service: AppService,
    ctx: RepoContext,
    link: QuestLink,
    command: Any,
    by: str,
    number: int,
    comment_id: int,
    *,
    react: bool = True,
) -> None:
    if react:
        await service.react(ctx, COMMENT_REACTIONS, "eyes", comment_id=comment_id)
    if command.problem or command.verb == "fix":
        problem = command.problem or "`/scaffold fix` works on a task's pull request"
        await service.comment(
            ctx,
            number,
            f"{NOTICE_MARKER}\n{problem}. Commands: "
            "`/scaffold status`, `/scaffold abort`, `/scaffold retry <task>`, and on a "
            "task's pull request `/scaffold fix <what to change>`.",
        )
        return
    if command.verb == "abort":
        service.post(ctx, link, inbox.make("abort", link.quest_id, text=f"aborted by {by}", by=by))
    elif command.verb == "retry":
        quest = service.quest_of(ctx, link.quest_id)
        if command.task_id not in quest.tasks:
            await service.comment(
                ctx, number, f"{NOTICE_MARKER}\nThis quest has no task `{command.task_id}`."
            )
            return
        service.post(ctx, link, inbox.make("retry", link.quest_id, task_id=command.task_id, by=by))
    else:  # status: rewrite the status comment now
        service.runner.poke(ctx, link.quest_id)
