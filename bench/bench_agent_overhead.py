"""Benchmark: what scaffold adds around one real ``claude -p`` run, and between two of them.

Every run talks to the same scripted Messages API (``tests/claude/messages_server.py``) on
loopback: the first request of a run is answered with a ``signal-back complete`` tool call,
the second (the tool result) with end_turn text, so a run is the real CLI start-up, two
API round trips through scaffold's real MCP signal endpoint, and the CLI's shutdown.

Variants, interleaved round by round (the order rotates each round, after one unrecorded
warm-up run of each):

- **no-mcp** (reference): ``claude -p <prompt> --output-format stream-json --verbose``
  without any MCP server, answered with end_turn text at once: the CLI's own floor, so
  that bare - no-mcp is what scaffold's signal endpoint costs a run.
- **bare**: ``claude -p <prompt> --output-format stream-json --verbose --mcp-config <cfg>
  --strict-mcp-config --allowedTools mcp__scaffold__signal-back`` with
  :class:`subprocess.Popen`, reading stdout line by line; the run's signal endpoint is
  served by this process (a thread of its own), as scaffold serves it.
- **bare+argv**: the same, but with the exact argv and environment scaffold builds
  (:func:`scaffold.runtime.agent_runs.prepare_run`: role tools, system prompt,
  retries): separates what scaffold's *arguments* cost the CLI from what its *runner* costs.
- **scaffold**: that invocation through :func:`scaffold.agent.process.run_agent` exactly
  as the orchestrator does it (``AgentSpec``, an ``on_event`` that checks the init event,
  ``watch_signal`` beside it, a ``LiveChildren``).
- **orchestrator** (one per round): one Backlog.md task through ``scaffold run``
  in-process (``open_or_create_quest`` + ``run_quest``), one slot, Ward empty, approval
  auto, where Codeweaver, Siegemaster and Lawbringer are real ``claude`` runs.

Times (``time.time()``, the clock the server stamps requests with):

- *spawn*: just before ``Popen`` / ``run_agent`` (in the orchestrator: when it calls
  ``run_agent``);
- *first event*: the first stdout line (bare) or ``on_event`` call (scaffold);
- *result*: the ``result`` line / event;
- *exit*: the CLI process exits, seen through a pidfd polled by a thread (exact, and
  independent of who reaps the process);
- *end*: the caller is free again: ``wait()`` returned after stdout EOF (bare), or
  ``run_agent`` returned (scaffold): *result -> end* is what keeps a slot busy after the
  agent's answer;
- the server's log gives each API request's arrival, matched to a run by its
  ``x-claude-code-session-id``.

In the orchestrator, the hand-off *result of agent k -> spawn of agent k+1* is measured
by wrapping ``scaffold.runtime.agent_jobs.run_agent`` (put back afterwards) with a shim
that stamps the call, the events and the return, and split with a recording Reporter
(``agent_finished`` comes after the worktree commit; ``agent_started`` just before the
next spawn). It is cross-checked without the shim from the request log alone: next
agent's first request - previous agent's last request, minus the bare medians of
spawn -> first request and last request -> result.

Usage::

    .venv/bin/python bench/bench_agent_overhead.py              # 5 rounds
    .venv/bin/python bench/bench_agent_overhead.py --quick      # 2 rounds
    .venv/bin/python bench/bench_agent_overhead.py --rounds 9
    .venv/bin/python bench/bench_agent_overhead.py --quick --no-orchestrator

Results go to ``bench/results/agent_overhead.json``, one entry per configuration
(``rounds N``; ``quick`` for ``--quick``): a new run replaces its entry. A busy machine
inflates every figure; compare variants of the same run, not runs.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import os
import platform
import re
import select
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from scaffold import backlog as bl
from scaffold.agent.backend import Invocation
from scaffold.agent.process import AgentRunOutcome, AgentSpec, OnEvent, run_agent
from scaffold.agent.process_group import LiveChildren
from scaffold.agent.stream import Event, ResultEvent, SystemInit
from scaffold.config import SandboxConfig, ScaffoldConfig, load_config, parse_config
from scaffold.quest.model import AgentRun
from scaffold.roles import Role
from scaffold.runtime import agent_jobs
from scaffold.runtime.agent_runs import init_problem, prepare_run, watch_signal
from scaffold.runtime.prompts import PromptData
from scaffold.runtime.run_channel import RunChannel
from scaffold.runtime.session import open_or_create_quest, run_quest
from scaffold.sandbox.confinement import Confinement
from scaffold.sandbox.settings import resolve_sandbox
from scaffold.signal_back.records import Binding, latest_signal

REPO = Path(__file__).resolve().parents[1]
RESULTS = Path(__file__).resolve().parent / "results"
# The scripted Messages API is test support, not part of the package: this script is run,
# never imported, so it takes it straight from tests/claude.
sys.path.insert(0, str(REPO / "tests" / "claude"))
sys.path.insert(0, str(REPO / "tests"))
from bench_orchestrator import TimedReporter  # noqa: E402  (the same stage marks)
from messages_server import (  # noqa: E402
    SIGNAL_TOOL,
    MessagesServer,
    Request,
    Turn,
    When,
    chain,
    claude_env,
    signal_back,
    text,
    tool,
)

from harness import served_tools  # noqa: E402

CLAUDE_DIRS = (REPO / ".tools" / "node_modules" / ".bin",)
STEP = "TASK-900"  # the step of the single runs; the orchestrator's task is TASK-1
PROMPT = PromptData(
    step_id=STEP,
    task_title="Benchmark task",
    task_description="Report back at once.",
    acceptance_criteria=("signal-back complete",),
)
NO_MCP = "no-mcp"  # reference: the CLI alone, without scaffold's signal server
UNSANDBOXED = "scaffold-nosbx"  # scaffold's run without the sandbox: the sandbox's baseline
VARIANTS = (NO_MCP, "bare", "bare+argv", UNSANDBOXED, "scaffold")
SCAFFOLD_VARIANTS = ("scaffold", UNSANDBOXED)
ORCH = "orchestrator"
ORCH_ROLES = ("codeweaver", "siegemaster", "lawbringer")
_CWD = re.compile(r"Primary working directory: (\S+)")


def find_claude() -> str:
    """``SCAFFOLD_CLAUDE_BIN``, then ``<repo>/.tools``, then PATH
    (as ``tests/claude/conftest.py`` does). The path is kept unresolved: scaffold knows
    Claude Code by the name ``claude``."""
    explicit = os.environ.get("SCAFFOLD_CLAUDE_BIN")
    if explicit:
        if os.access(explicit, os.X_OK):
            return explicit
        raise SystemExit(f"SCAFFOLD_CLAUDE_BIN={explicit!r} is not an executable file")
    for folder in CLAUDE_DIRS:
        candidate = folder / "claude"
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    found = shutil.which("claude")
    if found is None:
        raise SystemExit(
            "the claude CLI is required; install it with "
            "`npm install --prefix .tools @anthropic-ai/claude-code@2.1.197`"
        )
    return found


# --------------------------------------------------------------------------- the script


def _note_path(request: Request) -> dict[str, Any]:
    """Codeweaver writes notes/task-1.md in its worktree (the CLI's Write wants a path
    under the working directory, which the CLI states in its system prompt)."""
    found = _CWD.search(request.system_text)
    root = found.group(1) if found else "."
    return {"file_path": f"{root}/notes/task-1.md", "content": "# TASK-1\n"}


def script() -> list[Turn]:
    """Codeweaver on TASK-1 (orchestrator) writes a file first; every other run signals
    ``complete`` on its first request and ends its turn on the second; a run without the
    signal tool (``no-mcp``) ends its turn on its first request."""
    return [
        Turn(when=When(match=lambda r: SIGNAL_TOOL not in r.tools), reply=[text("Done.")]),
        *chain(
            tool("Write", _note_path),
            signal_back("complete", summary="wrote notes/task-1.md"),
            final="Done.",
            when=When(role="codeweaver", step="TASK-1"),
            name="orch-codeweaver",
        ),
        *chain(signal_back("complete", summary="bench run done"), final="Done.", name="run"),
    ]


# --------------------------------------------------------------------------- timing parts


class ExitStamp:
    """The time a process exits, from a pidfd polled in a thread: exact whoever reaps it,
    and without touching the process (``pidfd_open`` needs Linux 5.3)."""

    def __init__(self, pid: int) -> None:
        self.at: float | None = None
        try:
            self._fd: int | None = os.pidfd_open(pid)
        except OSError:  # already reaped
            self._fd = None
            return
        self._thread = threading.Thread(target=self._wait, name=f"exit-{pid}", daemon=True)
        self._thread.start()

    def _wait(self) -> None:
        assert self._fd is not None
        select.select([self._fd], [], [])
        self.at = time.time()
        os.close(self._fd)

    def join(self, timeout: float = 30.0) -> float | None:
        if self._fd is not None:
            self._thread.join(timeout)
        return self.at


def group_members(pgid: int) -> list[int]:
    """Live (non-zombie) processes of a process group."""
    found: list[int] = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_bytes()
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2 :].split()
        if len(fields) > 2 and int(fields[2]) == pgid and fields[0] not in (b"Z", b"X"):
            found.append(int(entry))
    return found


@dataclass
class RunTimes:
    """One agent run's timestamps (``time.time()``)."""

    variant: str
    round: int
    spawn: float
    first_event: float | None = None
    result: float | None = None
    exit: float | None = None
    end: float | None = None
    session_id: str | None = None
    requests: list[float] = field(default_factory=list)
    signalled: bool = False
    ok: bool = False
    role: str = "codeweaver"
    # bare: processes left in the agent's group when the CLI exited (its MCP server);
    # scaffold: how run_agent stopped the group (None: it was gone by itself)
    leftover: list[int] = field(default_factory=list)
    stop: str | None = None
    detail: str = ""

    def span(self, a: str, b: str) -> float | None:
        """Seconds from stamp ``a`` to stamp ``b``; request stamps are ``req0`` and
        ``reqN`` (first and last)."""
        x, y = self._at(a), self._at(b)
        return None if x is None or y is None else y - x

    def _at(self, name: str) -> float | None:
        if name == "req0":
            return self.requests[0] if self.requests else None
        if name == "reqN":
            return self.requests[-1] if self.requests else None
        value = getattr(self, name)
        return None if value is None else float(value)


# --------------------------------------------------------------------------- single runs


@dataclass
class Bench:
    claude: str
    server: MessagesServer
    home: Path
    work: Path
    root: Path
    config: ScaffoldConfig

    def env(self) -> dict[str, str]:
        return claude_env(self.server.base_url, self.home)

    def invocation(self, label: str) -> tuple[Invocation, Path]:
        """scaffold's invocation of a fresh Codeweaver run on STEP, in its own run dir.

        The bare variants get the run's signal endpoint served from a thread (see ``run``);
        the scaffold variant gets its run channel (see ``_scaffold``).
        """
        run_dir = self.root / "runs" / label
        signal_dir = run_dir / "signals"
        signal_dir.mkdir(parents=True)
        config_path = run_dir / "mcp.json"
        inv = prepare_run(
            self.config,
            AgentRun(role=Role.CODEWEAVER),
            PROMPT,
            quest_id="bench",
            signal_dir=signal_dir,
            # The bare variants serve the endpoint themselves and write this file.
            signal=("http://127.0.0.1:1/mcp", "", config_path),
            home=self.home,
            env=self.env(),
        ).invocation
        return inv, signal_dir

    def run(self, variant: str, round_no: int) -> RunTimes:
        inv, signal_dir = self.invocation(f"{round_no:03d}-{variant}")
        if variant in SCAFFOLD_VARIANTS:
            times = asyncio.run(self._scaffold(variant, inv, signal_dir, round_no))
        else:
            if variant in ("bare", NO_MCP):
                prompt = inv.argv[inv.argv.index("-p") + 1]
                config_path = inv.argv[inv.argv.index("--mcp-config") + 1]
                argv = [self.claude, "-p", prompt, "--output-format", "stream-json", "--verbose"]
                if variant == "bare":
                    argv += ["--mcp-config", config_path, "--strict-mcp-config"]
                    argv += ["--allowedTools", SIGNAL_TOOL]
                env = self.env()
            else:
                argv, env = list(inv.argv), {**self.env(), **inv.env}
            binding = Binding(signal_dir, STEP, Role.CODEWEAVER, "bench", self.work)
            with served_tools(binding) as config:
                config_path = Path(inv.argv[inv.argv.index("--mcp-config") + 1])
                config_path.write_text(json.dumps(config), encoding="utf-8")
                times = self._bare(variant, argv, env, round_no)
        times.signalled = latest_signal(signal_dir) is not None
        times.ok = times.ok and (times.signalled or variant == NO_MCP)
        return times

    def _bare(self, variant: str, argv: list[str], env: dict[str, str], n: int) -> RunTimes:
        times = RunTimes(variant, n, spawn=time.time())
        proc = subprocess.Popen(
            argv,
            cwd=self.work,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        exited = ExitStamp(proc.pid)
        leftover: list[int] = []

        def at_exit() -> None:  # which processes of the group outlive the CLI
            exited.join()
            leftover.extend(group_members(proc.pid))

        checker = threading.Thread(target=at_exit, daemon=True)
        checker.start()
        stderr: list[bytes] = []
        drain = threading.Thread(target=lambda: stderr.append(proc.stderr.read()), daemon=True)  # type: ignore[union-attr]
        drain.start()
        assert proc.stdout is not None
        result: dict[str, Any] = {}
        for line in proc.stdout:
            now = time.time()
            if times.first_event is None:
                times.first_event = now
            with contextlib.suppress(ValueError):
                event = json.loads(line)
                if isinstance(event, dict) and event.get("type") == "system":
                    times.session_id = event.get("session_id") or times.session_id
                if isinstance(event, dict) and event.get("type") == "result":
                    times.result, result = now, event
        code = proc.wait()
        times.end = time.time()
        times.exit = exited.join()
        checker.join(5)
        drain.join(5)
        times.leftover = leftover
        times.ok = code == 0 and result.get("subtype") == "success"
        if not times.ok:
            times.detail = f"exit {code}; {b''.join(stderr)[-300:]!r}"
        return times

    async def _scaffold(self, variant: str, inv: Invocation, signal_dir: Path, n: int) -> RunTimes:
        """As ``AgentJobs.run_agent`` runs an agent, minus the quest bookkeeping."""
        times = RunTimes(variant, n, spawn=0.0)
        children = LiveChildren()
        stop = asyncio.Event()
        refused: list[str] = []
        exited: list[ExitStamp] = []

        async def on_event(ev: Event) -> None:
            now = time.time()
            if times.first_event is None:
                times.first_event = now
                exited.extend(ExitStamp(pid) for pid in children.pids())
            if isinstance(ev, SystemInit):
                times.session_id = ev.session_id or times.session_id
                problem = init_problem(ev)
                if problem:
                    refused.append(problem)
                    stop.set()
            elif isinstance(ev, ResultEvent):
                times.result = now

        # As the orchestrator does it: the run's channel (signal endpoint, egress) and,
        # when the sandbox is on, bwrap around the agent.
        binding = Binding(signal_dir, STEP, Role.CODEWEAVER, "bench", self.work)
        tree = self.work if (self.work / ".git").exists() else None
        confinement = Confinement(
            repo=self.work, cwd=self.work, private=self.root / "private", worktree=tree
        )
        mode = "off" if variant == UNSANDBOXED else "bwrap"
        sandbox = resolve_sandbox(SandboxConfig(mode=mode), strict=False)
        channel = RunChannel(
            sandbox,
            binding,
            confinement,
            python=sys.executable,
            env=self.env(),
        )
        async with channel:
            inv = prepare_run(
                self.config,
                AgentRun(role=Role.CODEWEAVER),
                PROMPT,
                quest_id="bench",
                signal_dir=signal_dir,
                signal=channel.signal,
                home=self.home,
                env=self.env(),
            ).invocation
            argv, env = channel.wrap(inv.argv, {**self.env(), **inv.env})
            spec = AgentSpec(
                argv=argv,
                cwd=self.work,
                stuck_timeout_s=self.config.agent.stuck_timeout_s,
                base_env=env,  # the orchestrator inherits os.environ; here: hermetic
            )
            times.spawn = time.time()
            agent = asyncio.create_task(
                run_agent(spec, on_event=on_event, children=children, stop_requested=stop)
            )
            watcher = asyncio.create_task(watch_signal(channel.signalled, stop))
            try:
                outcome = await agent
            finally:
                watcher.cancel()
        times.end = time.time()
        times.exit = exited[0].join() if exited else None
        times.stop = outcome.stop
        times.ok = outcome.ok and not refused
        if not times.ok:
            times.detail = f"{refused} exit {outcome.exit_code}; {outcome.stderr_tail[-300:]!r}"
        return times


# --------------------------------------------------------------------------- orchestrator


RunAgent = Callable[..., Awaitable[AgentRunOutcome]]


@contextlib.contextmanager
def timed_run_agent(round_no: int) -> Iterator[list[RunTimes]]:
    """Instrumentation, not a change: the agent jobs' ``run_agent`` wrapped to stamp
    the call (spawn; for an agent whose sandbox waits at its start gate, the moment it
    is let through), every event, the CLI's exit and the return. Put back on exit."""
    original: RunAgent = getattr(agent_jobs, "run_agent")  # noqa: B009
    runs: list[RunTimes] = []

    async def shim(
        spec: AgentSpec,
        *,
        on_event: OnEvent | None = None,
        children: LiveChildren | None = None,
        stop_requested: asyncio.Event | None = None,
        **more: Any,  # e.g. ``released`` (checkouts with the start gate)
    ) -> AgentRunOutcome:
        config = spec.argv[list(spec.argv).index("--mcp-config") + 1]
        times = RunTimes(ORCH, round_no, spawn=time.time())
        # The orchestrator hands the whole environment over as ``base_env``.
        env = {**(spec.base_env or {}), **spec.env}
        times.role = str(env.get("SCAFFOLD_ROLE", "?"))
        runs.append(times)
        exited: list[ExitStamp] = []

        async def stamped(ev: Event) -> None:
            now = time.time()
            if times.first_event is None:
                times.first_event = now
                for pid in children.pids() if children is not None else ():
                    with contextlib.suppress(OSError):
                        if config in Path(f"/proc/{pid}/cmdline").read_text("utf-8", "replace"):
                            exited.append(ExitStamp(pid))
            if isinstance(ev, SystemInit):
                times.session_id = ev.session_id or times.session_id
            elif isinstance(ev, ResultEvent):
                times.result = now
            if on_event is not None:
                maybe = on_event(ev)
                if maybe is not None:
                    await maybe

        released: asyncio.Event | None = more.get("released")

        async def let_through() -> None:
            assert released is not None
            await released.wait()
            times.spawn = time.time()

        stamp = asyncio.ensure_future(let_through()) if released is not None else None
        try:
            outcome = await original(
                spec, on_event=stamped, children=children, stop_requested=stop_requested, **more
            )
        finally:
            if stamp is not None:
                stamp.cancel()
        times.end = time.time()
        times.exit = exited[0].join() if exited else None
        times.stop = outcome.stop
        times.ok = outcome.ok
        return outcome

    setattr(agent_jobs, "run_agent", shim)  # noqa: B010
    try:
        yield runs
    finally:
        setattr(agent_jobs, "run_agent", original)  # noqa: B010


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True)


def build_repo(repo: Path, claude: str) -> None:
    """A git repository with one To Do task and a scaffold.yml running ``claude``."""
    repo.mkdir(parents=True)
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "config", "user.name", "bench")
    _git(repo, "config", "user.email", "bench@localhost")
    (repo / ".github").mkdir()
    (repo / ".github" / "scaffold.yml").write_text(
        f"slots: 1\nagent:\n  command: [{json.dumps(claude)}]\n  stuck_timeout_s: 120\n"
        "  max_attempts: 1\nward: []\napproval: auto\n"
        "safety:\n  max_cost_usd: 1000000.0\n  max_hours: 100.0\n",
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
    bl.create_task(
        repo,
        "Bench task",
        description="Write notes/task-1.md.",
        priority="medium",
        acceptance_criteria=["notes/task-1.md exists"],
    )
    (repo / ".gitignore").write_text(".scaffold/\n__pycache__/\n", encoding="utf-8")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "benchmark project")


@dataclass
class OrchRound:
    variant: str
    round: int
    wall_s: float
    exit_code: int
    merged: bool
    runs: list[RunTimes]
    marks: list[tuple[float, str, str]]


def run_orchestrator(bench: Bench, round_no: int) -> OrchRound:
    repo = bench.root / f"orch-{round_no:03d}"
    build_repo(repo, bench.claude)
    config = load_config(repo)
    reporter = TimedReporter()
    env = bench.env()
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)  # the orchestrator's agents inherit os.environ

    async def go() -> tuple[int, bool]:
        writer = open_or_create_quest(repo, None)
        report = await run_quest(repo, config, writer, reporter)
        merged = all(t.outcome == "merged" for t in writer.quest.tasks.values())
        return report.exit_code, merged

    try:
        with timed_run_agent(round_no) as runs:
            t0 = time.perf_counter()
            code, merged = asyncio.run(go())
            wall = time.perf_counter() - t0
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    return OrchRound(ORCH, round_no, wall, code, merged, runs, reporter.marks)


# --------------------------------------------------------------------------- analysis


def attach_requests(runs: list[RunTimes], server: MessagesServer) -> None:
    by_session: dict[str, list[float]] = {}
    for req in server.requests:
        if req.session_id:
            by_session.setdefault(req.session_id, []).append(req.received_at)
    for run in runs:
        run.requests = sorted(by_session.get(run.session_id or "", []))


def stats(xs: list[float]) -> dict[str, Any]:
    xs = [x for x in xs if x is not None]
    if not xs:
        return {"n": 0, "median_ms": None, "min_ms": None, "max_ms": None}
    return {
        "n": len(xs),
        "median_ms": 1000 * statistics.median(xs),
        "min_ms": 1000 * min(xs),
        "max_ms": 1000 * max(xs),
    }


# (key, label, from, to)
SPANS = (
    ("spawn_to_first_event", "spawn -> first stdout line / on_event", "spawn", "first_event"),
    ("spawn_to_first_request", "spawn -> first API request (server log)", "spawn", "req0"),
    ("last_request_to_result", "last API request -> result event", "reqN", "result"),
    ("result_to_exit", "result -> CLI exits (the CLI's own tail)", "result", "exit"),
    ("exit_to_end", "CLI exits -> caller free (wait / run_agent returns)", "exit", "end"),
    ("result_to_end", "result -> caller free (slot busy after result)", "result", "end"),
    ("spawn_to_exit", "total: spawn -> CLI exits", "spawn", "exit"),
    ("spawn_to_end", "total: spawn -> caller free", "spawn", "end"),
)

# Hand-off stages in the orchestrator: (key, label)
HANDOFF = (
    ("result_to_exit", "result -> CLI exits (the CLI's own tail)"),
    ("exit_to_returned", "-> run_agent returns (reap, group check, drain)"),
    ("returned_to_finished", "-> 'agent finished' (its end applied; the commit runs beside)"),
    ("finished_to_started", "-> next 'agent started' (events, Ward, quest writes)"),
    ("started_to_spawn", "-> next agent let through (sandbox made, commit done, gate)"),
)


def span_values(runs: list[RunTimes], a: str, b: str) -> list[float]:
    return [v for r in runs if (v := r.span(a, b)) is not None]


def handoffs(rounds: list[OrchRound]) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {"result_to_next_spawn": [], "request_gap": []}
    out.update({key: [] for key, _ in HANDOFF})
    out["next_spawn_to_first_event"] = []
    for rnd in rounds:
        runs = sorted(rnd.runs, key=lambda r: r.spawn)
        for prev, nxt in itertools.pairwise(runs):
            if prev.result is None:
                continue
            out["result_to_next_spawn"].append(nxt.spawn - prev.result)
            if nxt.first_event is not None:
                out["next_spawn_to_first_event"].append(nxt.first_event - nxt.spawn)
            if prev.requests and nxt.requests:
                out["request_gap"].append(nxt.requests[0] - prev.requests[-1])
            window = [(t, w) for t, _, w in rnd.marks if prev.result <= t <= nxt.spawn]
            finished = next((t for t, w in window if w == f"finished:{prev.role}"), None)
            started = next((t for t, w in reversed(window) if w == f"started:{nxt.role}"), None)
            if prev.exit is None or prev.end is None or finished is None or started is None:
                continue
            for key, a, b in (
                ("result_to_exit", prev.result, prev.exit),
                ("exit_to_returned", prev.exit, prev.end),
                ("returned_to_finished", prev.end, finished),
                ("finished_to_started", finished, started),
                ("started_to_spawn", started, nxt.spawn),
            ):
                out[key].append(b - a)
    return out


def orchestrator_summary(
    rounds: list[OrchRound],
    single_runs: list[RunTimes],
    bare_tail_ms: float | None,
    bare_total_ms: float | None,
) -> dict[str, Any]:
    """``single_runs``: one run each the way the orchestrator starts its agents (the
    ``scaffold`` variant), whose start-up and tail the hand-off estimate takes away."""
    hand = handoffs(rounds)
    startup = statistics.median(span_values(single_runs, "spawn", "req0") or [0.0])
    tail_in = statistics.median(span_values(single_runs, "reqN", "result") or [0.0])
    estimate = [g - startup - tail_in for g in hand["request_gap"]]
    runs = [r for rnd in rounds for r in rnd.runs]
    handoff = stats(hand["result_to_next_spawn"])
    walls = [rnd.wall_s for rnd in rounds]
    three = 3 * bare_total_ms / 1000 if bare_total_ms else None
    return {
        "rounds": len(rounds),
        "rounds_merged": sum(1 for rnd in rounds if rnd.merged),
        "agent_runs": len(runs),
        "handoff_result_to_next_spawn": handoff,
        "handoff_stages": {key: stats(hand[key]) for key, _ in HANDOFF},
        "handoff_from_request_log": {
            "request_gap": stats(hand["request_gap"]),
            "estimate": stats(estimate),
            "single_spawn_to_first_request_ms": 1000 * startup,
            "single_last_request_to_result_ms": 1000 * tail_in,
        },
        "ratio_handoff_to_bare_result_to_exit": (
            handoff["median_ms"] / bare_tail_ms if handoff["median_ms"] and bare_tail_ms else None
        ),
        "agent_spawn_to_first_event": stats(span_values(runs, "spawn", "first_event")),
        "agent_result_to_exit": stats(span_values(runs, "result", "exit")),
        "agent_result_to_end": stats(span_values(runs, "result", "end")),
        "agent_spawn_to_end": stats(span_values(runs, "spawn", "end")),
        "wall_s": {
            "median": statistics.median(walls),
            "min": min(walls),
            "max": max(walls),
            "three_bare_runs_median": three,
        },
        "ratio_wall_to_three_bare_runs": statistics.median(walls) / three if three else None,
        "group_stops": sorted({str(r.stop) for r in runs}),
    }


def analyse(singles: list[RunTimes], rounds: list[OrchRound]) -> dict[str, Any]:
    variants = [v for v in VARIANTS if any(r.variant == v for r in singles)]
    by_variant = {v: [r for r in singles if r.variant == v and r.ok] for v in variants}
    spans: dict[str, dict[str, Any]] = {}
    for key, _, a, b in SPANS:
        spans[key] = {v: stats(span_values(runs, a, b)) for v, runs in by_variant.items()}
        bare = spans[key]["bare"]["median_ms"]
        ratios = {}
        for v in variants:
            if v in ("bare", NO_MCP):
                continue
            other = spans[key][v]["median_ms"]
            ratios[v] = other / bare if bare and other is not None else None
        spans[key]["ratio_to_bare"] = ratios
        alone = spans[key][NO_MCP]["median_ms"] if NO_MCP in variants else None
        spans[key]["ratio_to_no_mcp"] = {
            v: (
                spans[key][v]["median_ms"] / alone if alone and spans[key][v]["median_ms"] else None
            )
            for v in variants
            if v in SCAFFOLD_VARIANTS
        }
    result: dict[str, Any] = {"single_run": spans}
    if UNSANDBOXED in variants and "scaffold" in variants:
        # The sandbox's cost per agent run: the same run through scaffold, with and without.
        result["sandbox_ratio"] = {
            key: (
                spans[key]["scaffold"]["median_ms"] / spans[key][UNSANDBOXED]["median_ms"]
                if spans[key][UNSANDBOXED]["median_ms"] and spans[key]["scaffold"]["median_ms"]
                else None
            )
            for key, _, _, _ in SPANS
        }
    if NO_MCP in variants:

        def extra(key: str) -> float | None:
            bare, alone = spans[key]["bare"]["median_ms"], spans[key][NO_MCP]["median_ms"]
            return None if bare is None or alone is None else bare - alone

        result["signal_server_cost_ms"] = {
            "start_up": extra("spawn_to_first_event"),
            "shutdown": extra("result_to_exit"),
            "total": extra("spawn_to_exit"),
        }
    bare_tail = spans["result_to_exit"]["bare"]["median_ms"]
    bare_total = spans["spawn_to_exit"]["bare"]["median_ms"]
    if rounds:
        single = by_variant.get("scaffold") or by_variant["bare"]
        result[ORCH] = orchestrator_summary(rounds, single, bare_tail, bare_total)
    return result


# --------------------------------------------------------------------------- report


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f}"


def _ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def report(r: dict[str, Any]) -> None:
    analysis = r["analysis"]
    spans = analysis["single_run"]
    variants = list(spans["spawn_to_end"].keys() - {"ratio_to_bare", "ratio_to_no_mcp"})
    variants.sort(key=VARIANTS.index)
    print()
    print(
        f"one claude run, {r['rounds']} rounds: medians in ms (claude {r['claude_version']}, "
        f"{r['machine']['cpus']} CPUs)"
    )
    head = f"{'':<52}" + "".join(f" {v:>12}" for v in variants) + f" {'scaffold/bare':>14}"
    head += f" {'scaffold/no-mcp':>16}"
    print(head)
    print("-" * len(head))
    for key, label, _, _ in SPANS:
        row = spans[key]
        line = f"{label:<52}" + "".join(f" {_ms(row[v]['median_ms']):>12}" for v in variants)
        line += f" {_ratio(row['ratio_to_bare'].get('scaffold')):>14}"
        line += f" {_ratio(row['ratio_to_no_mcp'].get('scaffold')):>16}"
        print(line)
    if "sandbox_ratio" in analysis:
        ratio = analysis["sandbox_ratio"]
        print(
            "sandbox cost per agent run (scaffold / scaffold-nosbx, medians): "
            f"spawn->end {_ratio(ratio.get('spawn_to_end'))}, "
            f"spawn->first event {_ratio(ratio.get('spawn_to_first_event'))}"
        )
    cost = analysis.get("signal_server_cost_ms")
    if cost:
        print(
            f"scaffold's signal endpoint (bare - {NO_MCP}): start-up {_ms(cost['start_up'])} ms, "
            f"shutdown {_ms(cost['shutdown'])} ms, total {_ms(cost['total'])} ms per run"
        )
    print(
        f"bare runs whose process group outlived the CLI: {r['bare_leftover_at_exit']}; "
        f"how run_agent stopped the group: {r['scaffold_group_stops']} (None: gone by itself)"
    )
    orch = [(ORCH, analysis[ORCH])] if ORCH in analysis else []
    if not orch:
        return
    print()
    first = orch[0][1]
    print(
        f"`scaffold run`, one task (Codeweaver, Siegemaster, Lawbringer: 3 claude runs), "
        f"slot 1, {first['rounds']} rounds, {first['rounds_merged']} merged"
    )
    head = f"{'(ms)':<58} {'n':>3} {'median':>7} {'min':>7} {'max':>7}"
    print(head)
    print("-" * len(head))
    rows: list[tuple[str, Callable[[dict[str, Any]], dict[str, Any]]]] = [
        (
            "hand-off: result of agent k -> spawn of agent k+1",
            lambda o: o["handoff_result_to_next_spawn"],
        ),
        *((f"  {label}", (lambda o, k=key: o["handoff_stages"][k])) for key, label in HANDOFF),
        (
            "request log: last request k -> first request k+1",
            lambda o: o["handoff_from_request_log"]["request_gap"],
        ),
        (
            "  minus one scaffold run's start-up and tail: hand-off estimate",
            lambda o: o["handoff_from_request_log"]["estimate"],
        ),
        ("agent spawn -> first event", lambda o: o["agent_spawn_to_first_event"]),
        ("agent result -> CLI exits", lambda o: o["agent_result_to_exit"]),
        ("agent result -> run_agent returns", lambda o: o["agent_result_to_end"]),
        ("agent spawn -> run_agent returns", lambda o: o["agent_spawn_to_end"]),
    ]
    for label, pick in rows:
        s = pick(first)
        line = (
            f"{label:<58} {s['n']:>3} {_ms(s['median_ms']):>7} {_ms(s['min_ms']):>7} "
            f"{_ms(s['max_ms']):>7}"
        )
        print(line)
    for name, o in orch:
        wall = o["wall_s"]
        print(
            f"{name}: hand-off / bare result -> exit (a bare pool's floor) "
            f"{_ratio(o['ratio_handoff_to_bare_result_to_exit'])}; whole run wall median "
            f"{wall['median']:.2f} s vs 3 bare runs {_ratio(wall['three_bare_runs_median'])} s "
            f"(ratio {_ratio(o['ratio_wall_to_three_bare_runs'])})"
        )


# --------------------------------------------------------------------------- main


def claude_version(claude: str) -> str:
    done = subprocess.run([claude, "--version"], capture_output=True, text=True, check=False)
    return done.stdout.strip().split(" ")[0] if done.returncode == 0 else "?"


def measure(args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    claude = find_claude()
    home, work = tmp / "home", tmp / "work"
    home.mkdir()
    work.mkdir()
    _git(work, "init", "-q", "-b", "main")
    config = parse_config(
        f"agent:\n  command: [{json.dumps(claude)}]\n  stuck_timeout_s: 120\nward: []\n"
    )
    singles: list[RunTimes] = []
    rounds: list[OrchRound] = []
    failures: list[str] = []
    order = list(VARIANTS)
    if not args.no_orchestrator:
        order.append(ORCH)
    with MessagesServer(script()) as server:
        bench = Bench(claude, server, home, work, tmp, config)
        print(f"claude: {claude}; server {server.base_url}; warm-up ...", flush=True)
        for variant in (v for v in order if v != ORCH):
            warm = bench.run(variant, 0)
            if not warm.ok:
                raise SystemExit(f"warm-up {variant} run failed: {warm.detail}")
        for n in range(1, args.rounds + 1):
            shift = (n - 1) % len(order)
            line = []
            for variant in order[shift:] + order[:shift]:
                if variant == ORCH:
                    rnd = run_orchestrator(bench, n)
                    rounds.append(rnd)
                    line.append(f"{variant} {rnd.wall_s:.2f}s")
                    if not rnd.merged or len(rnd.runs) != len(ORCH_ROLES):
                        failures.append(
                            f"round {n}: {variant} exit {rnd.exit_code}, "
                            f"merged {rnd.merged}, {len(rnd.runs)} agent runs"
                        )
                    continue
                times = bench.run(variant, n)
                singles.append(times)
                line.append(f"{variant} {times.span('spawn', 'end') or float('nan'):.2f}s")
                if not times.ok:
                    failures.append(f"round {n}: {variant} failed: {times.detail}")
            print(f"round {n}: " + ", ".join(line), flush=True)
        server.check()
        attach_requests(singles, server)
        attach_requests([r for rnd in rounds for r in rnd.runs], server)
    for f in failures:
        print(f"WARNING: {f}")
    return {
        "rounds": args.rounds,
        "claude_version": claude_version(claude),
        "failures": failures,
        "bare_leftover_at_exit": sum(
            1 for r in singles if r.variant.startswith("bare") and r.leftover
        ),
        "scaffold_group_stops": sorted({str(r.stop) for r in singles if r.variant == "scaffold"}),
        "analysis": analyse(singles, rounds),
        "raw": {
            "single_runs": [_raw(r) for r in singles],
            "orchestrator_rounds": [
                {
                    "variant": rnd.variant,
                    "round": rnd.round,
                    "wall_s": rnd.wall_s,
                    "exit_code": rnd.exit_code,
                    "merged": rnd.merged,
                    "runs": [_raw(r) for r in rnd.runs],
                }
                for rnd in rounds
            ],
        },
    }


def _raw(r: RunTimes) -> dict[str, Any]:
    """A run's stamps relative to its spawn, in ms."""
    rel = {
        name: None if (v := r.span("spawn", name)) is None else round(1000 * v, 1)
        for name in ("first_event", "req0", "reqN", "result", "exit", "end")
    }
    return {
        "variant": r.variant,
        "round": r.round,
        "role": r.role,
        "ok": r.ok,
        "requests": len(r.requests),
        "stop": r.stop,
        "leftover": len(r.leftover),
        **rel,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rounds", type=int, default=None, help="rounds (default 5; quick 2)")
    parser.add_argument("--quick", action="store_true", help="2 rounds unless --rounds")
    parser.add_argument(
        "--no-orchestrator", action="store_true", help="single runs only (no `scaffold run`)"
    )
    parser.add_argument("--keep", action="store_true", help="keep the temp directory")
    args = parser.parse_args()
    if args.rounds is None:
        args.rounds = 2 if args.quick else 5
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    tmp = Path(tempfile.mkdtemp(prefix="bench-agent-"))
    try:
        result = measure(args, tmp)
    finally:
        if args.keep:
            print(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    result["when"] = datetime.now(UTC).isoformat(timespec="seconds")
    result["machine"] = {
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "loadavg_at_end": os.getloadavg(),
    }
    report(result)
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / "agent_overhead.json"
    data: dict[str, Any] = json.loads(out.read_text("utf-8")) if out.exists() else {}
    key = ("quick, " if args.quick else "") + f"rounds {args.rounds}"
    if args.no_orchestrator:
        key += ", no orchestrator"
    data[key] = result
    out.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    print(f"\nwrote {out}")


if __name__ == "__main__":
    main()
