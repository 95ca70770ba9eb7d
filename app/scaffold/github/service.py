"""The App's flows: what each delivery means for a quest.

Routers by feature, each a method taking a ``Delivery``:

- ``issues.labeled`` with the trigger label, by a person with write access: 👀, a new
  quest, its status comment, and a run. ``issues.unlabeled`` (the trigger label) aborts.
- ``issue_comment.created``: ``/scaffold status|abort|retry <task>`` commands and answers
  to open questions, from people with write access only. Bots (scaffold itself among
  them) and read-only users never reach an agent.
- ``pull_request_review.submitted`` approved by a writer who is not a bot, of the head
  the PR had then (the review's ``commit_id``): approval. The merge checks again that a
  writer approved the head as it is when merging, and merges that very commit. A writer's
  review requesting changes is feedback: a round of the review loop (``review_routes.py``
  holds the loop's other routes: `/scaffold fix` in PR comments and review threads,
  failing checks and commit statuses).
- ``pull_request.closed``: merged -> the merge is finished (cleanup); unmerged, by a
  writer -> rejected. Closed by anyone else: the task goes on (its run reopens the PR).
- ``pull_request.synchronize``, ``check_run``/``check_suite`` completed: a quest waiting
  to merge looks again (``reopened`` too, by a writer); a completed check that failed and
  blocks the merge of a task's pull request is feedback for the task.

A pull request is a task's only by identity (trust.py): the number scaffold opened for
the task, with its head in this repository; never by its branch name, which a fork may
copy. Nothing here trusts a payload's claims about permissions: write access is asked of
GitHub (cached briefly). Deliveries only ever post inbox messages and poke a quest; the
quest's own run changes it (one writer). A reconciliation pass re-reads open quests'
pull requests and issues on a timer, so a lost delivery never strands a quest.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from scaffold.core.states import Lifecycle
from scaffold.errors import GitHubError, ScaffoldError
from scaffold.github import feedback as fb
from scaffold.github import review_routes
from scaffold.github.access import GitHubAccess
from scaffold.github.checkout import Checkout, check_repo_name
from scaffold.github.comments import (
    CHECK_NAME,
    NOTICE_MARKER,
    match_answer,
    parse_command,
    render_ambiguous,
)
from scaffold.github.diagram_pr import check_pull_request
from scaffold.github.links import QuestLink
from scaffold.github.reconcile import closed_message, reconcile_all
from scaffold.github.runner import QuestRunner, RepoContext, repo_vars
from scaffold.github.state_sync import restore_repository
from scaffold.github.trust import same_repository
from scaffold.quest.model import AgentRun, PlanningState, Quest, QuestPhase, QuestSource, utcnow
from scaffold.roles import Role
from scaffold.runtime import inbox
from scaffold.runtime.session import quest_store
from scaffold.sandbox.settings import find_bwrap, probe_bwrap
from scaffold.sanitize import clean
from scaffold.server.delivery import Delivery, by_a_person
from scaffold.server.metrics import AppGauges

log = logging.getLogger("scaffold.app")

# event.action -> the AppService method that handles it; anything else is ignored.
ROUTES: dict[str, str] = {
    "issues.labeled": "on_labeled",
    "issues.unlabeled": "on_unlabeled",
    "issue_comment.created": "on_comment",
    "pull_request_review.submitted": "on_review",
    "pull_request_review_comment.created": "on_review_comment",
    "status.None": "on_status",
    "pull_request.closed": "on_pr_closed",
    "pull_request.opened": "on_pr_changed",
    "pull_request.reopened": "on_pr_changed",
    "pull_request.synchronize": "on_pr_changed",
    "check_suite.requested": "on_check_requested",
    "check_suite.rerequested": "on_check_requested",
    "check_run.rerequested": "on_check_requested",
    "workflow_run.completed": "on_workflow_run",
    "check_run.completed": "on_check_done",
    "check_suite.completed": "on_check_done",
}


FINISHED = (QuestPhase.DONE, QuestPhase.STOPPED, QuestPhase.FAILED)


@dataclass(frozen=True)
class AppOptions:
    state_dir: Path
    status_interval_s: float = 10.0
    reconcile_interval_s: float = 300.0
    python: str | None = None
    # Agents at once across every repository (None: two per core).
    max_agents: int | None = None
    # Besides the state dir: what no agent may see (the App's key file).
    hidden: tuple[Path, ...] = ()


class AppService:
    def __init__(
        self,
        github: GitHubAccess,
        options: AppOptions,
        *,
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        self.github = github
        self.options = options
        self.clock = clock
        self.runner = QuestRunner(
            clock=clock,
            status_interval_s=options.status_interval_s,
            python=options.python,
            hidden=(options.state_dir, *options.hidden),
            max_agents=options.max_agents,
        )
        self.repos: dict[str, RepoContext] = {}
        self._reconciler: asyncio.Task[None] | None = None
        self.handled: dict[str, int] = {}
        self._delivery_locks: dict[tuple[str, bool], asyncio.Lock] = {}
        self._repo_locks: dict[str, asyncio.Lock] = {}

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        """Resume the open quests of every installation (in the background, so the
        server listens at once), then reconcile on a timer."""
        self._reconciler = asyncio.get_running_loop().create_task(self._background())

    async def _background(self) -> None:
        try:
            await self.adopt_installations()
        except (GitHubError, ScaffoldError) as exc:
            log.warning("could not list installations at start", extra={"error": str(exc)})
        await self._reconcile_forever()

    async def stop(self) -> None:
        if self._reconciler is not None:
            self._reconciler.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reconciler
        await self.runner.stop()
        await self.github.close()

    async def gauges(self) -> AppGauges:
        """What ``/metrics`` shows of the App (quest files are read off the loop)."""
        return await asyncio.to_thread(self._read_gauges)

    def _read_gauges(self) -> AppGauges:
        states: dict[str, int] = {}
        active: dict[str, int] = {}
        agents: dict[str, int] = {}
        busy = 0
        cost = 0.0
        for ctx in list(self.repos.values()):
            store = quest_store(ctx.checkout.path)
            for link in ctx.links.all():
                with contextlib.suppress(ScaffoldError, OSError):
                    quest = store.read(link.quest_id)
                    states[quest.phase.value] = states.get(quest.phase.value, 0) + 1
                    cost += quest.cost_usd
                    busy += sum(1 for t in quest.tasks.values() if t.agent_running)
                    if quest.phase not in FINISHED:
                        active[ctx.full_name] = active.get(ctx.full_name, 0) + 1
            agents[ctx.full_name] = self.runner.agents.running_in(ctx.full_name)
        modes: dict[str, int] = {}
        for mode in list(self.runner.sandbox_modes.values()):
            modes[mode] = modes.get(mode, 0) + 1
        bwrap = find_bwrap()
        return AppGauges(
            quests_by_state=states,
            busy_slots=busy,
            cost_usd_total=cost,
            sandbox_modes=modes,
            sandbox_available=int(bwrap is not None and probe_bwrap(bwrap) is None),
            agents_running=self.runner.agents.running,
            max_agents=self.runner.agents.limit,
            active_quests_by_repo=active,
            agents_by_repo=agents,
        )

    # ------------------------------------------------------------------ routing

    async def handle(self, delivery: Delivery) -> None:
        name = ROUTES.get(f"{delivery.event}.{delivery.action}")
        route: Callable[[Delivery], Awaitable[None]] | None = getattr(self, name) if name else None
        outcome = "ignored"
        repo = str((delivery.payload.get("repository") or {}).get("full_name", ""))
        if route is not None:
            # One repository's deliveries are handled one at a time, in arrival order:
            # a person's among a person's, scaffold's echoes among echoes (a person's
            # never waits for an echo's fetch).
            lane = (repo, by_a_person(delivery))
            async with self._delivery_locks.setdefault(lane, asyncio.Lock()):
                await route(delivery)
            outcome = "handled"
        key = f"{delivery.event}.{delivery.action}:{outcome}"
        self.handled[key] = self.handled.get(key, 0) + 1
        log.info(
            "delivery processed",
            extra={
                "delivery": delivery.id,
                "event": delivery.event,
                "action": delivery.action,
                "outcome": outcome,
                "repo": repo,
            },
        )

    # ------------------------------------------------------------------ helpers

    async def bot_login(self) -> str:
        return await self.github.bot_login()

    async def _context(self, payload: dict[str, Any], installation_id: int | None) -> RepoContext:
        repo = payload.get("repository") or {}
        full_name = check_repo_name(str(repo.get("full_name", "")))
        if installation_id is None:
            raise ScaffoldError(f"{full_name}: delivery without an installation")
        # One context per repository, however many deliveries arrive at once: each has
        # the locks of its clone, so two must never exist side by side.
        async with self._repo_locks.setdefault(full_name, asyncio.Lock()):
            return await self._context_locked(full_name, installation_id)

    async def _context_locked(self, full_name: str, installation_id: int) -> RepoContext:
        ctx = self.repos.get(full_name)
        if ctx is None or ctx.installation_id != installation_id:
            client = self.github.installation(installation_id)
            owner, _, name = full_name.partition("/")
            info = await client.get("/repos/{owner}/{repo}", {"owner": owner, "repo": name})
            checkout = Checkout(
                self.options.state_dir,
                full_name,
                str(info["clone_url"]),
                str(info.get("default_branch") or "main"),
            )
            ctx = RepoContext(
                full_name, installation_id, checkout, client, app=self.github.identity()
            )
            self.repos[full_name] = ctx
        if not ctx.restored:
            # The first delivery of a repository in this process: its quests may be
            # known only to the state branch (a new server, an evicted Actions cache).
            await self._ensure_clone(ctx)
        return ctx

    async def open_repo(self, full_name: str, installation_id: int) -> RepoContext:
        """The repository's context, cloned and up to date (for reconciliation runs)."""
        ctx = await self._context({"repository": {"full_name": full_name}}, installation_id)
        await self._ensure_clone(ctx)
        return ctx

    async def _ensure_clone(self, ctx: RepoContext) -> None:
        """Clone or fetch; then rebuild from the state branch the open quests this server
        does not know (a new server, a wiped state folder, an evicted Actions cache)."""
        token = await ctx.client.token()

        def work() -> list[str]:
            with ctx.default_branch_lock:
                ctx.checkout.ensure(token)
                try:
                    branch = ctx.checkout.config().state.branch
                    ctx.state_tip, rebuilt = restore_repository(
                        ctx.checkout, ctx.links, branch, ctx.state_tip
                    )
                except ScaffoldError as exc:
                    log.warning(
                        "quests not rebuilt from the state branch",
                        extra={"repo": ctx.full_name, "error": str(exc)},
                    )
                    return []
                return rebuilt

        rebuilt = await asyncio.to_thread(work)
        ctx.restored = True
        for quest_id in rebuilt:
            link = ctx.links.get(quest_id)
            if link is not None and link.active:
                self.runner.poke(ctx, quest_id)

    async def is_writer(self, ctx: RepoContext, sender: dict[str, Any]) -> bool:
        """A person (not a bot) with write access to the repository, asked of GitHub."""
        return await ctx.permissions.is_writer(sender)

    async def _react(self, ctx: RepoContext, path: str, content: str, **ids: int) -> None:
        owner, _, name = ctx.full_name.partition("/")
        with contextlib.suppress(GitHubError):
            await ctx.client.post(
                path, {"owner": owner, "repo": name, **ids}, data={"content": content}
            )

    async def _comment(self, ctx: RepoContext, number: int, body: str) -> None:
        owner, _, name = ctx.full_name.partition("/")
        await ctx.client.post(
            "/repos/{owner}/{repo}/issues/{number}/comments",
            {"owner": owner, "repo": name, "number": number},
            data={"body": body},
        )

    def post(self, ctx: RepoContext, link: QuestLink, message: inbox.InboxMessage) -> None:
        inbox.post(ctx.checkout.path / ".scaffold", message)
        self.runner.poke(ctx, link.quest_id)

    def answer(
        self, ctx: RepoContext, link: QuestLink, question_id: str, text: str, by: str
    ) -> None:
        message = inbox.make(
            "answer", link.quest_id, question_id=question_id, text=clean(text), by=by
        )
        self.post(ctx, link, message)

    def quest_of(self, ctx: RepoContext, quest_id: str) -> Quest:
        return quest_store(ctx.checkout.path).read(quest_id)

    def _task_of_pr(self, ctx: RepoContext, number: int) -> tuple[QuestLink, str] | None:
        """The task whose pull request scaffold opened as ``number`` (the quest file's
        record, or the link's, which is written the moment the PR exists)."""
        for link in ctx.links.all():
            for task_id, recorded in link.pull_requests.items():
                if recorded == number:
                    return link, task_id
            with contextlib.suppress(ScaffoldError, OSError):
                quest = self.quest_of(ctx, link.quest_id)
                for task in quest.tasks.values():
                    if task.pr is not None and task.pr.number == number:
                        return link, task.id
        return None

    # ------------------------------------------------------------------ issues

    async def on_labeled(self, d: Delivery) -> None:
        p = d.payload
        ctx = await self._context(p, d.installation_id)
        await self._ensure_clone(ctx)
        config = ctx.checkout.config()
        label = str((p.get("label") or {}).get("name", ""))
        if label != config.trigger_label:
            return
        issue = p["issue"]
        number = int(issue["number"])
        sender = p.get("sender") or {}
        if not await self.is_writer(ctx, sender):
            log.warning(
                "label ignored: the sender lacks write access or is a bot",
                extra={"delivery": d.id, "sender": sender.get("login"), "issue": number},
            )
            return
        existing = ctx.links.for_issue(ctx.full_name, number)
        if existing is not None:
            quest = self.quest_of(ctx, existing.quest_id)
            if quest.phase not in FINISHED:
                # The label put back on a quest someone stopped: it goes on.
                self.runner.poke(ctx, existing.quest_id, resume=True)
                return
            ctx.links.update(existing.quest_id, active=False)
        await self._react(
            ctx, "/repos/{owner}/{repo}/issues/{number}/reactions", "eyes", number=number
        )
        quest_id = self._new_quest(ctx, issue, str(sender.get("login")))
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
        self.runner.poke(ctx, quest_id)

    def _new_quest(self, ctx: RepoContext, issue: dict[str, Any], by: str) -> str:
        from scaffold import backlog as bl

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

    async def on_unlabeled(self, d: Delivery) -> None:
        p = d.payload
        ctx = await self._context(p, d.installation_id)
        link = ctx.links.for_issue(ctx.full_name, int(p["issue"]["number"]))
        if link is None:
            return
        config = ctx.checkout.config()
        if str((p.get("label") or {}).get("name", "")) != config.trigger_label:
            return
        if not await self.is_writer(ctx, p.get("sender") or {}):
            return
        by = str(p["sender"]["login"])
        self.post(
            ctx, link, inbox.make("abort", link.quest_id, text=f"label removed by {by}", by=by)
        )

    # ------------------------------------------------------------------ comments

    async def on_comment(self, d: Delivery) -> None:
        p = d.payload
        sender = p.get("sender") or {}
        comment = p.get("comment") or {}
        if sender.get("type") == "Bot" or str(sender.get("login", "")).endswith("[bot]"):
            return  # scaffold's own comments, and other bots
        body = str(comment.get("body") or "")
        ctx = await self._context(p, d.installation_id)
        number = int(p["issue"]["number"])
        if p["issue"].get("pull_request") is not None:
            await review_routes.pr_comment(self, d, ctx, number, comment, in_thread=False)
            return
        link = ctx.links.for_issue(ctx.full_name, number)
        command = parse_command(body)
        if link is None or (command is None and NOTICE_MARKER in body):
            return
        if not await self.is_writer(ctx, sender):
            log.info(
                "comment ignored: the sender lacks write access",
                extra={"delivery": d.id, "sender": sender.get("login")},
            )
            return
        by = str(sender["login"])
        comment_id = int(comment["id"])
        if command is not None:
            await self._command(ctx, link, command, by, number, comment_id)
            return
        quest = self.quest_of(ctx, link.quest_id)
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
            await self._comment(ctx, number, text)
            return
        await self._react(
            ctx,
            "/repos/{owner}/{repo}/issues/comments/{comment_id}/reactions",
            "+1",
            comment_id=comment_id,
        )
        self.answer(ctx, link, match.question_id, match.text, by)

    async def _command(
        self,
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
            await self._react(
                ctx,
                "/repos/{owner}/{repo}/issues/comments/{comment_id}/reactions",
                "eyes",
                comment_id=comment_id,
            )
        if command.problem or command.verb == "fix":
            problem = command.problem or "`/scaffold fix` works on a task's pull request"
            await self._comment(
                ctx,
                number,
                f"{NOTICE_MARKER}\n{problem}. Commands: "
                "`/scaffold status`, `/scaffold abort`, `/scaffold retry <task>`, and on a "
                "task's pull request `/scaffold fix <what to change>`.",
            )
            return
        if command.verb == "abort":
            self.post(ctx, link, inbox.make("abort", link.quest_id, text=f"aborted by {by}", by=by))
        elif command.verb == "retry":
            quest = self.quest_of(ctx, link.quest_id)
            if command.task_id not in quest.tasks:
                await self._comment(
                    ctx, number, f"{NOTICE_MARKER}\nThis quest has no task `{command.task_id}`."
                )
                return
            self.post(ctx, link, inbox.make("retry", link.quest_id, task_id=command.task_id, by=by))
        else:  # status: rewrite the status comment now
            self.runner.poke(ctx, link.quest_id)

    async def on_review_comment(self, d: Delivery) -> None:
        """A comment in a review thread: a `/scaffold ...` command there counts."""
        p = d.payload
        ctx = await self._context(p, d.installation_id)
        pr = p.get("pull_request") or {}
        if not same_repository(pr, ctx.full_name):
            return
        comment = p.get("comment") or {}
        await review_routes.pr_comment(self, d, ctx, int(pr["number"]), comment, in_thread=True)

    # ------------------------------------------------------------------ pull requests

    def _pr_task(self, ctx: RepoContext, pr: dict[str, Any]) -> tuple[QuestLink, str] | None:
        """The task ``pr`` belongs to: by number, and only from this very repository."""
        if not same_repository(pr, ctx.full_name):
            return None
        return self._task_of_pr(ctx, int(pr["number"]))

    async def on_review(self, d: Delivery) -> None:
        p = d.payload
        review = p.get("review") or {}
        state = str(review.get("state", "")).lower()
        if state not in ("approved", "changes_requested"):
            return
        ctx = await self._context(p, d.installation_id)
        pr = p["pull_request"]
        found = self._pr_task(ctx, pr)
        if found is None:
            return
        reviewer = review.get("user") or {}
        if reviewer.get("login") == await self.bot_login() or not await self.is_writer(
            ctx, reviewer
        ):
            log.info(
                "review ignored",
                extra={"delivery": d.id, "sender": reviewer.get("login"), "state": state},
            )
            return
        if state == "changes_requested":
            link, task_id = found
            item = await fb.from_review(ctx.client, repo_vars(ctx), int(pr["number"]), review)
            self.post(ctx, link, inbox.feedback(link.quest_id, task_id, item))
            return
        if review.get("commit_id") != (pr.get("head") or {}).get("sha"):
            log.info(
                "approval ignored: it reviewed an earlier commit than the head",
                extra={"delivery": d.id, "commit": review.get("commit_id")},
            )
            return
        link, task_id = found
        by = str(reviewer["login"])
        self.post(ctx, link, inbox.make("approve", link.quest_id, task_id=task_id, text=by, by=by))

    async def on_pr_closed(self, d: Delivery) -> None:
        p = d.payload
        ctx = await self._context(p, d.installation_id)
        pr = p["pull_request"]
        found = self._pr_task(ctx, pr)
        if found is None:
            return
        link, task_id = found
        sender = p.get("sender") or {}
        if not pr.get("merged") and not await self.is_writer(ctx, sender):
            log.warning(
                "pull request closed by someone without write access: the task goes on",
                extra={"delivery": d.id, "sender": sender.get("login"), "pr": pr.get("number")},
            )
            self.runner.poke(ctx, link.quest_id)  # its run reopens the PR
            return
        quest = self.quest_of(ctx, link.quest_id)
        task = quest.tasks[task_id]
        by = str(sender.get("login", "github"))
        waiting = (
            (Lifecycle.PR_CREATED,)
            if pr.get("merged")
            else (Lifecycle.PR_CREATED, Lifecycle.BLOCKED)
        )
        if task.state in waiting:
            self.post(ctx, link, closed_message(link, task_id, pr, by))
        elif pr.get("merged"):
            self.runner.poke(ctx, link.quest_id)  # our own merge: the quest finishes it

    async def on_pr_changed(self, d: Delivery) -> None:
        """A new head: DiagramCheck it (any PR of the repository), then wake its quest.

        The check fetches the head and the base branch itself: no fetch of the whole
        clone for it (most new heads are scaffold's own pushes)."""
        ctx = await self._context(d.payload, d.installation_id)
        pr = d.payload["pull_request"]
        await self._diagram_check(ctx, pr, force=False)
        found = self._pr_task(ctx, pr)
        if found is None:
            return
        if d.action == "reopened" and not await self.is_writer(ctx, d.payload.get("sender") or {}):
            return  # reopening a task's PR counts from a writer only
        self.runner.poke(ctx, found[0].quest_id)

    async def on_check_requested(self, d: Delivery) -> None:
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
        ctx = await self._context(p, d.installation_id)
        if run and not ctx.app.owns(run):
            return  # a check of the same name from another App or workflow
        force = d.action == "rerequested"
        owner, _, name = ctx.full_name.partition("/")
        for ref in refs:
            pr = await ctx.client.get(
                "/repos/{owner}/{repo}/pulls/{number}",
                {"owner": owner, "repo": name, "number": int(ref["number"])},
            )
            if pr.get("state") == "open":
                await self._diagram_check(ctx, pr, force=force)

    async def _diagram_check(self, ctx: RepoContext, pr: dict[str, Any], *, force: bool) -> None:
        try:
            await check_pull_request(ctx, pr, force=force, bot=await self.bot_login())
        except (ScaffoldError, GitHubError) as exc:
            log.warning(
                "diagram check failed to run",
                extra={"repo": ctx.full_name, "pr": pr.get("number"), "error": str(exc)},
            )

    async def on_check_done(self, d: Delivery) -> None:
        """A check finished: a task waiting to merge looks again, and a merge-blocking
        failure on the head of a task's pull request goes back to the task."""
        p = d.payload
        ctx = await self._context(p, d.installation_id)
        run = p.get("check_run") or p.get("check_suite") or {}
        for ref in run.get("pull_requests") or []:
            found = self._pr_task(ctx, ref)
            if found is None:
                continue
            link, task_id = found
            if run.get("conclusion") in fb.FAILED:
                for item in await review_routes.check_failures(ctx, d, int(ref["number"])):
                    self.post(ctx, link, inbox.feedback(link.quest_id, task_id, item))
            self.runner.poke(ctx, link.quest_id)

    async def on_status(self, d: Delivery) -> None:
        """A commit status: one that fails a task's PR head and blocks the merge is CI feedback."""
        await review_routes.status_failed(self, d)

    async def on_workflow_run(self, d: Delivery) -> None:
        """A slot run finished on GitHub Actions (``executor: actions``)."""
        run = d.payload.get("workflow_run") or {}
        ctx = await self._context(d.payload, d.installation_id)
        ctx.waiters.completed(int(run.get("id") or 0), str(run.get("conclusion") or "failure"))

    # ------------------------------------------------------------------ reconciliation

    async def _reconcile_forever(self) -> None:
        while True:
            await asyncio.sleep(self.options.reconcile_interval_s)
            try:
                await self.reconcile()
            except Exception:
                log.exception("reconciliation pass failed")

    async def reconcile(self) -> None:
        """Re-read every open quest's PRs, reviews and issue from GitHub (reconcile.py)."""
        await reconcile_all(self)

    async def adopt_installations(self) -> None:
        """At start: learn the repositories of every installation, so open quests resume."""
        for inst_id in await self.github.installation_ids():
            client = self.github.installation(inst_id)
            repos = await client.get_all("/installation/repositories", key="repositories")
            for repo in repos:
                with contextlib.suppress(GitHubError, ScaffoldError):
                    ctx = await self._context({"repository": repo}, inst_id)
                    if not (ctx.checkout.path / ".git").exists():
                        # A server without a clone: the quests are on the state branch.
                        token = await ctx.client.token()
                        if not await asyncio.to_thread(ctx.checkout.has_state_branch, token):
                            continue
                    await self._ensure_clone(ctx)
                    for link in ctx.links.all():
                        if link.active:
                            self.runner.poke(ctx, link.quest_id)


__all__ = ["ROUTES", "AppOptions", "AppService"]
