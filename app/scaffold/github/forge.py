"""The GitHub App's forge: what the orchestrator decides, done on GitHub
(``runtime/forge.py`` is the seam). Opening marks the task Done in Backlog.md on its
branch (merging the PR completes it), pushes the branch, opens the PR (or finds it
again) and posts Lawbringer's review and DiagramCheck's check run. A merge happens only
when GitHub says it can: conflicts go back to an agent, a branch behind its base is
updated, required checks must be green (``scaffold/diagram-check`` only from scaffold's
own App), and a writer must have approved the head as it is now (an approval holds for
the commit it reviewed); the merge names that head, so GitHub refuses if it moved.
Questions, blocked tasks and the status comment go to the quest's issue.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from scaffold import backlog as bl
from scaffold.config import ScaffoldConfig
from scaffold.core import review
from scaffold.core.events import Event
from scaffold.core.states import EventName
from scaffold.errors import GitHubError, ScaffoldError
from scaffold.github import feedback as fb
from scaffold.github.access import same_repository
from scaffold.github.client import (
    check_runs,
    post_comment,
    repo_vars,
)
from scaffold.github.comments import (
    CHECK_NAME,
    render_pr_body,
    render_question,
)
from scaffold.github.status_comment import StatusComment
from scaffold.quest.model import Feedback, PullRequest, Quest, Question, TaskRecord
from scaffold.runtime.forge import Opened
from scaffold.runtime.repo_ops import RepoOps

if TYPE_CHECKING:
    from scaffold.github.runner import RepoContext

log = logging.getLogger("scaffold.github")

REVIEW_MARKER = "<!-- scaffold:review {sha} -->"
APPROVE_AGAIN_MARKER = "<!-- scaffold:approve-again {sha} -->"


class GitHubForge:
    def __init__(
        self,
        ctx: RepoContext,
        ops: RepoOps,
        config: ScaffoldConfig,
        *,
        clock: Callable[[], datetime],
        status_interval_s: float = 10.0,
    ) -> None:
        self.gh = ctx.client
        self.permissions = ctx.permissions
        self.app = ctx.app
        self.checkout = ctx.checkout
        self.workspace = ops.workspace
        self.links = ctx.links
        self.cfg = config
        self.lock = ops.default_branch_lock
        self.clock = clock
        self.repo_vars = repo_vars(ctx.full_name)
        self.status = StatusComment(
            ctx.client, ctx.links, config, ctx.full_name, clock=clock, interval_s=status_interval_s
        )

    def _vars(self, **more: str | int) -> dict[str, str | int]:
        return {**self.repo_vars, **more}

    async def _update_checkout(self) -> None:
        token = await self.gh.token()

        def work() -> None:
            with self.lock:
                self.checkout.update(token)

        await asyncio.to_thread(work)

    async def comment(self, issue_number: int, body: str) -> int:
        return await post_comment(self.gh, self.checkout.full_name, issue_number, body)

    async def prepare_allocation(self, quest: Quest, task: TaskRecord) -> None:
        await self._update_checkout()

    def _mark_done_on_branch(self, task: TaskRecord) -> None:
        worktree = Path(task.worktree or "")
        bt = bl.load_backlog(worktree).get(task.id) if worktree.is_dir() else None
        if bt is None:
            return
        if bt.status != "Done":
            bl.update_task(bt.path, status="Done", summary=bl.given(task.last_summary))
        self.workspace.commit_all(task.id, f"{task.id}: Backlog.md Done (merged with this PR)")

    def _take_in_remote(self, task: TaskRecord, token: str) -> tuple[str | None, str | None]:
        """Fetch the task branch's remote tip and merge it in: (the tip, None) or, when it
        conflicts, (the tip, the paths in conflict)."""
        branch = task.branch or ""
        remote = self.checkout.fetch_branch(branch, token)
        if remote is None:
            return None, None
        taken = self.workspace.take_in(task.id, remote, f"Merge the commits pushed to {branch}")
        if taken.merged:
            return remote, None
        return remote, ", ".join(taken.conflict_files or taken.blocked_paths)

    async def sync_branch(self, quest: Quest, task: TaskRecord) -> None:
        """Take in what people pushed to the task's branch since scaffold's last push."""
        token = await self.gh.token()

        def work() -> None:
            _, conflict = self._take_in_remote(task, token)
            if conflict is not None:
                # Left for the push after the round, which asks for the merge (never
                # overwriting the commits).
                log.warning(
                    "commits pushed to the branch do not merge cleanly",
                    extra={"task": task.id, "paths": conflict},
                )

        try:
            await asyncio.to_thread(work)
        except (GitHubError, ScaffoldError) as exc:
            # The round goes on from scaffold's own tip; the push after it takes them in.
            log.warning(
                "could not take in the branch before the round",
                extra={"task": task.id, "error": str(exc)},
            )

    def _publish(self, task: TaskRecord, token: str) -> tuple[str, bool, Feedback | None]:
        """Push the task's branch over the remote tip, after taking that tip in: a person's
        commits are built on, never overwritten. Returns the head, whether it holds commits
        scaffold's checks did not see, and, for a tip that conflicts with scaffold's work,
        feedback: a round that merges it."""
        branch = task.branch or ""
        built = self.checkout.head_of(branch)
        for _ in range(3):
            remote, paths = self._take_in_remote(task, token)
            if paths is not None:
                body = (
                    f"Commits pushed to {branch} (its tip is {remote}) conflict with "
                    f"this task's work in: {paths}. Merge that commit into the "
                    f"branch (`git merge {remote}`), resolve the conflicts keeping "
                    "what both sides meant, and finish the merge."
                )
                fix = Feedback(
                    key=f"merge:{remote}",
                    kind="fix",
                    by=review.SCAFFOLD,
                    at=self.clock(),
                    body=body,
                )
                return self.checkout.head_of(branch), False, fix
            if self.checkout.push_branch(branch, token, lease=remote):
                head = self.checkout.head_of(branch)
                return head, head != built, None
        raise ScaffoldError(f"{branch} kept moving while scaffold pushed it; trying again later")

    def _pr_number(self, quest: Quest, task: TaskRecord) -> int | None:
        """The task's PR: the quest file's record, or the link's (written as it opened)."""
        if task.pr is not None and task.pr.number:
            return task.pr.number
        link = self.links.get(quest.id)
        return link.pull_requests.get(task.id) if link is not None else None

    async def _merged_already(self, quest: Quest, task: TaskRecord) -> Opened | None:
        """The task's pull request, merged on GitHub meanwhile (by a person, or scaffold's
        own merge whose end this run has not seen): nothing to push or open."""
        number = self._pr_number(quest, task)
        if number is None:
            return None
        pr = await self.gh.get("/repos/{owner}/{repo}/pulls/{number}", self._vars(number=number))
        if not pr.get("merged") or not same_repository(pr, self.checkout.full_name):
            return None
        by = str((pr.get("merged_by") or {}).get("login") or "github")
        record = task.pr or PullRequest(
            branch=task.branch or "", base=self.checkout.default_branch, number=number
        )
        event = Event(EventName.PR_APPROVED, at=self.clock(), detail=by)
        return Opened(record, None, event, merged=True)

    async def open_pull_request(self, quest: Quest, task: TaskRecord) -> Opened:
        branch = task.branch or ""
        merged = await self._merged_already(quest, task)
        if merged is not None:
            return merged
        token = await self.gh.token()

        def push() -> tuple[str, bool, Feedback | None]:
            self._mark_done_on_branch(task)
            return self._publish(task, token)

        head_sha, people_commits, conflict = await asyncio.to_thread(push)
        if conflict is not None:
            event = Event(EventName.CHANGES_REQUESTED, at=self.clock(), feedback=(conflict,))
            return Opened(
                task.pr or PullRequest(branch=branch, base=self.checkout.default_branch),
                None,
                event,
            )
        try:
            pr = await self._find_or_create_pr(quest, task, branch)
        except _ClosedByWriter as closed:
            # The attempt's own PR was rejected while no run was there to see the
            # delivery (or while this run was resuming): the rejection stands, no new PR.
            assert task.pr is not None
            detail = f"closed by {closed}"
            event = Event(EventName.PR_REJECTED, at=self.clock(), detail=detail)
            return Opened(task.pr.model_copy(update={"state": "closed"}), None, event)
        number = int(pr["number"])
        self._remember_pr(quest, task, number)
        current = review.current_round(task)
        if not people_commits:
            # Lawbringer's review and DiagramCheck's verdict are of what scaffold checked;
            # a head with people's commits taken in is DiagramChecked as any push is. A CI
            # fix goes to Ward, not to Lawbringer: no review of it is claimed.
            if current is None or current.kind != "ci":
                await self._post_review(number, head_sha, task)
            await self.report_diagram_check(head_sha)
        if current is not None:
            await fb.answer_round(self.gh, self.repo_vars, number, task, current, head_sha)
        record = PullRequest(
            branch=branch,
            base=self.checkout.default_branch,
            number=number,
            url=str(pr.get("html_url") or ""),
            head_sha=head_sha,
        )
        known = task.pr is not None and task.pr.number == number
        note = None if known else f"pull request #{number} opened"
        self.progress(quest)
        approval: Event | None = None
        if not known:
            # A PR the task had no record of (a server whose state was lost finds it open):
            # a writer's approval of this head may have come while no task owned it.
            approver = await self.permissions.approver(number, head_sha)
            if approver is not None:
                approval = Event(EventName.PR_APPROVED, at=self.clock(), detail=approver)
        return Opened(record, note, approval)

    def _remember_pr(self, quest: Quest, task: TaskRecord, number: int) -> None:
        """The task's PR number, in the link at once (before the quest file records it)."""
        link = self.links.get(quest.id)
        if link is not None and link.pull_requests.get(task.id) != number:
            self.links.update(quest.id, pull_requests={task.id: number})

    async def _open_pr_of(self, branch: str) -> Any | None:
        """The open PR from ``branch`` of this repository (never a fork's namesake)."""
        owner = self.repo_vars["owner"]
        found = await self.gh.get(
            "/repos/{owner}/{repo}/pulls{?head,state}",
            self._vars(head=f"{owner}:{branch}", state="open"),
        )
        return next((pr for pr in found if same_repository(pr, self.checkout.full_name)), None)

    async def _reopen_if_closed_by_a_reader(
        self, quest: Quest, task: TaskRecord, branch: str
    ) -> Any | None:
        """The task's own PR, reopened when someone without write access closed it (such
        a close does not reject the task, so the task goes on with the same PR)."""
        number = self._pr_number(quest, task)
        if number is None:
            return None
        pr = await self.gh.get("/repos/{owner}/{repo}/pulls/{number}", self._vars(number=number))
        if (
            pr.get("state") != "closed"
            or pr.get("merged")
            or not same_repository(pr, self.checkout.full_name)
            or pr["head"]["ref"] != branch
        ):
            return None
        closer = await self.permissions.closer(number)
        if closer is not None:
            if task.pr is not None and task.pr.state == "open" and task.pr.number == number:
                raise _ClosedByWriter(closer)
            return None  # an earlier attempt's PR, rejected then: a new PR is a new try
        try:
            reopened = await self.gh.patch(
                "/repos/{owner}/{repo}/pulls/{number}",
                self._vars(number=number),
                data={"state": "open"},
            )
        except GitHubError as exc:
            log.warning(
                "could not reopen the pull request", extra={"pr": number, "error": str(exc)}
            )
            return None
        log.info(
            "pull request reopened: closed by someone without write access", extra={"pr": number}
        )
        return reopened

    async def _find_or_create_pr(self, quest: Quest, task: TaskRecord, branch: str) -> Any:
        existing = await self._open_pr_of(branch)
        if existing is not None:
            return existing
        reopened = await self._reopen_if_closed_by_a_reader(quest, task, branch)
        if reopened is not None:
            return reopened
        description = ""
        with contextlib.suppress(ScaffoldError, OSError):
            bt = bl.load_backlog(Path(task.worktree or "")).get(task.id)
            description = (bt.description or "") if bt else ""
        link = self.links.get(quest.id)
        body = render_pr_body(
            quest,
            task,
            issue_number=link.issue_number if link else None,
            description=description,
            diagram_paths=(
                self.cfg.diagrams.architecture,
                self.cfg.diagrams.data_model,
                self.cfg.diagrams.states,
            ),
        )
        return await self.gh.post(
            "/repos/{owner}/{repo}/pulls",
            self.repo_vars,
            data={
                "title": f"{task.id}: {task.title}"[:250],
                "head": branch,
                "base": self.checkout.default_branch,
                "body": body,
            },
        )

    async def _post_review(self, number: int, head_sha: str, task: TaskRecord) -> None:
        marker = REVIEW_MARKER.format(sha=head_sha)
        reviews = await self.gh.get_all(
            "/repos/{owner}/{repo}/pulls/{number}/reviews", self._vars(number=number)
        )
        if any(marker in (r.get("body") or "") for r in reviews):
            return
        verdict = _lawbringer_summary(task) or "Reviewed by Lawbringer; no findings recorded."
        await self.gh.post(
            "/repos/{owner}/{repo}/pulls/{number}/reviews",
            self._vars(number=number),
            data={
                "commit_id": head_sha,
                "event": "COMMENT",
                "body": f"{marker}\n**Lawbringer review** of {task.id}\n\n{verdict}",
            },
        )

    async def report_diagram_check(self, head_sha: str) -> None:
        """DiagramCheck passed in the orchestrator before the PR: say so as a check run."""
        summary = "Every diagram this change requires is in sync."
        output = {"title": "Diagrams in sync", "summary": summary}
        data = {"status": "completed", "conclusion": "success", "output": output}
        await self.app.start_check(self.gh, self.checkout.full_name, head_sha, data)

    async def merge_pull_request(self, quest: Quest, task: TaskRecord) -> Event | None:
        number = self._pr_number(quest, task)
        if number is None:
            # Approved while the PR was still being opened: find it by its branch.
            found = await self._open_pr_of(task.branch or "")
            if found is None:
                return None
            number = int(found["number"])
            self._remember_pr(quest, task, number)
        pr = await self.gh.get("/repos/{owner}/{repo}/pulls/{number}", self._vars(number=number))
        if not same_repository(pr, self.checkout.full_name):
            log.error("not merging a pull request from another repository", extra={"pr": number})
            return None
        if pr.get("merged"):
            await self._update_checkout()
            return Event(
                EventName.MERGE_COMPLETE, at=self.clock(), detail=pr.get("merge_commit_sha") or ""
            )
        if pr.get("state") != "open":
            log.warning("pull request closed before merging", extra={"pr": number})
            return None
        state = pr.get("mergeable_state")
        head_sha = pr["head"]["sha"]
        if pr.get("mergeable") is False or state == "dirty":
            await self._update_checkout()
            return Event(
                EventName.MERGE_CONFLICT,
                at=self.clock(),
                detail=f"the pull request conflicts with {self.checkout.default_branch}",
            )
        if state == "behind":
            with contextlib.suppress(GitHubError):
                await self.gh.put(
                    "/repos/{owner}/{repo}/pulls/{number}/update-branch",
                    self._vars(number=number),
                    data={"expected_head_sha": head_sha},
                )
            return None  # the update arrives as pull_request.synchronize; merge then
        if not await self._required_checks_green(head_sha):
            return None
        approver = await self.permissions.approver(number, head_sha)
        if approver is None:
            log.info(
                "not merging: no writer approved the head as it is now",
                extra={"pr": number, "head": head_sha},
            )
            await self._ask_for_fresh_approval(number, head_sha)
            return None
        try:
            merged = await self.gh.put(
                "/repos/{owner}/{repo}/pulls/{number}/merge",
                self._vars(number=number),
                data={"merge_method": self.cfg.merge.method, "sha": head_sha},
            )
        except GitHubError as exc:
            if exc.status in (405, 409, 422):
                log.info(
                    "pull request not mergeable yet", extra={"pr": number, "status": exc.status}
                )
                return None
            raise
        log.info(
            "pull request merged",
            extra={"pr": number, "head": head_sha, "approved_by": approver},
        )
        await self._update_checkout()
        return Event(EventName.MERGE_COMPLETE, at=self.clock(), detail=str(merged.get("sha") or ""))

    async def _ask_for_fresh_approval(self, number: int, head_sha: str) -> None:
        """Say once per head why an approved PR is not merged: its approval is of an
        earlier commit."""
        marker = APPROVE_AGAIN_MARKER.format(sha=head_sha)
        comments = await self.gh.get_all(
            "/repos/{owner}/{repo}/issues/{number}/comments", self._vars(number=number)
        )
        if any(marker in str(c.get("body") or "") for c in comments):
            return
        await self.comment(
            number,
            f"{marker}\nNot merged yet: approvals count only for the commit they reviewed, "
            f"and no one with write access has approved `{head_sha[:12]}`, the head as it "
            "is now. Review and approve it to merge.",
        )

    async def _required_checks_green(self, head_sha: str) -> bool:
        required = await fb.required_status_checks(
            self.gh, self.repo_vars, self.checkout.default_branch
        )
        checks = required.get("contexts") or []
        if not checks:
            return True
        runs = await check_runs(self.gh, self.repo_vars, head_sha, filter="all")
        # A required check may be pinned to an App; scaffold's own check counts only from
        # scaffold's App, whatever else reports under its name.
        pinned: dict[str, int] = {
            str(c.get("context")): int(c["app_id"])
            for c in required.get("checks") or []
            if type(c.get("app_id")) is int and c["app_id"] > 0
        }
        latest: dict[str, Any] = {}
        for run in runs:
            name = run.get("name")
            if name == CHECK_NAME and not self.app.owns(run):
                continue
            if name in pinned and (run.get("app") or {}).get("id") != pinned[name]:
                continue
            if name not in latest or int(run["id"]) > int(latest[name]["id"]):
                latest[name] = run
        green = {
            name
            for name, run in latest.items()
            if run.get("conclusion") in ("success", "neutral", "skipped")
        }
        # Required checks may also report through the commit status API (never
        # scaffold's own, nor one pinned to an App: anyone who may push can set a status).
        by_status = set(checks) - set(latest) - set(pinned) - {CHECK_NAME}
        if by_status:
            combined = await self.gh.get(
                "/repos/{owner}/{repo}/commits/{ref}/status", self._vars(ref=head_sha)
            )
            green |= by_status & {
                str(s.get("context"))
                for s in combined.get("statuses", [])
                if s.get("state") == "success"
            }
        return all(name in green for name in checks)

    async def branch_deleted(self, quest: Quest, task_id: str) -> None:
        task = quest.tasks.get(task_id)
        if task is None or not task.branch:
            return
        try:
            await self.gh.delete(
                "/repos/{owner}/{repo}/git/refs/{ref}", self._vars(ref=f"heads/{task.branch}")
            )
        except GitHubError as exc:
            if exc.status not in (404, 422):
                raise

    async def ask(self, quest: Quest, question: Question) -> None:
        link = self.links.get(quest.id)
        if link is None or question.id in link.question_comments:
            return
        several = len(quest.pending_questions()) > 1
        comment_id = await self.comment(
            link.issue_number, render_question(question, several_open=several)
        )
        # The link as it is now (another question may have been recorded meanwhile).
        self.links.update(quest.id, question_comments={question.id: comment_id})

    async def report_blocked(self, quest: Quest, task_id: str, reason: str) -> None:
        link = self.links.get(quest.id)
        if link is None:
            return
        await self.comment(
            link.issue_number,
            f"⛔ **{task_id} is blocked** and needs a person: {reason}\n\n"
            f"When it is sorted out, `/scaffold retry {task_id}` starts it again.",
        )

    def progress(self, quest: Quest) -> None:
        self.status.progress(quest)

    async def flush(self, quest: Quest) -> None:
        await self.status.flush(quest)


class _ClosedByWriter(Exception):
    """The task's open PR of this attempt was closed unmerged by this writer."""


def _lawbringer_summary(task: TaskRecord) -> str | None:
    for entry in reversed(task.signals):
        summary = entry.signal.get("summary")
        if entry.role.value == "lawbringer" and isinstance(summary, str) and summary:
            return summary
    return task.last_summary
