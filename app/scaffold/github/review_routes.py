"""The App's ``/scaffold`` commands and the routes of the review loop: a writer's
``/scaffold fix`` on a task's pull request (or in a review thread), and failed checks or
statuses on its head, become feedback for the task's next round.
"""

from __future__ import annotations

import contextlib
import logging
from typing import TYPE_CHECKING, Any

from scaffold.errors import ScaffoldError
from scaffold.github import feedback as fb
from scaffold.github.access import is_bot, same_repository
from scaffold.github.client import repo_vars
from scaffold.github.comments import COMMENT_REACTIONS, NOTICE_MARKER, Command, parse_command
from scaffold.github.links import QuestLink
from scaffold.github.runner import RepoContext
from scaffold.quest.model import Feedback
from scaffold.runtime import inbox
from scaffold.server.delivery import Delivery

if TYPE_CHECKING:
    from scaffold.github.service import AppService

log = logging.getLogger("scaffold.app")


async def run_command(
    service: AppService,
    ctx: RepoContext,
    link: QuestLink,
    command: Command,
    by: str,
    number: int,
) -> None:
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


async def pr_comment(
    service: AppService,
    d: Delivery,
    ctx: RepoContext,
    number: int,
    comment: dict[str, Any],
    *,
    in_thread: bool,
) -> None:
    """A comment on pull request ``number``: `/scaffold fix <text>` sends its task back to
    work with it; the other commands do what they do on the issue; the rest is ignored."""
    sender = comment.get("user") or (d.payload.get("sender") or {})
    command = parse_command(str(comment.get("body") or ""))
    if command is None or is_bot(sender):
        return
    found = service.task_of_pr(ctx, number)
    if found is None:
        return
    if not await ctx.permissions.is_writer(sender):
        log.info(
            "command ignored: the sender lacks write access",
            extra={"delivery": d.id, "sender": sender.get("login"), "pr": number},
        )
        return
    link, task_id = found
    by = str(sender["login"])
    comment_id = int(comment["id"])
    log.info(
        "command on a task's pull request",
        extra={"delivery": d.id, "pr": number, "task": task_id, "verb": command.verb},
    )
    if not in_thread:  # in a thread, the reply after the round answers it
        await service.react(ctx, COMMENT_REACTIONS, "eyes", comment_id=comment_id)
    if command.verb != "fix" or command.problem:
        await run_command(service, ctx, link, command, by, number)
        return
    item = fb.from_fix(comment, command.text, in_thread=in_thread)
    service.post(ctx, link, inbox.feedback(link.quest_id, task_id, item))


async def check_failures(ctx: RepoContext, d: Delivery, number: int) -> list[Feedback]:
    """The merge-blocking failures a check delivery tells of, on the PR's current head."""
    where = repo_vars(ctx.full_name)
    pr = await ctx.client.get("/repos/{owner}/{repo}/pulls/{number}", {**where, "number": number})
    if pr.get("state") != "open" or not same_repository(pr, ctx.full_name):
        return []
    head = str((pr.get("head") or {}).get("sha") or "")
    if d.event == "check_run":
        runs = [d.payload["check_run"]]
    else:
        runs = await ctx.client.get_all(
            "/repos/{owner}/{repo}/check-suites/{check_suite_id}/check-runs",
            {**where, "check_suite_id": int(d.payload["check_suite"]["id"])},
            key="check_runs",
        )
    on_head = [run for run in runs if run.get("head_sha") == head]  # not an earlier head's
    return await fb.from_check_runs(ctx.client, where, on_head, ctx.app, str(pr["base"]["ref"]))


async def status_failed(service: AppService, d: Delivery) -> None:
    """A commit status that fails a task's pull request head and blocks its merge."""
    p = d.payload
    if p.get("state") not in ("failure", "error"):
        return
    ctx = await service.context(p, d.installation_id)
    sha = str(p.get("sha") or "")
    where = repo_vars(ctx.full_name)
    for link in ctx.links.all():
        with contextlib.suppress(ScaffoldError, OSError):
            quest = service.quest_of(ctx, link.quest_id)
            for task in quest.tasks.values():
                if task.pr is None or task.pr.head_sha != sha or task.pr.number is None:
                    continue
                pr = await ctx.client.get(
                    "/repos/{owner}/{repo}/pulls/{number}", {**where, "number": task.pr.number}
                )
                if (pr.get("head") or {}).get("sha") != sha or pr.get("state") != "open":
                    continue
                protection = await fb.required_status_checks(
                    ctx.client, where, str(pr["base"]["ref"])
                )
                item = fb.from_status(p, set(protection.get("contexts") or []))
                if item is not None:
                    service.post(ctx, link, inbox.feedback(link.quest_id, task.id, item))


async def review_comment(service: AppService, d: Delivery) -> None:
    """A comment in a review thread: a `/scaffold ...` command there counts."""
    p = d.payload
    ctx = await service.context(p, d.installation_id)
    pr = p.get("pull_request") or {}
    if not same_repository(pr, ctx.full_name):
        return
    comment = p.get("comment") or {}
    await pr_comment(service, d, ctx, int(pr["number"]), comment, in_thread=True)
