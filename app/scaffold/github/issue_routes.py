"""The App's routes on an issue: the trigger label starts (or, removed, aborts) a quest;
comments carry ``/scaffold`` commands and answers to open questions. On a task's pull
request (or in a review thread) a writer's ``/scaffold fix <text>`` is feedback for the
task's next round. Only people with write access count.
"""

from __future__ import annotations

import contextlib
import logging
from typing import TYPE_CHECKING, Any

from scaffold import backlog as bl
from scaffold.errors import ScaffoldError
from scaffold.github import feedback as fb
from scaffold.github.access import is_bot
from scaffold.github.comments import (
    COMMENT_REACTIONS,
    NOTICE_MARKER,
    Command,
    match_answer,
    parse_command,
    render_ambiguous,
)
from scaffold.github.links import QuestLink
from scaffold.github.runner import FINISHED, RepoContext
from scaffold.quest.model import AgentRun, PlanningState, Quest, QuestPhase, QuestSource
from scaffold.roles import Role
from scaffold.runtime import inbox
from scaffold.runtime.session import quest_store
from scaffold.sanitize import clean
from scaffold.server.delivery import Delivery

if TYPE_CHECKING:
    from scaffold.github.service import AppService

log = logging.getLogger("scaffold.app")


async def labeled(service: AppService, d: Delivery) -> None:
    p = d.payload
    ctx = await service.context(p, d.installation_id)
    await service.ensure_clone(ctx)
    config = ctx.checkout.config()
    label = str((p.get("label") or {}).get("name", ""))
    if label != config.trigger_label:
        return
    issue = p["issue"]
    number = int(issue["number"])
    sender = p.get("sender") or {}
    if not await ctx.permissions.is_writer(sender):
        log.warning(
            "label ignored: the sender lacks write access or is a bot",
            extra={"delivery": d.id, "sender": sender.get("login"), "issue": number},
        )
        return
    existing = ctx.links.for_issue(ctx.full_name, number)
    if existing is not None:
        quest = service.quest_of(ctx, existing.quest_id)
        if quest.phase not in FINISHED:
            # The label put back on a quest someone stopped: it goes on.
            service.runner.poke(ctx, existing.quest_id, resume=True)
            return
        ctx.links.update(existing.quest_id, active=False)
    await service.react(
        ctx, "/repos/{owner}/{repo}/issues/{number}/reactions", "eyes", number=number
    )
    quest_id = _new_quest(ctx, issue)
    ctx.links.put(
        QuestLink(
            quest_id=quest_id,
            repo=ctx.full_name,
            issue_number=number,
            installation_id=ctx.installation_id,
            requested_by=str(sender.get("login")),
        )
    )
    log.info("quest started", extra={"quest": quest_id, "issue": number, "repo": ctx.full_name})
    service.runner.poke(ctx, quest_id)


def _new_quest(ctx: RepoContext, issue: dict[str, Any]) -> str:
    store = quest_store(ctx.checkout.path)
    number = int(issue["number"])
    quest_id = f"issue-{number}"
    n = 1
    while store.exists(quest_id):
        n += 1
        quest_id = f"issue-{number}-{n}"
    title = clean(str(issue.get("title") or ""), 500)
    body = clean(str(issue.get("body") or ""))
    request = f"{title}\n\n{body}".strip()
    known: tuple[str, ...] = ()
    with contextlib.suppress(ScaffoldError, OSError):
        known = tuple(t.id for t in bl.load_backlog(ctx.checkout.path).tasks)
    quest = Quest(
        id=quest_id,
        request=request,
        source=QuestSource(kind="github", repo=ctx.full_name, issue_number=number),
        phase=QuestPhase.REQUIREMENTS,
        planning=PlanningState(
            role=Role.CHAOSWHISPERER,
            pending_run=AgentRun(role=Role.CHAOSWHISPERER, kind="fresh"),
            known_before=known,
        ),
    )
    store.create(quest).close()
    return quest_id


async def unlabeled(service: AppService, d: Delivery) -> None:
    p = d.payload
    ctx = await service.context(p, d.installation_id)
    link = ctx.links.for_issue(ctx.full_name, int(p["issue"]["number"]))
    if link is None:
        return
    config = ctx.checkout.config()
    if str((p.get("label") or {}).get("name", "")) != config.trigger_label:
        return
    if not await ctx.permissions.is_writer(p.get("sender") or {}):
        return
    by = str(p["sender"]["login"])
    service.post(
        ctx, link, inbox.make("abort", link.quest_id, text=f"label removed by {by}", by=by)
    )


async def issue_comment(service: AppService, d: Delivery) -> None:
    p = d.payload
    sender = p.get("sender") or {}
    comment = p.get("comment") or {}
    if is_bot(sender):
        return  # scaffold's own comments, and other bots
    body = str(comment.get("body") or "")
    ctx = await service.context(p, d.installation_id)
    number = int(p["issue"]["number"])
    if p["issue"].get("pull_request") is not None:
        await pr_comment(service, d, ctx, number, comment, in_thread=False)
        return
    link = ctx.links.for_issue(ctx.full_name, number)
    command = parse_command(body)
    if link is None or (command is None and NOTICE_MARKER in body):
        return
    if not await ctx.permissions.is_writer(sender):
        log.info(
            "comment ignored: the sender lacks write access",
            extra={"delivery": d.id, "sender": sender.get("login")},
        )
        return
    by = str(sender["login"])
    comment_id = int(comment["id"])
    if command is not None:
        await service.react(ctx, COMMENT_REACTIONS, "eyes", comment_id=comment_id)
        await run_command(service, ctx, link, command, by, number)
        return
    quest = service.quest_of(ctx, link.quest_id)
    pending = quest.pending_questions()
    match = match_answer(body, [q.id for q in pending])
    if match is None:
        return
    if match.question_id is None:
        text = (
            render_ambiguous(pending)
            if match.problem == "ambiguous"
            else (f"{NOTICE_MARKER}\nI could not take that as an answer: {match.problem}.")
        )
        await service.comment(ctx, number, text)
        return
    await service.react(ctx, COMMENT_REACTIONS, "+1", comment_id=comment_id)
    service.answer(ctx, link, match.question_id, match.text, by)


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
