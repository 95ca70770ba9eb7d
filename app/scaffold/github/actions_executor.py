"""``executor: actions``: task agents run as GitHub Actions workflow runs.

For each agent run the App pushes the task branch, dispatches the slot workflow
(``actions.workflow``) and follows the run through ``workflow_run`` deliveries (and by
polling, in case one is lost). The artifact of a completed run gives the signal, the
outcome and the session file; the agent's commits are fetched into the worktree. A run
that did not succeed is an agent crash, which the lifecycle retries.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import logging
import time
import zipfile
from pathlib import Path
from typing import Any

from scaffold.agent.process import AgentRunOutcome
from scaffold.agent.stream import ResultEvent, StreamSummary
from scaffold.config import ActionsConfig
from scaffold.errors import GitHubError, ScaffoldError
from scaffold.fsutil import write_file
from scaffold.git.runner import SAFE_LOCAL, run_git
from scaffold.github.checkout import Checkout
from scaffold.github.client import GitHubClient, repo_vars
from scaffold.quest.model import AgentRun, Quest, TaskRecord
from scaffold.signal_back.records import SignalRecord

log = logging.getLogger("scaffold.app")

ARTIFACT_PREFIX = "scaffold-slot"
FAILED = ("failure", "cancelled", "timed_out", "startup_failure", "action_required", "stale")


class WorkflowWaiters(dict[int, "asyncio.Future[str]"]):
    """Futures of dispatched workflow runs by id, resolved by ``workflow_run.completed``."""

    def completed(self, run_id: int, conclusion: str) -> None:
        fut = self.get(run_id)
        if fut is not None and not fut.done():
            fut.set_result(conclusion)


class SessionRuns:
    """Which workflow run's artifact holds each agent session's file (a small JSON map)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def _load(self) -> dict[str, int]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return {str(k): int(v) for k, v in data.items()} if isinstance(data, dict) else {}

    def run_of(self, session_id: str | None) -> int | None:
        return self._load().get(session_id) if session_id else None

    def remember(self, session_id: str, run_id: int) -> None:
        data = self._load()
        data[session_id] = run_id
        self.path.parent.mkdir(parents=True, exist_ok=True)
        write_file(self.path, json.dumps(data, indent=1).encode("utf-8"))


def _outcome(
    exit_code: int,
    duration_s: float,
    failure: str,
    session_id: str | None = None,
    cost: float | None = None,
) -> AgentRunOutcome:
    result = ResultEvent(
        subtype="success" if exit_code == 0 else "error_during_execution",
        is_error=exit_code != 0,
        num_turns=None,
        session_id=session_id,
        total_cost_usd=cost,
        permission_denials=(),
        api_error_status=None,
        result=failure or None,
        raw={},
    )
    summary = StreamSummary(session_id=session_id, result=result)
    return AgentRunOutcome(
        pid=0,
        exit_code=exit_code,
        signal=None,
        stuck=False,
        duration_s=duration_s,
        summary=summary,
        stderr_tail=failure,
    )


class ActionsExecutor:
    def __init__(
        self,
        client: GitHubClient,
        checkout: Checkout,
        config: ActionsConfig,
        waiters: WorkflowWaiters,
    ) -> None:
        self.gh = client
        self.checkout = checkout
        self.cfg = config
        self.waiters = waiters
        self.sessions = SessionRuns(checkout.path / ".scaffold" / "github" / "session-runs.json")
        self.repo_vars = repo_vars(checkout.full_name)

    def _push(self, branch: str, token: str) -> None:
        """The branch as the runner is to start from it: scaffold's commits pushed over the
        remote tip they contain; a remote that has commits of a person's is left as it is
        (the runner builds on them; never overwritten)."""
        remote = self.checkout.fetch_branch(branch, token)
        if not self.checkout.push_branch(branch, token, lease=remote):
            log.warning(
                "not pushed over commits scaffold has not seen; the runner takes the branch as is",
                extra={"branch": branch},
            )

    async def run_agent(
        self, quest: Quest, task: TaskRecord, run: AgentRun, run_dir: Path, signal_dir: Path
    ) -> AgentRunOutcome:
        started = time.monotonic()
        branch = task.branch or ""
        token = await self.gh.token()
        await asyncio.to_thread(self._push, branch, token)
        inputs = {
            "quest-id": quest.id,
            "task-id": task.id,
            "role": run.role.value,
            "run-spec": run.model_dump_json(),
            "resume-session": run.resume_session or "",
            # The earlier workflow run whose artifact holds that session's file, so a
            # runner that never saw the session can put it back before resuming.
            "session-run-id": str(self.sessions.run_of(run.resume_session) or ""),
        }
        try:
            answer = await self.gh.post(
                "/repos/{owner}/{repo}/actions/workflows/{workflow_id}/dispatches",
                {**self.repo_vars, "workflow_id": self.cfg.workflow},
                data={
                    "ref": self.checkout.default_branch,
                    "inputs": inputs,
                    "return_run_details": True,
                },
            )
        except GitHubError as exc:
            return self._failed(started, f"could not dispatch {self.cfg.workflow}: {exc}")
        run_id = int((answer or {}).get("workflow_run_id") or 0)
        if not run_id:
            return self._failed(started, "the dispatch answered without a workflow run id")
        log.info(
            "slot run dispatched", extra={"task": task.id, "run": run_id, "role": run.role.value}
        )
        (run_dir / "workflow-run.json").write_text(json.dumps({"run_id": run_id}), encoding="utf-8")
        conclusion = await self._wait(run_id)
        if conclusion != "success":
            return self._failed(started, f"workflow run {run_id} ended: {conclusion}")
        try:
            files = await self._artifact_files(run_id)
        except (GitHubError, ScaffoldError, zipfile.BadZipFile) as exc:
            return self._failed(started, f"workflow run {run_id}: no usable artifact: {exc}")
        outcome = await self._take_results(files, task, run_dir, signal_dir, started)
        if outcome.session_id and "session.jsonl" in files:
            self.sessions.remember(outcome.session_id, run_id)
        return outcome

    def _failed(self, started: float, why: str) -> AgentRunOutcome:
        log.warning("slot run failed", extra={"reason": why})
        return _outcome(1, time.monotonic() - started, why)

    async def _wait(self, run_id: int) -> str:
        future = self.waiters.setdefault(run_id, asyncio.get_running_loop().create_future())
        deadline = time.monotonic() + self.cfg.timeout_s
        try:
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    await self._cancel(run_id)
                    return "timed_out"
                try:
                    return await asyncio.wait_for(
                        asyncio.shield(future), min(self.cfg.poll_s, left)
                    )
                except TimeoutError:
                    pass
                # The delivery may have been lost: ask GitHub.
                try:
                    data = await self.gh.get(
                        "/repos/{owner}/{repo}/actions/runs/{run_id}",
                        {**self.repo_vars, "run_id": run_id},
                    )
                except GitHubError:
                    continue
                if data.get("status") == "completed":
                    return str(data.get("conclusion") or "failure")
        finally:
            self.waiters.pop(run_id, None)

    async def _cancel(self, run_id: int) -> None:
        try:
            await self.gh.post(
                "/repos/{owner}/{repo}/actions/runs/{run_id}/cancel",
                {**self.repo_vars, "run_id": run_id},
            )
        except GitHubError as exc:
            log.warning("could not cancel a workflow run", extra={"run": run_id, "error": str(exc)})

    async def _artifact_files(self, run_id: int) -> dict[str, bytes]:
        listing = await self.gh.get(
            "/repos/{owner}/{repo}/actions/runs/{run_id}/artifacts",
            {**self.repo_vars, "run_id": run_id},
        )
        artifacts = [
            a
            for a in listing.get("artifacts", [])
            if str(a.get("name", "")).startswith(ARTIFACT_PREFIX)
        ]
        if not artifacts:
            raise ScaffoldError(f"no artifact named {ARTIFACT_PREFIX}*")
        data = await self.gh.download(
            "/repos/{owner}/{repo}/actions/artifacts/{artifact_id}/{archive_format}",
            {**self.repo_vars, "artifact_id": int(artifacts[0]["id"]), "archive_format": "zip"},
        )
        files: dict[str, bytes] = {}
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            for info in archive.infolist():
                if info.is_dir() or info.file_size > 64 * 1024 * 1024:
                    continue
                name = info.filename.replace("\\", "/")
                if name.startswith("/") or ".." in name.split("/"):
                    continue  # a path that would leave the run folder
                files[name] = archive.read(info)
        return files

    async def _take_results(
        self,
        files: dict[str, bytes],
        task: TaskRecord,
        run_dir: Path,
        signal_dir: Path,
        started: float,
    ) -> AgentRunOutcome:
        remote = run_dir / "remote"
        for name, data in files.items():
            target = remote / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
        outcome: dict[str, Any] = {}
        with contextlib.suppress(ValueError):
            outcome = json.loads(files.get("outcome.json", b"{}"))
        if "signal.json" in files:
            try:
                record = SignalRecord.model_validate_json(files["signal.json"])
            except ValueError as exc:
                log.warning("slot run's signal is unreadable", extra={"error": str(exc)})
            else:
                signal_dir.mkdir(parents=True, exist_ok=True)
                name = f"signal-{record.seq:06d}.json"
                (signal_dir / name).write_text(record.model_dump_json(), encoding="utf-8")
        await self._fetch_branch(task)
        return _outcome(
            int(outcome.get("exit_code", 0) or 0),
            float(outcome.get("duration_s") or (time.monotonic() - started)),
            str(outcome.get("failure") or ""),
            session_id=outcome.get("session_id"),
            cost=outcome.get("cost_usd"),
        )

    async def _fetch_branch(self, task: TaskRecord) -> None:
        token = await self.gh.token()
        branch = task.branch or ""

        def work() -> None:
            self.checkout.fetch_refspecs(
                token, f"+refs/heads/{branch}:refs/remotes/origin/{branch}"
            )
            if task.worktree:
                run_git(
                    [*SAFE_LOCAL, "merge", "--ff-only", "--quiet", f"refs/remotes/origin/{branch}"],
                    cwd=Path(task.worktree),
                )

        await asyncio.to_thread(work)
