"""Reconciliation: what deliveries would have said, read back from GitHub (which does not
retry a failed delivery). Every open quest's pull requests (merged, closed by a writer,
approved by a writer at their current head, changes requested, checks failed), answers
among its issue's comments and its trigger label become the inbox messages the
deliveries would have posted. Level-triggered: a second pass changes nothing.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from scaffold.core import review
from scaffold.core.states import Lifecycle
from scaffold.github import feedback as fb
from scaffold.github.access import approver_of, latest_decisions, same_repository
from scaffold.github.client import check_runs, repo_vars
from scaffold.github.comments import match_answer
from scaffold.github.links import QuestLink
from scaffold.github.runner import RepoContext
from scaffold.quest.model import Feedback, Quest, QuestPhase, TaskRecord
from scaffold.runtime import inbox

if TYPE_CHECKING:
    from scaffold.github.service import AppService

log = logging.getLogger("scaffold.app")


async def reconcile_quest(service: AppService, ctx: RepoContext, link: QuestLink) -> None:
    quest = service.quest_of(ctx, link.quest_id)
    if quest.phase in (QuestPhase.DONE, QuestPhase.FAILED):
        ctx.links.update(link.quest_id, active=False)
        return
    await _pull_requests(service, ctx, link, quest)
    await _answers(service, ctx, link, quest)
    if await _label_removed(service, ctx, link, quest):
        return
    service.runner.poke(ctx, link.quest_id)


async def _pull_requests(
    service: AppService, ctx: RepoContext, link: QuestLink, quest: Quest
) -> None:
    for task in quest.tasks.values():
        at_pr = task.state in (Lifecycle.PR_CREATED, Lifecycle.MERGING)
        if not at_pr or task.pr is None or task.pr.number is None:
            continue
        where = repo_vars(ctx.full_name, number=task.pr.number)
        pr = await ctx.client.get("/repos/{owner}/{repo}/pulls/{number}", where)
        if not same_repository(pr, ctx.full_name):
            continue  # never the case for a PR scaffold opened
        if pr.get("merged"):
            by = str((pr.get("merged_by") or {}).get("login", "github"))
            service.post(ctx, link, closed_message(link, task.id, pr, by))
            continue
        if pr.get("state") == "closed":
            # Rejected only when closed by a writer.
            closer = await ctx.permissions.closer(task.pr.number)
            if closer is not None:
                service.post(ctx, link, closed_message(link, task.id, pr, closer))
            else:
                log.info(
                    "pull request closed by someone without write access: the task goes on",
                    extra={"quest": link.quest_id, "pr": task.pr.number},
                )
            continue
        reviews = await ctx.client.get_all("/repos/{owner}/{repo}/pulls/{number}/reviews", where)
        if await _missed_feedback(service, ctx, link, task, pr, reviews):
            continue  # a round comes first; an approval of this head would not hold after it
        approver = await approver_of(reviews, str(pr["head"]["sha"]), ctx.permissions)
        if approver is not None:
            message = inbox.make(
                "approve", link.quest_id, task_id=task.id, text=approver, by=approver
            )
            service.post(ctx, link, message)


async def _missed_feedback(
    service: AppService,
    ctx: RepoContext,
    link: QuestLink,
    task: TaskRecord,
    pr: dict[str, Any],
    reviews: list[Any],
) -> bool:
    """Feedback whose delivery was lost: each writer's newest review when it requests
    changes, and merge-blocking checks failed on the head. True when any was posted."""
    found: list[Feedback] = []
    bot = await service.github.bot_login()
    for login, r in latest_decisions(reviews).items():
        if r.get("state") != "CHANGES_REQUESTED" or login == bot:
            continue
        if f"review:{r['id']}" in task.seen_feedback or not await ctx.permissions.is_writer(
            r.get("user") or {}
        ):
            continue
        found.append(
            await fb.from_review(ctx.client, repo_vars(ctx.full_name), int(pr["number"]), r)
        )
    head = str(pr["head"]["sha"])
    where = repo_vars(ctx.full_name)
    runs = await check_runs(ctx.client, where, head, filter="latest")
    found += await fb.from_check_runs(ctx.client, where, runs, ctx.app, str(pr["base"]["ref"]))
    posted = False
    for item in review.fresh(task, found):
        service.post(ctx, link, inbox.feedback(link.quest_id, task.id, item))
        posted = True
    return posted


def closed_message(
    link: QuestLink, task_id: str, pr: dict[str, Any], by: str
) -> inbox.InboxMessage:
    if pr.get("merged"):  # merged by a person on GitHub: the merge step finds it done
        return inbox.make("approve", link.quest_id, task_id=task_id, text=by, by=by)
    return inbox.make("reject", link.quest_id, task_id=task_id, text=f"closed by {by}", by=by)


async def _answers(service: AppService, ctx: RepoContext, link: QuestLink, quest: Quest) -> None:
    pending = quest.pending_questions()
    if not pending:
        return
    comments = await ctx.client.get_all(
        "/repos/{owner}/{repo}/issues/{number}/comments",
        repo_vars(ctx.full_name, number=link.issue_number),
    )
    asked = min(link.question_comments.get(q.id, 0) for q in pending)
    for comment in comments:
        if int(comment["id"]) <= asked:
            continue
        user = comment.get("user") or {}
        if not await ctx.permissions.is_writer(user):
            continue
        match = match_answer(str(comment.get("body") or ""), [q.id for q in pending])
        if match is not None and match.question_id is not None:
            service.answer(ctx, link, match.question_id, match.text, str(user["login"]))
            pending = [q for q in pending if q.id != match.question_id]
            if not pending:
                return


async def _label_removed(
    service: AppService, ctx: RepoContext, link: QuestLink, quest: Quest
) -> bool:
    issue = await ctx.client.get(
        "/repos/{owner}/{repo}/issues/{number}", repo_vars(ctx.full_name, number=link.issue_number)
    )
    labels = {str(label.get("name")) for label in issue.get("labels") or []}
    if ctx.checkout.config().trigger_label in labels or quest.stop_reason:
        return False
    message = inbox.make("abort", link.quest_id, text="the label was removed", by="reconcile")
    service.post(ctx, link, message)
    return True
