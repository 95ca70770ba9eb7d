"""Running quests for the App: a run goes until the quest waits for a person or is done,
like ``scaffold run``. A delivery pokes the quest: the poke reaches the run in progress
(through its inbox) or starts a new one. Runs of one quest are serialised; quests of one
repository run side by side, sharing its clone, its slots and the server's agent cap.
Runs publish the quests to the state branch with the installation token, and a server
that has never seen a repository's quests rebuilds them from it.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from scaffold.agent.choice import unpriced
from scaffold.config import CONFIG_PATH
from scaffold.errors import SandboxError, ScaffoldError
from scaffold.git.locks import repo_lock
from scaffold.git.workspace import Workspace
from scaffold.github.access import Permissions
from scaffold.github.actions_executor import ActionsExecutor, WorkflowWaiters
from scaffold.github.checkout import Checkout, token_auth
from scaffold.github.client import AppIdentity, GitHubClient, post_comment
from scaffold.github.forge import GitHubForge
from scaffold.github.links import LinkStore, QuestLink
from scaffold.quest.model import QuestPhase, utcnow
from scaffold.runtime import inbox
from scaffold.runtime.agent_limit import AgentLimit, RepoAgents, default_max_agents
from scaffold.runtime.orchestrator import Orchestrator
from scaffold.runtime.repo_ops import RepoOps
from scaffold.runtime.session import quest_store
from scaffold.runtime.slot_pool import SlotPool
from scaffold.runtime.view import Reporter
from scaffold.sandbox.settings import resolve_sandbox
from scaffold.state.branch import GitRemote, StateBranch
from scaffold.state.publisher import StatePublisher
from scaffold.state.rebuild import restore_quests

log = logging.getLogger("scaffold.app")

FINISHED = (QuestPhase.DONE, QuestPhase.STOPPED, QuestPhase.FAILED)


def app_state_branch(checkout: Checkout, branch: str, token: Callable[[], str]) -> StateBranch:
    remote = GitRemote(
        checkout.path,
        checkout.clone_url,
        lambda: token_auth(checkout.clone_url, token()),
        lock=checkout.remote_lock,
    )
    return StateBranch(checkout.path, branch, remote=remote)


def restore_repository(
    checkout: Checkout, links: LinkStore, branch_name: str, last_tip: str | None
) -> tuple[str | None, list[str]]:
    """Rebuild the open quests (and their links) this clone lacks from the fetched state
    branch: (the tip read, the ids rebuilt). Reads nothing when the tip is ``last_tip``."""
    # Read as the App publishes it: the remote's branch as last fetched (nothing is pushed).
    branch = app_state_branch(checkout, branch_name, str)
    tip = branch.tip()
    if tip is None or tip == last_tip:
        return last_tip, []
    docs = branch.read(open_only=True)
    for problem in branch.problems:
        log.warning(
            "unreadable quest file on the state branch",
            extra={"path": problem.path, "error": problem.reason},
        )
    done = restore_quests(
        checkout.path, quest_store(checkout.path), docs, Workspace(checkout.path).worktree_path
    )
    rebuilt = [qid for qid, what in done.items() if what != "kept"]
    for qid in done:
        raw = docs[qid].link
        if raw is None or links.get(qid) is not None:
            continue
        try:
            link = QuestLink.model_validate(raw)
            if link.repo != checkout.full_name or link.quest_id != qid:
                # Anyone who can push the branch wrote this file: it ties quests of this
                # repository to this repository only.
                raise ValueError(f"it names {link.repo} {link.quest_id}")
            links.put(link)
        except (ValueError, ScaffoldError) as exc:
            log.warning(
                "quest link on the state branch unreadable",
                extra={"quest": qid, "error": str(exc)},
            )
    if rebuilt:
        log.info("quests rebuilt from the state branch", extra={"quests": rebuilt})
    return tip, rebuilt


class _LogStream(io.TextIOBase):
    """The orchestrator's report lines, as log records of the quest."""

    def __init__(self, repo: str, quest_id: str) -> None:
        self.where = {"repo": repo, "quest": quest_id}

    def write(self, text: str) -> int:
        for line in text.splitlines():
            if line.strip():
                log.info(line.strip(), extra=self.where)
        return len(text)


@dataclass
class RepoContext:
    """One installed repository the App works on."""

    full_name: str
    installation_id: int
    checkout: Checkout
    client: GitHubClient
    app: AppIdentity = field(default_factory=AppIdentity)
    slots: SlotPool = field(default_factory=lambda: SlotPool(3))
    waiters: WorkflowWaiters = field(default_factory=WorkflowWaiters)
    # The default branch's lock, the same one every orchestrator of this checkout takes.
    default_branch_lock: threading.Lock = field(init=False)
    permissions: Permissions = field(init=False)
    links: LinkStore = field(init=False)
    # The state branch's tip this server last rebuilt quests from, and the token its
    # pushes use (refreshed before each one: runs outlive installation tokens).
    state_tip: str | None = None
    git_token: str = ""
    restored: bool = False

    def __post_init__(self) -> None:
        self.permissions = Permissions(self.client, self.full_name)
        self.default_branch_lock = repo_lock(self.checkout.path, "default-branch")
        self.links = LinkStore(self.checkout.path / ".scaffold" / "github")


class QuestRunner:
    def __init__(
        self,
        *,
        status_interval_s: float = 10.0,
        python: str | None = None,
        hidden: tuple[Path, ...] = (),
        max_agents: int | None = None,
    ) -> None:
        self.agents = AgentLimit(max_agents or default_max_agents())
        self.status_interval_s = status_interval_s
        self.python = python
        # What agents must never see besides each clone's own state (state dir, key file).
        self.hidden = hidden
        # The sandbox in force per repository, or "refused".
        self.sandbox_modes: dict[str, str] = {}
        self._refusals_said: set[tuple[str, str]] = set()
        self._pending: set[tuple[str, str]] = set()
        self._resume: set[tuple[str, str]] = set()
        self._tasks: dict[tuple[str, str], asyncio.Task[None]] = {}
        self.running: dict[tuple[str, str], Orchestrator] = {}
        self.runs_finished = 0

    def poke(self, ctx: RepoContext, quest_id: str, *, resume: bool = False) -> None:
        """Run the quest (again). A quest a person stopped stays stopped unless this is
        ``resume`` (the label put back) or a ``retry`` waits in its inbox."""
        key = (ctx.full_name, quest_id)
        self._pending.add(key)
        running = self.running.get(key)
        if running is not None:
            running.merges_look_again()  # what changed may be what a merge waits for
        if resume:
            self._resume.add(key)
        task = self._tasks.get(key)
        if task is None or task.done():
            self._tasks[key] = asyncio.get_running_loop().create_task(self._drive(ctx, quest_id))

    async def _drive(self, ctx: RepoContext, quest_id: str) -> None:
        key = (ctx.full_name, quest_id)
        while key in self._pending:
            self._pending.discard(key)
            try:
                await self._run_once(ctx, quest_id)
            except ScaffoldError as exc:
                log.error(
                    "quest run failed",
                    extra={"repo": ctx.full_name, "quest": quest_id, "error": str(exc)},
                )
            except Exception:
                log.exception("quest run crashed", extra={"repo": ctx.full_name, "quest": quest_id})
            self.runs_finished += 1

    def _nothing_to_run(self, ctx: RepoContext, quest_id: str) -> str | None:
        """Why a poke of the quest starts no run: stopped by a person (unless resumed or
        a retry waits), or finished with no message waiting for it (the echoes of its
        last merges: a run would fetch and publish for nothing)."""
        key = (ctx.full_name, quest_id)
        if key in self._resume:
            self._resume.discard(key)
            return None
        quest = quest_store(ctx.checkout.path).read(quest_id)
        finished = quest.phase in (QuestPhase.DONE, QuestPhase.FAILED)
        if quest.stop_limit != "abort" and not finished:
            return None
        waiting = [
            m
            for _, m, _ in inbox.pending(ctx.checkout.path / ".scaffold")
            if m is not None and m.quest_id == quest_id
        ]
        if finished:
            return None if waiting else "quest finished; not run"
        if any(m.kind == "retry" for m in waiting):
            return None
        return "quest stopped by a person; not run"

    async def _run_once(self, ctx: RepoContext, quest_id: str) -> None:
        why = await asyncio.to_thread(self._nothing_to_run, ctx, quest_id)
        if why is not None:
            log.info(why, extra={"repo": ctx.full_name, "quest": quest_id})
            return
        token = await ctx.client.token()

        def refresh() -> None:
            with ctx.default_branch_lock:
                ctx.checkout.ensure(token)

        await asyncio.to_thread(refresh)
        config = ctx.checkout.config()
        ctx.slots.slots = config.slots
        try:
            # The App starts no agent without a sandbox unless the repository's
            # config says `sandbox.mode: off` in writing.
            sandbox = resolve_sandbox(config.sandbox, strict=True, hidden=self.hidden)
        except SandboxError as exc:
            self.sandbox_modes[ctx.full_name] = "refused"
            await self._refuse(ctx, quest_id, exc.reason)
            return
        self.sandbox_modes[ctx.full_name] = sandbox.mode
        if model := next(iter(unpriced(config.agent)), None):
            # safety.max_cost_usd is a promise: tokens nobody can price are not spent.
            why = (
                f"{model.role.value} would run {model.backend.name} with model "
                f"{model.model!r}, which has no price: set agent.prices.{model.model} "
                f"in {CONFIG_PATH}"
            )
            await self._refuse(ctx, quest_id, why)
            return
        store = quest_store(ctx.checkout.path)
        writer = store.open_writer(quest_id)
        try:
            ctx.git_token = token

            def link() -> Mapping[str, Any] | None:
                found = ctx.links.get(quest_id)
                return found.model_dump(mode="json") if found is not None else None

            # Reading the branch and the journal is blocking work: not on the loop.
            publisher = await asyncio.to_thread(
                StatePublisher,
                app_state_branch(ctx.checkout, config.state.branch, lambda: ctx.git_token),
                store,
                writer,
                interval_s=config.state.interval_s,
                link=link,
            )

            async def fresh_token() -> None:
                ctx.git_token = await ctx.client.token()

            def make_forge(ops: RepoOps) -> GitHubForge:
                return GitHubForge(
                    ctx, ops, config, clock=utcnow, status_interval_s=self.status_interval_s
                )

            orch = Orchestrator(
                ctx.checkout.path,
                config,
                writer,
                Reporter(_LogStream(ctx.full_name, quest_id), color=False),  # type: ignore[arg-type]
                python=self.python,
                clock=utcnow,
                forge=make_forge,
                sandbox=sandbox,
                remote=(
                    ActionsExecutor(ctx.client, ctx.checkout, config.actions, ctx.waiters)
                    if config.executor == "actions"
                    else None
                ),
                publisher=publisher,
                before_publish=fresh_token,
                slot_pool=ctx.slots,
                agent_limit=RepoAgents(self.agents, ctx.full_name),
            )
            self.running[(ctx.full_name, quest_id)] = orch
            try:
                report = await orch.run()
            finally:
                self.running.pop((ctx.full_name, quest_id), None)
            quest = writer.quest
            if report.exit_code == 0 and quest.phase is QuestPhase.EXECUTING and quest.tasks:
                writer.commit(quest.model_copy(update={"phase": QuestPhase.DONE}))
                await orch.forge.flush(writer.quest)
            await orch.publish_state()
            log.info(
                "quest run ended",
                extra={
                    "repo": ctx.full_name,
                    "quest": quest_id,
                    "exit": report.exit_code,
                    "reason": report.reason,
                },
            )
        finally:
            writer.close()

    async def _refuse(self, ctx: RepoContext, quest_id: str, reason: str) -> None:
        """Log why no agent starts; once per quest, tell the issue too."""
        log.error("no agent started: %s", reason, extra={"quest": quest_id, "repo": ctx.full_name})
        key = (ctx.full_name, quest_id)
        link = ctx.links.get(quest_id)
        if key in self._refusals_said or link is None:
            return
        self._refusals_said.add(key)
        body = f"scaffold cannot start agents on this server: {reason}."
        with contextlib.suppress(ScaffoldError):
            await post_comment(ctx.client, ctx.full_name, link.issue_number, body)

    async def stop(self) -> None:
        """Stop every run (their agents are killed; the quests resume on the next start)."""
        for task in self._tasks.values():
            task.cancel()
        await asyncio.gather(*self._tasks.values(), return_exceptions=True)

    async def wait_idle(self) -> None:
        while any(not t.done() for t in self._tasks.values()):
            await asyncio.gather(
                *[t for t in self._tasks.values() if not t.done()], return_exceptions=True
            )
