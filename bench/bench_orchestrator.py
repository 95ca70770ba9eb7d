"""Benchmark: what `scaffold run` costs on top of the agents it drives.

One run measures, side by side:

1. **Overhead.** A Backlog.md project of ``--tasks`` independent tasks is run by the real
   orchestrator in-process (``open_or_create_quest`` + ``run_quest``, quiet Reporter) with
   ``--slots`` slots, Ward empty, ``approval: auto``. Each task makes several agent runs
   (Codeweaver, Siegemaster, Lawbringer), two Ward runs, a DiagramCheck, a merge and a
   cleanup. The agent sleeps ``--sleep`` seconds and signals ``complete``. The same agent
   program is then run by a bare ``--slots``-way asyncio process pool, with no scaffold:

   - *per invocation*: the pool runs exactly the (step, role) invocations scaffold made
     (counted from the agents' own invocation log). scaffold wall / pool wall is the
     orchestrator's overhead for the same agent work: the fair ratio.
   - *per task*: the pool runs one invocation per task. scaffold wall / pool wall is what
     a task costs compared with "one agent run per task"; it includes the extra roles.

2. **Signal-to-next-spawn latency.** Each agent logs ``time.time()`` at the top of its
   program (start) and just before exiting (end); each accepted signal carries its
   ``received_at``. Every signal is paired with the next start for the same step (the
   next role), giving the median and p95 of signal -> next agent start, split into
   signal -> agent exit (the agent's own tail) and agent exit -> next start (scaffold).
   Also reported: task handoff, the k-th task's last agent exit -> the first agent start
   of the (k + slots)-th task (merge, cleanup, Backlog.md sync, next worktree); and the
   bare pool's own hop (:func:`pool_hops`: the k-th agent's exit, and its signal, -> the
   start of the agent its freed slot lets through), the floor under scaffold's.

Agents (``--agent``):

- ``direct`` (default): a tiny script written to the temp dir. Under scaffold it sends
  ``signal-back`` straight to the run's endpoint over HTTP MCP (it connects during its
  sleep and calls the tool at the end, as Claude Code does); in the pool, whose
  ``--mcp-config`` names no server, it writes its signal to a file itself (plain JSON,
  fsync'ed: no server, no import of scaffold, the least a bare pool's agent could do; an
  earlier pool imported scaffold's ``SignalWriter``, about 200 ms of CPU per invocation
  that scaffold's agents do not spend, which made the pool slower than it need be).
  Either way an agent costs about ``--sleep`` plus Python start-up.
- ``scripted``: ``scaffold.demo.scripted`` (via a two-line launcher that logs the start
  time), signalling through the real ``signal-back`` MCP server: about 1 s of imports and
  MCP start-up per invocation, in scaffold and in the pool alike.

The gap agent exit -> next agent start is further split with the times a recording
Reporter (passed to ``run_quest``) sees: exit -> "agent finished" (noticing the exit,
clearing the group, committing the worktree; any time the event loop is busy elsewhere
shows here), -> the signal's transition (signal read, event applied), -> "agent started"
(Ward, the next run's prompt and files), -> the new agent's first line. Two marks the
benchmark adds itself (:func:`commit_marks`, which wraps ``Workspace.commit_all`` and
the loop's ``subprocess_exec`` for the run) split further: exit -> the commit starts (how
long scaffold took to notice the exit and clear the group) and the commit itself; "agent
started" -> the agent's fork (channel, sandbox command line) and fork -> first line
(fork/exec, bwrap, Python start-up). The commit no longer sits between the two agents: the
agent's end is applied while it runs, and the next agent's sandbox is made meanwhile and
waits at its start gate (``RunChannel.open_gate``, also wrapped): fork -> first line splits
into fork -> gate opens (the rest of the commit) and gate -> first line (the bridge starting
the agent, the agent's Python start-up).

Before/after in one go: run the benchmark on another checkout's code with
``PYTHONPATH=<checkout>/app`` and ``--tag "before <commit>"`` (recorded under its own key,
the ``--tag`` appended), then without, back to back::

    git worktree add /tmp/base <commit>
    PYTHONPATH=/tmp/base/app .venv/bin/python bench/bench_orchestrator.py --tag "before <commit>"
    .venv/bin/python bench/bench_orchestrator.py

Usage::

    .venv/bin/python bench/bench_orchestrator.py                 # 60 tasks, 3 slots, 0.2 s
    .venv/bin/python bench/bench_orchestrator.py --quick         # 12 tasks
    .venv/bin/python bench/bench_orchestrator.py --agent scripted
    .venv/bin/python bench/bench_orchestrator.py --tasks 30 --slots 4 --sleep 0.5 --deps 5
    .venv/bin/python bench/bench_orchestrator.py --profile 40    # + cProfile, not recorded
    .venv/bin/python bench/bench_orchestrator.py --what-if-parse-cache   # experiment
    BENCH_EXTRA_CONFIG=$'review:\n  max_rounds: 1\n' .venv/bin/python bench/bench_orchestrator.py
                                                                 # extra scaffold.yml lines

``--what-if-parse-cache`` runs scaffold with Backlog.md task parsing memoised (see
:func:`parse_cache`): not the shipped code, an estimate of what the suggested fix buys;
it is recorded under its own key. A machine busy with other work inflates every figure;
compare rows of the same run, not runs.

Results go to ``bench/results/orchestrator.json`` (``orchestrator-quick.json`` with
``--quick``), one entry per configuration (agent, tasks, slots, sleep, ...): a new run
of the same configuration replaces its entry.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import cProfile
import io
import json
import math
import os
import pstats
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from results_file import stamp

from scaffold import backlog as bl
from scaffold.config import load_config
from scaffold.roles import Role
from scaffold.runtime.session import open_or_create_quest, run_quest
from scaffold.runtime.view import Reporter
from scaffold.signal_back.endpoint import SignalEndpoint

try:
    from scaffold.signal_back import mcp_config
except ImportError:  # a checkout from before it moved there (the --tag "before" runs)
    from scaffold.signal_back.endpoint import mcp_config  # type: ignore[attr-defined,no-redef]
from scaffold.signal_back.records import Binding, read_signals

RESULTS = Path(__file__).resolve().parent / "results"
ENV_LOG = "BENCH_AGENT_LOG"
ENV_SLEEP = "BENCH_AGENT_SLEEP"
ROLES_PER_TASK = ("codeweaver", "siegemaster", "lawbringer")

# The direct agent. Kept free of heavy imports on its critical path: the scaffold
# modules (pydantic) load in a thread while the agent sleeps.
DIRECT_AGENT = """\
import time

T0 = time.time()
import json
import os
import sys
import threading
import uuid


def log(ev, t, **kw):
    path = os.environ.get("BENCH_AGENT_LOG")
    if path:
        rec = {"ev": ev, "t": t, "pid": os.getpid(), **kw}
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, (json.dumps(rec) + "\\n").encode())
        finally:
            os.close(fd)


def emit(event):
    sys.stdout.write(json.dumps(event, separators=(",", ":")) + "\\n")
    sys.stdout.flush()


class McpSession:
    # The least of an MCP Streamable HTTP client: initialize, then calls.

    def __init__(self, server):
        from urllib.parse import urlsplit

        parts = urlsplit(server["url"])
        self.host, self.port, self.path = parts.hostname, parts.port or 80, parts.path or "/"
        self.headers = dict(server.get("headers", {}))
        self.n = 0
        self.session = None
        init = {"protocolVersion": "2025-06-18", "capabilities": {},
                "clientInfo": {"name": "bench", "version": "0"}}
        self.call("initialize", init)
        self.post({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def post(self, message):
        import http.client

        headers = {**self.headers, "Accept": "application/json, text/event-stream",
                   "Content-Type": "application/json"}
        if self.session:
            headers["Mcp-Session-Id"] = self.session
        conn = http.client.HTTPConnection(self.host, self.port, timeout=60)
        try:
            conn.request("POST", self.path, body=json.dumps(message).encode(), headers=headers)
            response = conn.getresponse()
            data = response.read()
            if response.status not in (200, 202):
                raise RuntimeError(f"HTTP {response.status}: {data[:200]!r}")
            self.session = self.session or response.getheader("Mcp-Session-Id")
            return data
        finally:
            conn.close()

    def call(self, method, params):
        self.n += 1
        return self.post({"jsonrpc": "2.0", "id": self.n, "method": method, "params": params})


def main():
    argv = sys.argv[1:]
    config = json.load(open(argv[argv.index("--mcp-config") + 1], encoding="utf-8"))
    server = config["mcpServers"].get("scaffold", {})
    step, role = os.environ["SCAFFOLD_STEP_ID"], os.environ["SCAFFOLD_ROLE"]
    log("start", T0, step=step, role=role)
    mods = {}

    def load():
        if "url" in server:  # scaffold serves signal-back over HTTP MCP: connect, as
            mods["http"] = McpSession(server)  # Claude Code does before its first turn
            return
        # Else (the bare pool) the agent writes its signal file: nothing to import.

    loader = threading.Thread(target=load)
    loader.start()
    session = argv[argv.index("--resume") + 1] if "--resume" in argv else str(uuid.uuid4())
    emit({"type": "system", "subtype": "init", "cwd": os.getcwd(), "session_id": session,
          "tools": ["mcp__scaffold__signal-back"],
          "mcp_servers": [{"name": "scaffold", "status": "connected"}], "model": "bench"})
    time.sleep(float(os.environ.get("BENCH_AGENT_SLEEP", "0.2")))
    if role == "codeweaver":
        os.makedirs("notes", exist_ok=True)
        with open(os.path.join("notes", step.lower() + ".md"), "w", encoding="utf-8") as fh:
            fh.write("# " + step + "\\n")
    loader.join()
    payload = {"signal": "complete", "stepId": step, "summary": role + " done"}
    if "http" in mods:  # the run's HTTP endpoint in scaffold, as Claude Code would call it
        mods["http"].call("tools/call", {"name": "signal-back", "arguments": payload})
        log("signal", time.time(), step=step, role=role)
    else:  # the bare pool: the signal straight to a file of its own, made durable
        received = time.time()
        path = os.path.join(os.environ["SCAFFOLD_SIGNAL_DIR"], "signal-%d.json" % os.getpid())
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        os.write(fd, json.dumps({**payload, "role": role, "receivedAt": received}).encode())
        os.fsync(fd)
        os.close(fd)
        log("signal", received, step=step, role=role)
    emit({"type": "result", "subtype": "success", "is_error": False, "result": role + " done",
          "num_turns": 1, "session_id": session, "total_cost_usd": 0.001})
    log("end", time.time(), step=step, role=role)


main()
sys.stdout.flush()
os._exit(0)  # skip interpreter teardown (~50 ms with pydantic loaded): "end" is the exit
"""

# The scripted agent, exactly as `python -m scaffold.demo.scripted`, plus start/end times.
SCRIPTED_LAUNCHER = """\
import time

T0 = time.time()
import json
import os
import runpy
import sys


def log(ev, t):
    path = os.environ.get("BENCH_AGENT_LOG")
    if path:
        rec = {"ev": ev, "t": t, "pid": os.getpid(), "step": os.environ.get("SCAFFOLD_STEP_ID"),
               "role": os.environ.get("SCAFFOLD_ROLE")}
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, (json.dumps(rec) + "\\n").encode())
        finally:
            os.close(fd)


log("start", T0)
code = 0
try:
    runpy.run_module("scaffold.demo.scripted", run_name="__main__", alter_sys=True)
except SystemExit as exc:
    code = exc.code
finally:
    log("end", time.time())
sys.stdout.flush()
sys.stderr.flush()
os._exit(code if isinstance(code, int) else 1)  # skip teardown: "end" is the exit
"""


# --------------------------------------------------------------------------- setup


@dataclass(frozen=True)
class Agent:
    """How to run the benchmark agent, and the environment it needs."""

    kind: str
    command: tuple[str, ...]
    env: dict[str, str]


def make_agent(kind: str, root: Path, tasks: int, sleep: float) -> Agent:
    env = {ENV_SLEEP: str(sleep)}
    if kind == "direct":
        path = root / "bench_agent.py"
        path.write_text(DIRECT_AGENT, encoding="utf-8")
        return Agent(kind, (sys.executable, str(path)), env)
    path = root / "scripted_launcher.py"
    path.write_text(SCRIPTED_LAUNCHER, encoding="utf-8")
    runs: list[dict[str, Any]] = []
    done = {"signal": {"signal": "complete", "summary": "done"}}  # stepId: the agent's own
    for n in range(1, tasks + 1):  # one Codeweaver run per step: each writes its own file
        runs.append(
            {
                "role": "codeweaver",
                "step": f"TASK-{n}",
                "cost_usd": 0.001,
                "actions": [
                    {"sleep": sleep},
                    {"write": f"notes/task-{n}.md", "content": f"# TASK-{n}\n"},
                    done,
                ],
            }
        )
    for role in ROLES_PER_TASK[1:]:
        runs.append({"role": role, "cost_usd": 0.001, "actions": [{"sleep": sleep}, done]})
    script = root / "agent-script.json"
    script.write_text(json.dumps({"runs": runs}), encoding="utf-8")
    env["SCAFFOLD_AGENT_SCRIPT"] = str(script)
    return Agent(kind, (sys.executable, str(path)), env)


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True)


def build_repo(repo: Path, tasks: int, slots: int, agent: Agent, deps: int = 0) -> None:
    """A git repository with ``tasks`` To Do tasks and a scaffold.yml. The last ``deps``
    tasks each depend on the task half the backlog before them; the rest are independent."""
    repo.mkdir(parents=True)
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "config", "user.name", "bench")
    _git(repo, "config", "user.email", "bench@localhost")
    (repo / ".github").mkdir()
    command = ", ".join(json.dumps(a) for a in agent.command)
    (repo / ".github" / "scaffold.yml").write_text(
        f"slots: {slots}\n"
        f"agent:\n  command: [{command}]\n  stuck_timeout_s: 120\n  max_attempts: 3\n"
        "ward: []\n"
        "approval: auto\n"
        + os.environ.get("BENCH_EXTRA_CONFIG", "")
        + "safety:\n  max_cost_usd: 1000000.0\n  max_hours: 100.0\n",
        encoding="utf-8",
    )
    for sub in ("tasks", "completed", "drafts"):
        (repo / "backlog" / sub).mkdir(parents=True)
    (repo / "backlog" / "config.yml").write_text(
        'project_name: "bench"\ndefault_status: "To Do"\n'
        'statuses: ["To Do", "In Progress", "Done"]\nauto_commit: false\ntask_prefix: "task"\n',
        encoding="utf-8",
    )
    (repo / "README.md").write_text("# bench\n", encoding="utf-8")
    for n in range(1, tasks + 1):
        bl.create_task(
            repo,
            f"Bench task {n}",
            description=f"Benchmark task number {n}.",
            dependencies=[f"TASK-{n - tasks // 2}"] if n > tasks - deps else [],
            priority="medium",
            acceptance_criteria=[f"notes/task-{n}.md exists"],
        )
    (repo / ".gitignore").write_text(".scaffold/\n__pycache__/\n", encoding="utf-8")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "benchmark project")


# --------------------------------------------------------------------------- what-if


@contextlib.contextmanager
def parse_cache() -> Iterator[dict[str, int]]:
    """What-if experiment (``--what-if-parse-cache``), not the shipped code: memoise
    Backlog.md task parsing on (path, mtime_ns, size, inode), the fix this benchmark
    suggests. ``load_backlog`` then stats every file but parses only changed ones.
    Swaps ``scaffold.backlog.repository.read_task`` for the duration and puts it back."""
    from scaffold.backlog import repository

    original = getattr(repository, "read_task")  # noqa: B009 (not re-exported)
    cache: dict[tuple[Any, ...], Any] = {}
    counts = {"hits": 0, "misses": 0}

    def read_task(path: Path, *, prefix: str = "task", folder: str = "tasks") -> Any:
        st = os.stat(path)
        key = (str(path), prefix, folder, st.st_mtime_ns, st.st_size, st.st_ino)
        if key in cache:
            counts["hits"] += 1
        else:
            counts["misses"] += 1
            cache[key] = original(path, prefix=prefix, folder=folder)
        return cache[key]

    setattr(repository, "read_task", read_task)  # noqa: B010
    try:
        yield counts
    finally:
        setattr(repository, "read_task", original)  # noqa: B010


# --------------------------------------------------------------------------- measuring


@dataclass
class AgentLog:
    """The agents' own records: starts, ends (and, for direct agents, signal times)."""

    starts: list[tuple[float, str, str]] = field(default_factory=list)  # (t, step, role)
    ends: list[tuple[float, str, str]] = field(default_factory=list)
    signals: list[tuple[float, str, str]] = field(default_factory=list)  # direct agents only

    @classmethod
    def read(cls, path: Path) -> AgentLog:
        log = cls()
        if not path.exists():
            return log
        for line in path.read_text(encoding="utf-8").splitlines():
            rec = json.loads(line)
            item = (float(rec["t"]), str(rec.get("step") or ""), str(rec.get("role") or ""))
            if rec["ev"] == "start":
                log.starts.append(item)
            elif rec["ev"] == "end":
                log.ends.append(item)
            elif rec["ev"] == "signal":
                log.signals.append(item)
        log.starts.sort()
        log.ends.sort()
        log.signals.sort()
        return log

    def durations(self) -> list[float]:
        """Start -> end of each invocation, paired per (step, role) in time order."""
        ends: dict[tuple[str, str], list[float]] = defaultdict(list)
        for t, step, role in self.ends:
            ends[(step, role)].append(t)
        out: list[float] = []
        seen: dict[tuple[str, str], int] = defaultdict(int)
        for t, step, role in self.starts:
            key = (step, role)
            i = seen[key]
            seen[key] += 1
            if i < len(ends[key]):
                out.append(ends[key][i] - t)
        return out


class TimedReporter(Reporter):
    """A quiet Reporter that also keeps ``(time.time(), step, what)`` for every agent
    start/finish and transition, to split the signal -> next start gap into stages."""

    def __init__(self) -> None:
        super().__init__(io.StringIO(), color=False)
        self.marks: list[tuple[float, str, str]] = []

    def transition(
        self, step: str, source: str | None, target: str | None, event: str, detail: str = ""
    ) -> None:
        self.marks.append((time.time(), step, f"event:{event}"))
        super().transition(step, source, target, event, detail)

    def agent_started(self, step: str, role: str, kind: str, resume: str | None) -> None:
        self.marks.append((time.time(), step, f"started:{role}"))
        super().agent_started(step, role, kind, resume)

    def agent_finished(self, step: str, role: str, seconds: float, cost: float) -> None:
        self.marks.append((time.time(), step, f"finished:{role}"))
        super().agent_finished(step, role, seconds, cost)


@contextlib.contextmanager
def commit_marks(marks: list[tuple[float, str, str]]) -> Iterator[None]:
    """Record when scaffold starts and ends committing an agent's work (``commit_all``,
    in a worker thread) beside the Reporter's marks: the commit starts once scaffold has
    noticed the agent's exit and cleared its group, so agent exit -> commit start is
    how long noticing the exit took. Swaps the method for the duration, then puts it back."""
    try:
        from scaffold.git.workspace import Workspace
    except ImportError:  # a checkout from before git/worktrees.py was split
        from scaffold.git.worktrees import Workspace  # type: ignore[attr-defined,no-redef]

    original = Workspace.commit_all

    def commit_all(self: Workspace, task_id: str, message: str, **kwargs: Any) -> str | None:
        marks.append((time.time(), task_id, "commit:start"))
        try:
            return original(self, task_id, message, **kwargs)
        finally:
            marks.append((time.time(), task_id, "commit:end"))

    # ... and when an agent's process is spawned (every agent goes through
    # loop.subprocess_exec, with its step in the environment): "agent started" -> spawn
    # is preparing the run (channel, sandbox), spawn -> first line is fork/exec/start-up.
    base_loop = asyncio.base_events.BaseEventLoop
    original_exec = base_loop.subprocess_exec

    async def subprocess_exec(self: Any, *args: Any, **kwargs: Any) -> Any:
        step = (kwargs.get("env") or {}).get("SCAFFOLD_STEP_ID")
        if step:
            marks.append((time.time(), step, "exec"))
        return await original_exec(self, *args, **kwargs)

    # ... and when a gated agent (its sandbox made while the last commit ran) is let
    # through: spawn -> gate is that wait, gate -> first line the agent's own start.
    try:
        from scaffold.runtime.run_channel import RunChannel
    except ImportError:  # a checkout from before the start gate
        RunChannel = None  # type: ignore[assignment,misc]
    original_gate = getattr(RunChannel, "open_gate", None)

    def open_gate(self: Any) -> None:
        if self.gated:
            marks.append((time.time(), self.binding.step_id, "gate"))
        assert original_gate is not None
        original_gate(self)

    setattr(Workspace, "commit_all", commit_all)  # noqa: B010
    setattr(base_loop, "subprocess_exec", subprocess_exec)  # noqa: B010
    if original_gate is not None:
        setattr(RunChannel, "open_gate", open_gate)  # noqa: B010
    try:
        yield
    finally:
        setattr(Workspace, "commit_all", original)  # noqa: B010
        setattr(base_loop, "subprocess_exec", original_exec)  # noqa: B010
        if original_gate is not None:
            setattr(RunChannel, "open_gate", original_gate)  # noqa: B010


@dataclass
class ScaffoldRun:
    wall_s: float
    exit_code: int
    reason: str
    merged: int
    blocked: dict[str, str]
    marks: list[tuple[float, str, str]]
    log: AgentLog
    signals: list[tuple[float, str, str]]  # (received_at, step, role)
    profile: str | None = None


def run_scaffold(
    repo: Path, agent: Agent, log_path: Path, profile_top: int, what_if_cache: bool = False
) -> ScaffoldRun:
    """``scaffold run`` in-process; the wall time covers opening the quest to the report."""
    sandbox_vars = ("SCAFFOLD_SANDBOX_READABLE", "SCAFFOLD_SANDBOX_WRITABLE")
    saved = {
        k: os.environ.get(k) for k in (*agent.env, ENV_LOG, "SCAFFOLD_AGENT_STATE", *sandbox_vars)
    }
    os.environ.update(agent.env)
    os.environ[ENV_LOG] = str(log_path)
    os.environ["SCAFFOLD_AGENT_STATE"] = str(log_path.parent / "scaffold-agent-state")
    # The agents run sandboxed: their program (and script) readable, their logs writable.
    os.environ["SCAFFOLD_SANDBOX_READABLE"] = str(Path(agent.command[-1]).parent)
    os.environ["SCAFFOLD_SANDBOX_WRITABLE"] = str(log_path.parent)
    config = load_config(repo)
    reporter = TimedReporter()
    profiler = cProfile.Profile() if profile_top else None

    blocked: dict[str, str] = {}

    async def go() -> tuple[int, str, int]:
        writer = open_or_create_quest(repo, None)
        report = await run_quest(repo, config, writer, reporter)
        tasks = writer.quest.tasks.values()
        blocked.update({t.id: t.blocked_reason or "" for t in tasks if t.outcome != "merged"})
        merged = sum(1 for t in tasks if t.outcome == "merged")
        return report.exit_code, report.reason, merged

    try:
        with (
            parse_cache() if what_if_cache else contextlib.nullcontext() as counts,
            commit_marks(reporter.marks),
        ):
            t0 = time.perf_counter()
            if profiler is not None:
                profiler.enable()
            code, reason, merged = asyncio.run(go())
            if profiler is not None:
                profiler.disable()
            wall = time.perf_counter() - t0
        if counts:
            print(f"  what-if parse cache: {counts['hits']} hits, {counts['misses']} misses")
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    signals: list[tuple[float, str, str]] = []
    for signal_dir in (repo / ".scaffold" / "runs").glob("*/*/*/signals"):
        records = read_signals(signal_dir)
        signals += [(r.received_at.timestamp(), r.step_id, r.role.value) for r in records]
    signals.sort()
    text = None
    if profiler is not None:
        buf = io.StringIO()
        stats = pstats.Stats(profiler, stream=buf)
        stats.sort_stats("cumulative").print_stats(profile_top)
        stats.sort_stats("tottime").print_stats(profile_top)
        text = buf.getvalue()
    if merged == 0:
        tail = "\n".join(reporter.lines[-15:])
        raise SystemExit(f"scaffold run failed: exit {code}: {reason}\n{tail}")
    log = AgentLog.read(log_path)
    return ScaffoldRun(wall, code, reason, merged, blocked, reporter.marks, log, signals, text)


async def _pool(
    agent: Agent, jobs: list[tuple[str, str]], slots: int, root: Path, log_path: Path
) -> float:
    """Run ``jobs`` ((step, role) each) ``slots`` at a time, reading stdout to the end."""
    sem = asyncio.Semaphore(slots)
    env = {
        **os.environ,
        **agent.env,
        ENV_LOG: str(log_path),
        "SCAFFOLD_AGENT_STATE": str(root / "agent-state"),
        "SCAFFOLD_QUEST_ID": "bench",
    }
    prompt = "Benchmark prompt. " * 100
    prepared = []
    for i, (step, role) in enumerate(jobs):
        run_dir = root / "runs" / f"{i:05d}-{role}"
        signal_dir = run_dir / "signals"
        signal_dir.mkdir(parents=True)
        config = run_dir / "mcp.json"
        config.write_text(json.dumps({"mcpServers": {}}), "utf-8")
        cwd = root / "work" / step
        cwd.mkdir(parents=True, exist_ok=True)
        step_env = {
            **env,
            "SCAFFOLD_STEP_ID": step,
            "SCAFFOLD_ROLE": role,
            "SCAFFOLD_SIGNAL_DIR": str(signal_dir),
        }
        argv = [
            *agent.command,
            "-p",
            prompt,
            "--output-format",
            "stream-json",
            "--verbose",
            "--mcp-config",
            str(config),
        ]
        binding = Binding(signal_dir, step, Role(role), "bench", cwd)
        prepared.append((argv, cwd, step_env, binding))

    async def one(argv: list[str], cwd: Path, step_env: dict[str, str], binding: Binding) -> None:
        sig = binding.signal_dir
        async with sem, contextlib.AsyncExitStack() as stack:
            if agent.kind != "direct":  # the scripted agent signals over MCP: serve its tools
                ep = await stack.enter_async_context(SignalEndpoint(binding))
                config = Path(argv[argv.index("--mcp-config") + 1])
                config.write_text(json.dumps(mcp_config(ep.url, ep.secret)), "utf-8")
            proc = await asyncio.create_subprocess_exec(
                *argv,
                cwd=cwd,
                env=step_env,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                start_new_session=True,
            )
            _, err = await proc.communicate()
            if proc.returncode != 0 or not any(sig.glob("signal-*.json")):
                raise RuntimeError(f"pool agent failed ({proc.returncode}): {err[-500:]!r}")

    t0 = time.perf_counter()
    await asyncio.gather(*(one(*p) for p in prepared))
    return time.perf_counter() - t0


def run_pool(
    agent: Agent, jobs: list[tuple[str, str]], slots: int, root: Path
) -> tuple[float, AgentLog]:
    log_path = root / "agents.jsonl"
    wall = asyncio.run(_pool(agent, jobs, slots, root, log_path))
    return wall, AgentLog.read(log_path)


# --------------------------------------------------------------------------- analysis


def pct(xs: list[float], q: float) -> float:
    if not xs:
        return math.nan
    if len(xs) == 1:
        return xs[0]
    return statistics.quantiles(xs, n=100, method="inclusive")[round(q) - 1]


def summary(xs: list[float]) -> dict[str, float]:
    return {
        "n": len(xs),
        "median_ms": 1000 * statistics.median(xs) if xs else math.nan,
        "p95_ms": 1000 * pct(xs, 95),
        "mean_ms": 1000 * statistics.fmean(xs) if xs else math.nan,
        "max_ms": 1000 * max(xs) if xs else math.nan,
    }


def latencies(run: ScaffoldRun) -> dict[str, list[float]]:
    """signal -> next start (same step), split at the signalling agent's exit."""
    starts: dict[str, list[float]] = defaultdict(list)
    for t, step, _ in run.log.starts:
        starts[step].append(t)
    ends: dict[tuple[str, str], list[float]] = defaultdict(list)
    for t, step, role in run.log.ends:
        ends[(step, role)].append(t)
    marks: dict[str, list[tuple[float, str]]] = defaultdict(list)
    for t, step, what in run.marks:
        marks[step].append((t, what))
    out: dict[str, list[float]] = {name: [] for name in (*STAGES, *EXIT_STAGES, *SPAWN_STAGES)}
    out.update(signal_to_next_start=[], signal_to_agent_exit=[], agent_exit_to_next_start=[])
    for t_sig, step, role in run.signals:
        nxt = next((s for s in starts[step] if s > t_sig), None)
        if nxt is None:
            continue  # the task's last signal: no next role
        out["signal_to_next_start"].append(nxt - t_sig)
        end = next((e for e in ends[(step, role)] if e >= t_sig), None)
        if end is None or end > nxt:
            continue
        out["signal_to_agent_exit"].append(end - t_sig)
        out["agent_exit_to_next_start"].append(nxt - end)
        # scaffold's own view of the same gap, from the Reporter's marks
        window = [(t, w) for t, w in marks[step] if t_sig <= t <= nxt]
        finished = next((t for t, w in window if w == f"finished:{role}"), None)
        applied = next((t for t, w in window if w.startswith("event:")), None)
        started = next((t for t, w in reversed(window) if w.startswith("started:")), None)
        if finished is None or applied is None or started is None:
            continue
        # The agent's commit: before its end is applied (before the start gate), or
        # beside the next agent's start (since).
        commit = [t for t, w in window if w.startswith("commit:")][:2]
        if len(commit) == 2:
            out["exit_noticed"].append(commit[0] - end)
            out["commit"].append(commit[1] - commit[0])
        spawned = next((t for t, w in window if w == "exec" and t >= started), None)
        if spawned is not None:
            out["prepare"].append(spawned - started)
            out["exec"].append(nxt - spawned)
            gate = next((t for t, w in window if w == "gate" and t >= spawned), None)
            if gate is not None:
                out["gate_wait"].append(gate - spawned)
                out["after_gate"].append(nxt - gate)
        for name, a, b in (
            ("exit_seen", end, finished),
            ("signal_applied", finished, applied),
            ("next_launched", applied, started),
            ("spawn", started, nxt),
        ):
            out[name].append(b - a)
    return out


# The stages of agent exit -> next agent start, as seen through the Reporter.
STAGES = {
    "exit_seen": "agent exit -> scaffold reports it finished",
    "signal_applied": "-> signal read, event applied",
    "next_launched": "-> Ward, next run prepared, 'agent started'",
    "spawn": "-> next agent's first line runs",
}


# exit_seen, split: until scaffold starts the commit, and the commit itself.
EXIT_STAGES = {
    "exit_noticed": "exit -> noticed, group cleared, commit starts",
    "commit": "worktree commit (git, in a thread; beside what follows)",
}
# spawn, split: preparing the run, and the process starting.
SPAWN_STAGES = {
    "prepare": "channel, sandbox argv -> spawn",
    "exec": "spawn -> first line (fork, bwrap, Python)",
    "gate_wait": "spawn -> start gate opens (sandbox made, commit done)",
    "after_gate": "gate -> first line (bridge fork/exec, Python)",
}


def pool_hops(log: AgentLog, slots: int) -> dict[str, list[float]]:
    """The bare pool's own hop, the floor under scaffold's: the k-th agent to exit ->
    the start of the (k + slots)-th (the one its freed slot let through), from that
    exit and from the exiting agent's signal. No orchestrator can hand a slot on faster
    than the pool does: noticing the exit, fork/exec, the agent's own start-up."""
    signal_at: dict[tuple[str, str], list[float]] = defaultdict(list)
    for t, step, role in log.signals:
        signal_at[(step, role)].append(t)
    out: dict[str, list[float]] = {"signal": [], "exit": []}
    for (t_end, step, role), (t_next, _, _) in zip(log.ends, log.starts[slots:], strict=False):
        out["exit"].append(t_next - t_end)
        signalled = [t for t in signal_at[(step, role)] if t <= t_end]
        if signalled:
            out["signal"].append(t_next - max(signalled))
    return out


def handoffs(run: ScaffoldRun, slots: int) -> list[float]:
    """The k-th task to finish its last agent -> first agent start of the (k+slots)-th task."""
    last_end: dict[str, float] = {}
    first_start: dict[str, float] = {}
    for t, step, _ in run.log.ends:
        last_end[step] = max(t, last_end.get(step, t))
    for t, step, _ in run.log.starts:
        first_start[step] = min(t, first_start.get(step, t))
    finishes = sorted(last_end.values())
    begins = sorted(first_start.values())
    return [b - f for f, b in zip(finishes, begins[slots:], strict=False)]


def measure(args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    agent_dir = tmp / "agent"
    agent_dir.mkdir()
    agent = make_agent(args.agent, agent_dir, args.tasks, args.sleep)
    repo = tmp / "repo"
    t0 = time.perf_counter()
    build_repo(repo, args.tasks, args.slots, agent, args.deps)
    print(f"built {args.tasks}-task repository in {time.perf_counter() - t0:.1f} s ({repo})")

    print(
        f"scaffold run: {args.tasks} tasks, {args.slots} slots, {args.agent} agent ...", flush=True
    )
    sc = run_scaffold(
        repo, agent, tmp / "scaffold-agents.jsonl", args.profile, args.what_if_parse_cache
    )
    jobs = [(step, role) for _, step, role in sc.log.starts]
    invocations = len(jobs)
    print(f"  {sc.wall_s:.2f} s, {sc.merged} merged, {invocations} agent invocations", flush=True)
    if sc.blocked:
        print(f"  WARNING: exit {sc.exit_code}; {len(sc.blocked)} task(s) not merged:", flush=True)
        for tid, why in sorted(sc.blocked.items()):
            print(f"    {tid}: {why.splitlines()[0][:160] if why else '?'}")

    print(f"pool, same {invocations} invocations ...", flush=True)
    pool_inv_wall, pool_inv_log = run_pool(agent, jobs, args.slots, tmp / "pool-inv")
    print(f"  {pool_inv_wall:.2f} s", flush=True)
    per_task_jobs = [(f"TASK-{n}", "codeweaver") for n in range(1, args.tasks + 1)]
    print(f"pool, one invocation per task ({args.tasks}) ...", flush=True)
    pool_task_wall, _ = run_pool(agent, per_task_jobs, args.slots, tmp / "pool-task")
    print(f"  {pool_task_wall:.2f} s", flush=True)

    lat = latencies(sc)
    hand = handoffs(sc, args.slots)
    floor = pool_hops(pool_inv_log, args.slots)
    sc_durs = sc.log.durations()
    pool_durs = pool_inv_log.durations()
    ideal = math.ceil(invocations / args.slots) * statistics.median(pool_durs)
    return {
        "agent": args.agent,
        "what_if_parse_cache": args.what_if_parse_cache,
        "tasks": args.tasks,
        "dependent_tasks": args.deps,
        "slots": args.slots,
        "sleep_s": args.sleep,
        "invocations": invocations,
        "invocations_per_task": invocations / args.tasks,
        "merged": sc.merged,
        "exit_code": sc.exit_code,
        "not_merged": {tid: why[:300] for tid, why in sorted(sc.blocked.items())},
        "wall_s": {
            "scaffold": sc.wall_s,
            "pool_same_invocations": pool_inv_wall,
            "pool_one_per_task": pool_task_wall,
            "ideal_same_invocations": ideal,
        },
        "ratio": {
            "per_agent_invocation": sc.wall_s / pool_inv_wall,
            "per_task": sc.wall_s / pool_task_wall,
        },
        "overhead": {
            "slot_s_per_invocation": (sc.wall_s - pool_inv_wall) * args.slots / invocations,
            "slot_s_per_task": (sc.wall_s - pool_inv_wall) * args.slots / args.tasks,
        },
        "agent_duration": {"scaffold": summary(sc_durs), "pool": summary(pool_durs)},
        "latency": {name: summary(xs) for name, xs in lat.items()},
        "task_handoff": summary(hand),
        "pool_hop": {
            "signal_to_next_start": summary(floor["signal"]),
            "agent_exit_to_next_start": summary(floor["exit"]),
        },
        "profile": sc.profile,
    }


# --------------------------------------------------------------------------- report


def report(r: dict[str, Any]) -> None:
    w, ratio, o = r["wall_s"], r["ratio"], r["overhead"]
    inv, tasks, slots = r["invocations"], r["tasks"], r["slots"]
    print()
    print(
        f"{r['agent']} agent, sleep {r['sleep_s']} s, {tasks} tasks, {slots} slots, "
        f"{inv} agent invocations ({r['invocations_per_task']:.2f} per task)"
    )
    if r["what_if_parse_cache"]:
        print("WHAT-IF: scaffold ran with Backlog.md task parsing memoised (not shipped code)")
    if r["not_merged"]:
        print(
            f"WARNING: scaffold exited {r['exit_code']} with {len(r['not_merged'])} task(s) "
            f"not merged ({r['merged']} merged): figures cover a partial run"
        )
    rows = [
        ("scaffold run", w["scaffold"], inv, ""),
        (
            f"pool, same {inv} invocations",
            w["pool_same_invocations"],
            inv,
            f"per-invocation ratio {ratio['per_agent_invocation']:.2f}",
        ),
        (
            f"pool, {tasks} invocations (1/task)",
            w["pool_one_per_task"],
            tasks,
            f"per-task ratio {ratio['per_task']:.2f}",
        ),
        ("ideal: ceil(n/slots) x median agent", w["ideal_same_invocations"], inv, ""),
    ]
    head = f"{'':<38} {'wall s':>8} {'agents':>7}  ratio (scaffold / row)"
    print(head)
    print("-" * len(head))
    for name, wall, n, note in rows:
        print(f"{name:<38} {wall:>8.2f} {n:>7}  {note}")
    print(
        f"scaffold overhead: {o['slot_s_per_invocation'] * 1000:.0f} slot-ms per agent "
        f"invocation, {o['slot_s_per_task']:.2f} slot-s per task"
    )
    print()
    head = f"{'(ms)':<56} {'n':>4} {'median':>8} {'p95':>8} {'max':>8}"
    print(head)
    print("-" * len(head))
    items = [
        ("signal -> next agent start (same task)", r["latency"]["signal_to_next_start"]),
        ("  signal -> signalling agent exits", r["latency"]["signal_to_agent_exit"]),
        ("  agent exit -> next agent start", r["latency"]["agent_exit_to_next_start"]),
        *(
            (
                f"{'      ' if name in (*EXIT_STAGES, *SPAWN_STAGES) else '    '}{text}",
                r["latency"][name],
            )
            for name, text in (
                ("exit_seen", STAGES["exit_seen"]),
                *EXIT_STAGES.items(),
                *((k, v) for k, v in STAGES.items() if k != "exit_seen"),
                *SPAWN_STAGES.items(),
            )
        ),
        (f"task handoff (k-th done -> (k+{slots})-th start)", r["task_handoff"]),
        *(
            [
                ("pool: signal -> next agent start (its floor)", pool["signal_to_next_start"]),
                ("  pool: agent exit -> next agent start", pool["agent_exit_to_next_start"]),
            ]
            if (pool := r.get("pool_hop"))
            else []
        ),
        ("agent duration in scaffold (start -> end)", r["agent_duration"]["scaffold"]),
        ("agent duration in the pool", r["agent_duration"]["pool"]),
    ]
    for name, s in items:
        print(
            f"{name:<56} {s['n']:>4} {s['median_ms']:>8.1f} {s['p95_ms']:>8.1f} {s['max_ms']:>8.1f}"
        )
    if r.get("profile"):
        print()
        print("cProfile of the scaffold run (in-process; timings above include its cost):")
        print(r["profile"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--agent", choices=("direct", "scripted"), default="direct")
    parser.add_argument("--tasks", type=int, default=None, help="tasks (default 60; quick 12)")
    parser.add_argument("--slots", type=int, default=3)
    parser.add_argument("--sleep", type=float, default=0.2, help="agent sleep, seconds")
    parser.add_argument("--quick", action="store_true", help="12 tasks unless --tasks")
    parser.add_argument(
        "--deps",
        type=int,
        default=0,
        metavar="N",
        help="the last N tasks each depend on one earlier task (default: none)",
    )
    parser.add_argument(
        "--profile",
        type=int,
        default=0,
        metavar="N",
        help="profile the scaffold run and print the top N functions",
    )
    parser.add_argument("--keep", action="store_true", help="keep the temp directory")
    parser.add_argument(
        "--tag",
        default="",
        help="appended to the result's key, e.g. 'before: <commit>' for a run of another "
        "checkout's code (PYTHONPATH=<checkout>/app) recorded beside this one's",
    )
    parser.add_argument(
        "--what-if-parse-cache",
        action="store_true",
        help="experiment: memoise Backlog.md task parsing during the scaffold "
        "run (not the shipped code; recorded under its own key)",
    )
    args = parser.parse_args()
    if args.tasks is None:
        args.tasks = 12 if args.quick else 60
    if not 0 <= args.deps <= args.tasks // 2:
        parser.error("--deps must be between 0 and half the tasks")

    tmp = Path(tempfile.mkdtemp(prefix="bench-orch-"))
    try:
        result = measure(args, tmp)
    finally:
        if args.keep:
            print(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    report(result)
    if args.profile:
        return  # a profiled run is slower: do not record it
    stamp(result)
    result.pop("profile", None)
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / ("orchestrator-quick.json" if args.quick else "orchestrator.json")
    data: dict[str, Any] = json.loads(out.read_text("utf-8")) if out.exists() else {}
    key = f"{args.agent}, {args.tasks} tasks, {args.slots} slots, sleep {args.sleep}"
    if args.deps:
        key += f", {args.deps} dependent"
    if args.what_if_parse_cache:
        key += ", WHAT-IF parse cache"
    if args.tag:
        key += f", {args.tag}"
        result["tag"] = args.tag
    data[key] = result
    out.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    print(f"\nwrote {out.relative_to(Path.cwd()) if out.is_relative_to(Path.cwd()) else out}")


if __name__ == "__main__":
    main()
