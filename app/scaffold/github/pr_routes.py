"""The App's routes on a task's pull request: approvals, closes, new heads, checks.

An approval counts from a writer (never a bot) and only for the head the PR had then; a
writer's review requesting changes is feedback for a round. A merged PR finishes the
merge; one closed unmerged by a writer rejects the task, by anyone else the task goes on
(its run reopens the PR). Every new head of any PR is DiagramChecked, and a completed
check wakes a quest waiting to merge (a failure that blocks the merge is CI feedback).
"""

from __future__ import annotations

import contextlib
import logging
from typing import TYPE_CHECKING, Any

from scaffold.core.states import Lifecycle
from scaffold.errors import GitHubError, ScaffoldError
from scaffold.github import feedback as fb
from scaffold.github import issue_routes
from scaffold.github.access import same_repository
from scaffold.github.client import repo_vars
from scaffold.github.comments import CHECK_NAME
from scaffold.github.diagram_pr import check_pull_request
from scaffold.github.reconcile import closed_message
from scaffold.github.runner import RepoContext
from scaffold.quest.model import Feedback
from scaffold.runtime import inbox
from scaffold.server.delivery import Delivery

if TYPE_CHECKING:
    from scaffold.github.service import AppService

log = logging.getLogger("scaffold.app")


async def review(service: AppService, d: Delivery) -> None:
    p = d.payload
    review = p.get("review") or {}
    state = str(review.get("state", "")).lower()
    if state not in ("approved", "changes_requested"):
        return
    ctx = await service.context(p, d.installation_id)
    pr = p["pull_request"]
    found = service.pr_task(ctx, pr)
    if found is None:
        return
    reviewer = review.get("user") or {}
    own = reviewer.get("login") == await service.github.bot_login()
    if own or not await ctx.permissions.is_writer(reviewer):
        log.info(
            "review ignored",
            extra={"delivery": d.id, "sender": reviewer.get("login"), "state": state},
        )
        return
    link, task_id = found
    if state == "changes_requested":
        item = await fb.from_review(ctx.client, repo_vars(ctx.full_name), int(pr["number"]), review)
        service.post(ctx, link, inbox.feedback(link.quest_id, task_id, item))
        return
    if review.get("commit_id") != (pr.get("head") or {}).get("sha"):
        log.info(
            "approval ignored: it reviewed an earlier commit than the head",
            extra={"delivery": d.id, "commit": review.get("commit_id")},
        )
        return
    by = str(reviewer["login"])
    service.post(ctx, link, inbox.make("approve", link.quest_id, task_id=task_id, text=by, by=by))


async def pr_closed(service: AppService, d: Delivery) -> None:
    p = d.payload
    ctx = await service.context(p, d.installation_id)
    pr = p["pull_request"]
    found = service.pr_task(ctx, pr)
    if found is None:
        return
    link, task_id = found
    sender = p.get("sender") or {}
    if not pr.get("merged") and not await ctx.permissions.is_writer(sender):
        log.warning(
            "pull request closed by someone without write access: the task goes on",
            extra={"delivery": d.id, "sender": sender.get("login"), "pr": pr.get("number")},
        )
        service.runner.poke(ctx, link.quest_id)  # its run reopens the PR
        return
    quest = service.quest_of(ctx, link.quest_id)
    task = quest.tasks[task_id]
    by = str(sender.get("login", "github"))
    waiting = (
        (Lifecycle.PR_CREATED,) if pr.get("merged") else (Lifecycle.PR_CREATED, Lifecycle.BLOCKED)
    )
    if task.state in waiting:
        service.post(ctx, link, closed_message(link, task_id, pr, by))
    elif pr.get("merged"):
        service.runner.poke(ctx, link.quest_id)  # our own merge: the quest finishes it


async def pr_changed(service: AppService, d: Delivery) -> None:
    """A new head: DiagramCheck it (any PR of the repository), then wake its quest.

    The check fetches the head and the base branch itself: no fetch of the whole
    clone for it (most new heads are scaffold's own pushes)."""
    ctx = await service.context(d.payload, d.installation_id)
    pr = d.payload["pull_request"]
    await _diagram_check(service, ctx, pr, force=False)
    found = service.pr_task(ctx, pr)
    if found is None:
        return
    if d.action == "reopened" and not await ctx.permissions.is_writer(
        d.payload.get("sender") or {}
    ):
        return  # reopening a task's PR counts from a writer only
    service.runner.poke(ctx, found[0].quest_id)


async def check_requested(service: AppService, d: Delivery) -> None:
    """A check suite for a new push, or a person asking to re-run the check."""
    p = d.payload
    run = p.get("check_run") or {}
    if run and run.get("name") != CHECK_NAME:
        return
    suite = p.get("check_suite") or run.get("check_suite") or {}
    refs = run.get("pull_requests") or suite.get("pull_requests") or []
    if not refs:
        # A push that is no pull request's head (scaffold's own state-branch pushes
        # among them): nothing to check, and no clone to bring up to date for it.
        return
    ctx = await service.context(p, d.installation_id)
    if run and not ctx.app.owns(run):
        return  # a check of the same name from another App or workflow
    force = d.action == "rerequested"
    for ref in refs:
        pr = await ctx.client.get(
            "/repos/{owner}/{repo}/pulls/{number}",
            repo_vars(ctx.full_name, number=int(ref["number"])),
        )
        if pr.get("state") == "open":
            await _diagram_check(service, ctx, pr, force=force)


async def _diagram_check(
    service: AppService, ctx: RepoContext, pr: dict[str, Any], *, force: bool
) -> None:
    try:
        await check_pull_request(ctx, pr, force=force, bot=await service.github.bot_login())
    except (ScaffoldError, GitHubError) as exc:
        log.warning(
            "diagram check failed to run",
            extra={"repo": ctx.full_name, "pr": pr.get("number"), "error": str(exc)},
        )


async def check_done(service: AppService, d: Delivery) -> None:
    """A check finished: a task waiting to merge looks again, and a merge-blocking
    failure on the head of a task's pull request goes back to the task."""
    p = d.payload
    ctx = await service.context(p, d.installation_id)
    run = p.get("check_run") or p.get("check_suite") or {}
    for ref in run.get("pull_requests") or []:
        found = service.pr_task(ctx, ref)
        if found is None:
            continue
        link, task_id = found
        if run.get("conclusion") in fb.FAILED:
            for item in await check_failures(ctx, d, int(ref["number"])):
                service.post(ctx, link, inbox.feedback(link.quest_id, task_id, item))
        service.runner.poke(ctx, link.quest_id)


async def workflow_run(service: AppService, d: Delivery) -> None:
    """A slot run finished on GitHub Actions (``executor: actions``)."""
    run = d.payload.get("workflow_run") or {}
    ctx = await service.context(d.payload, d.installation_id)
    ctx.waiters.completed(int(run.get("id") or 0), str(run.get("conclusion") or "failure"))


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
    await issue_routes.pr_comment(service, d, ctx, int(pr["number"]), comment, in_thread=True)
