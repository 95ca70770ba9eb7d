"""The App's service: one context per repository, deliveries routed by ``ROUTES``.

A pull request is a task's only by identity (``trust.py``), write access is asked of
GitHub, never taken from a payload, and deliveries only post inbox messages and poke a
quest (its run is the one writer). A reconciliation pass on a timer re-reads open
quests, so a lost delivery never strands one.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import Counter, defaultdict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scaffold.errors import GitHubError, ScaffoldError
from scaffold.github import issue_routes, pr_routes
from scaffold.github.access import same_repository
from scaffold.github.checkout import Checkout, check_repo_name
from scaffold.github.client import GitHubApp, TokenAccess, post_comment, repo_vars
from scaffold.github.links import QuestLink
from scaffold.github.reconcile import reconcile_quest
from scaffold.github.runner import FINISHED, QuestRunner, RepoContext, restore_repository
from scaffold.quest.model import Quest
from scaffold.runtime import inbox
from scaffold.runtime.session import quest_store
from scaffold.sandbox.settings import find_bwrap, probe_bwrap
from scaffold.sanitize import clean
from scaffold.server.delivery import Delivery, by_a_person
from scaffold.server.metrics import AppGauges

log = logging.getLogger("scaffold.app")

Handler = Callable[["AppService", Delivery], Awaitable[None]]

ROUTES: dict[str, Handler] = {
    "issues.labeled": issue_routes.labeled,
    "issues.unlabeled": issue_routes.unlabeled,
    "issue_comment.created": issue_routes.issue_comment,
    "pull_request_review.submitted": pr_routes.review,
    "pull_request_review_comment.created": pr_routes.review_comment,
    "status.None": pr_routes.status_failed,
    "pull_request.closed": pr_routes.pr_closed,
    "pull_request.opened": pr_routes.pr_changed,
    "pull_request.reopened": pr_routes.pr_changed,
    "pull_request.synchronize": pr_routes.pr_changed,
    "check_suite.requested": pr_routes.check_requested,
    "check_suite.rerequested": pr_routes.check_requested,
    "check_run.rerequested": pr_routes.check_requested,
    "workflow_run.completed": pr_routes.workflow_run,
    "check_run.completed": pr_routes.check_done,
    "check_suite.completed": pr_routes.check_done,
}


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
    def __init__(self, github: GitHubApp | TokenAccess, options: AppOptions) -> None:
        self.github = github
        self.options = options
        self.runner = QuestRunner(
            status_interval_s=options.status_interval_s,
            python=options.python,
            hidden=(options.state_dir, *options.hidden),
            max_agents=options.max_agents,
        )
        self.repos: dict[str, RepoContext] = {}
        self._reconciler: asyncio.Task[None] | None = None
        self.handled: Counter[str] = Counter()
        self._delivery_locks: dict[tuple[str, bool], asyncio.Lock] = {}
        self._repo_locks: dict[str, asyncio.Lock] = {}

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
        states: Counter[str] = Counter()
        active: Counter[str] = Counter()
        agents: dict[str, int] = {}
        busy = 0
        cost = 0.0
        by_backend: defaultdict[str, float] = defaultdict(float)
        for ctx in list(self.repos.values()):
            store = quest_store(ctx.checkout.path)
            for link in ctx.links.all():
                with contextlib.suppress(ScaffoldError, OSError):
                    quest = store.read(link.quest_id)
                    states[quest.phase.value] += 1
                    cost += quest.cost_usd
                    for backend, usd in quest.cost_by_backend.items():
                        by_backend[backend] += usd
                    busy += sum(1 for t in quest.tasks.values() if t.agent_running)
                    if quest.phase not in FINISHED:
                        active[ctx.full_name] += 1
            agents[ctx.full_name] = self.runner.agents.running_in(ctx.full_name)
        modes = Counter(list(self.runner.sandbox_modes.values()))
        bwrap = find_bwrap()
        return AppGauges(
            quests_by_state=states,
            busy_slots=busy,
            cost_usd_total=cost,
            cost_usd_by_backend=by_backend,
            sandbox_modes=modes,
            sandbox_available=int(bwrap is not None and probe_bwrap(bwrap) is None),
            agents_running=self.runner.agents.running,
            max_agents=self.runner.agents.limit,
            active_quests_by_repo=active,
            agents_by_repo=agents,
        )

    async def handle(self, delivery: Delivery) -> None:
        route = ROUTES.get(f"{delivery.event}.{delivery.action}")
        outcome = "ignored"
        repo = str((delivery.payload.get("repository") or {}).get("full_name", ""))
        if route is not None:
            # One repository's deliveries are handled one at a time, in arrival order:
            # a person's among a person's, scaffold's echoes among echoes (a person's
            # never waits for an echo's fetch).
            lane = (repo, by_a_person(delivery))
            async with self._delivery_locks.setdefault(lane, asyncio.Lock()):
                await route(self, delivery)
            outcome = "handled"
        key = f"{delivery.event}.{delivery.action}:{outcome}"
        self.handled[key] += 1
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

    async def context(self, payload: dict[str, Any], installation_id: int | None) -> RepoContext:
        repo = payload.get("repository") or {}
        full_name = check_repo_name(str(repo.get("full_name", "")))
        if installation_id is None:
            raise ScaffoldError(f"{full_name}: delivery without an installation")
        # One context per repository, however many deliveries arrive at once: each has
        # the locks of its clone, so two must never exist side by side.
        async with self._repo_locks.setdefault(full_name, asyncio.Lock()):
            ctx = self.repos.get(full_name)
            if ctx is None or ctx.installation_id != installation_id:
                client = self.github.installation(installation_id)
                info = await client.get("/repos/{owner}/{repo}", repo_vars(full_name))
                default = str(info.get("default_branch") or "main")
                checkout = Checkout(
                    self.options.state_dir, full_name, str(info["clone_url"]), default
                )
                ctx = RepoContext(
                    full_name, installation_id, checkout, client, app=self.github.identity()
                )
                self.repos[full_name] = ctx
            if not ctx.restored:
                # The first delivery of a repository in this process: its quests may be
                # known only to the state branch (a new server, an evicted Actions cache).
                await self.ensure_clone(ctx)
            return ctx

    async def open_repo(self, full_name: str, installation_id: int) -> RepoContext:
        """The repository's context, cloned and up to date (for reconciliation runs)."""
        ctx = await self.context({"repository": {"full_name": full_name}}, installation_id)
        await self.ensure_clone(ctx)
        return ctx

    async def ensure_clone(self, ctx: RepoContext) -> None:
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

    async def react(self, ctx: RepoContext, path: str, content: str, **ids: int) -> None:
        with contextlib.suppress(GitHubError):
            await ctx.client.post(path, repo_vars(ctx.full_name, **ids), data={"content": content})

    async def comment(self, ctx: RepoContext, number: int, body: str) -> None:
        await post_comment(ctx.client, ctx.full_name, number, body)

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

    def task_of_pr(self, ctx: RepoContext, number: int) -> tuple[QuestLink, str] | None:
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

    def pr_task(self, ctx: RepoContext, pr: dict[str, Any]) -> tuple[QuestLink, str] | None:
        """The task ``pr`` belongs to: by number, and only from this very repository."""
        if not same_repository(pr, ctx.full_name):
            return None
        return self.task_of_pr(ctx, int(pr["number"]))

    async def _reconcile_forever(self) -> None:
        while True:
            await asyncio.sleep(self.options.reconcile_interval_s)
            try:
                await self.reconcile()
            except Exception:
                log.exception("reconciliation pass failed")

    async def reconcile(self) -> None:
        """Re-read every open quest's PRs, reviews and issue from GitHub (reconcile.py)."""
        quests = 0
        for ctx in list(self.repos.values()):
            for link in ctx.links.all():
                if not link.active:
                    continue
                quests += 1
                try:
                    await reconcile_quest(self, ctx, link)
                except (GitHubError, ScaffoldError) as exc:
                    log.warning(
                        "reconcile failed", extra={"quest": link.quest_id, "error": str(exc)}
                    )
        log.info("reconciliation pass done", extra={"quests": quests})

    async def adopt_installations(self) -> None:
        """At start: open the repositories of every installation (``context`` clones them
        and rebuilds their quests), so open quests resume."""
        for inst_id in await self.github.installation_ids():
            client = self.github.installation(inst_id)
            repos = await client.get_all("/installation/repositories", key="repositories")
            for repo in repos:
                with contextlib.suppress(GitHubError, ScaffoldError):
                    ctx = await self.context({"repository": repo}, inst_id)
                    for link in ctx.links.all():
                        if link.active:
                            self.runner.poke(ctx, link.quest_id)


__all__ = ["ROUTES", "AppOptions", "AppService"]
