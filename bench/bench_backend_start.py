"""Benchmark: spawn -> first model request of each agent CLI, through scaffold and bare.

One rig per backend (``--backend claude|codex|gemini``, or ``all`` for each in turn).
Every run talks to that backend's scripted model server on loopback (test support:
``tests/claude/messages_server.py``, ``tests/codex/responses_server.py``,
``tests/gemini/gemini_server.py``), which answers a run's first request with a
``signal-back complete`` call and the next with text, and to a real ``signal-back``
endpoint of its own. So every run is a whole Codeweaver run, but only its start is compared.

Variants, interleaved round by round (the order rotates each round, after one unrecorded
warm-up run of each):

- **bare**: the CLI as a user would script it by hand, with the same MCP server (served
  by this process from a thread) and the fewest settings that keep it offline, started
  with :func:`subprocess.run`:

  - claude: ``claude -p <prompt> --output-format stream-json --verbose --mcp-config
    <file> --strict-mcp-config --allowedTools mcp__scaffold__signal-back``;
  - codex: ``codex exec --json --skip-git-repo-check <prompt>``, its ``CODEX_HOME``
    holding a ``config.toml`` with a custom provider and the ``scaffold`` server;
  - gemini: ``gemini -p <prompt> -o stream-json -m <model> --skip-trust
    --allowed-mcp-server-names scaffold``, its ``HOME`` holding a ``settings.json`` with
    API-key auth and the ``scaffold`` server.

- **bare-norelaunch** (gemini only): the same with ``GEMINI_CLI_NO_RELAUNCH=true``, which
  scaffold sets. As shipped the Gemini CLI relaunches itself as a child node process,
  so this is the fairer reference for scaffold.
- **scaffold**: an agent run as ``AgentJobs._run_here`` (``runtime/agent_jobs.py``)
  makes it, minus the quest bookkeeping: the run's :class:`RunChannel` (signal endpoint
  on this event loop), :func:`prepare_run` (the backend's argv, environment and files),
  :func:`run_agent` with the backend's parser, an ``on_event`` that checks the start
  (``start_problem``) and ``watch_signal`` beside it. No sandbox.
- **scaffold-sandboxed**: the same in scaffold's bubblewrap sandbox (egress gate, bridge
  to the signal endpoint), not gated: the sandbox is made after the spawn.

*spawn* is taken just before ``subprocess.run`` / ``run_agent``, after the run's files
are written (scaffold's own preparation is measured apart as ``prepare``); *first
request* is the server's arrival stamp (``time.time()``) of the run's first model
request. The figure is ``scaffold / bare`` of the medians (target: at most 1.10); the
other ratios and the median of the per-round ratios are reported beside it.

Usage::

    .venv/bin/python bench/bench_backend_start.py --backend all          # 7 rounds each
    .venv/bin/python bench/bench_backend_start.py --backend gemini --rounds 3

Checked with (the servers are test modules; ``tests/harness.py`` is not strict-clean)::

    MYPYPATH=bench:tests:tests/claude:tests/codex:tests/gemini \
        .venv/bin/mypy --strict --follow-imports=silent bench/bench_backend_start.py

Results: ``bench/results/backend_start_<backend>.json``, one file per backend, with the
1-minute load average at each round. A busy machine inflates every figure: compare the
variants of one run, not runs.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from results_file import write_result

from scaffold.agent.choice import agent_for
from scaffold.agent.gemini import Gemini
from scaffold.agent.process import AgentSpec, agent_environment, run_agent
from scaffold.agent.process_group import LiveChildren
from scaffold.agent.stream import Event, SystemInit
from scaffold.config import AgentConfig, BackendName, SandboxConfig, ScaffoldConfig
from scaffold.quest.model import AgentRun
from scaffold.roles import Role
from scaffold.runtime.agent_runs import (
    agent_env,
    prepare_run,
    start_problem,
    watch_signal,
    write_run_files,
)
from scaffold.runtime.prompts import PromptData, build_prompt
from scaffold.runtime.run_channel import RunChannel
from scaffold.sandbox.confinement import Confinement
from scaffold.sandbox.settings import Sandbox, resolve_sandbox
from scaffold.signal_back.records import Binding, latest_signal

REPO = Path(__file__).resolve().parents[1]
# The scripted servers are test support: this script is run, never imported.
sys.path.insert(0, str(REPO / "tests"))
from harness import find_tool, served_tools  # noqa: E402

STEP = "TASK-900"
ROLE = Role.CODEWEAVER
DATA = PromptData(step_id=STEP, task_title="Benchmark task", task_description="Report back.")
TARGET = 1.10
BARE, SCAFFOLD, SANDBOXED = "bare", "scaffold", "scaffold-sandboxed"

# (run folder, signal url, signal secret, prompt) -> (argv, env additions, files to write)
BareCommand = Callable[[Path, str, str, str], tuple[list[str], dict[str, str], dict[Path, str]]]


@dataclass
class Rig:
    """What one backend needs here: its scripted server, and its bare command line."""

    backend: BackendName
    program: str  # the CLI's path
    server: Any  # the scripted server, running for the whole bench
    env: dict[str, str]  # the model host and key (and quiet settings), as a user sets them
    bare: BareCommand
    # Other bare references: variant name -> environment additions to the bare run.
    references: dict[str, dict[str, str]] = field(default_factory=dict)

    @property
    def variants(self) -> list[str]:
        return [BARE, *self.references, SCAFFOLD, SANDBOXED]


@dataclass
class Run:
    """One run's figures (seconds since the epoch, as the servers stamp requests)."""

    variant: str
    round_no: int
    spawn: float
    first_request: float | None
    end: float
    ok: bool
    detail: str = ""
    prepare_s: float | None = None

    @property
    def to_first_request(self) -> float | None:
        return None if self.first_request is None else self.first_request - self.spawn


def _program(name: str) -> str:
    found = find_tool(name, f"SCAFFOLD_{name.upper()}_BIN")
    if found is None:
        raise SystemExit(f"the {name} CLI is required: ./scripts/install --test")
    return found


# --------------------------------------------------------------------------- claude


@contextmanager
def claude_rig() -> Iterator[Rig]:
    sys.path.insert(0, str(REPO / "tests" / "claude"))
    from messages_server import SIGNAL_TOOL, MessagesServer, When, chain, signal_back

    program = _program("claude")
    script = chain(signal_back("complete", summary="benchmark"), when=When(), name="bench")
    with MessagesServer(script) as server:
        env = {
            "ANTHROPIC_BASE_URL": server.base_url,
            "ANTHROPIC_API_KEY": "sk-bench",
            # Offline and quiet, and the MCP server connected before the first request
            # (as scaffold runs it): what the tests set for the real CLI.
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "DISABLE_TELEMETRY": "1",
            "DISABLE_AUTOUPDATER": "1",
            "MCP_CONNECTION_NONBLOCKING": "0",
        }

        def bare(
            folder: Path, url: str, secret: str, prompt: str
        ) -> tuple[list[str], dict[str, str], dict[Path, str]]:
            config = folder / "mcp.json"
            entry = {"type": "http", "url": url, "headers": {"Authorization": f"Bearer {secret}"}}
            argv = [program, "-p", prompt, "--output-format", "stream-json", "--verbose"]
            argv += ["--mcp-config", str(config), "--strict-mcp-config"]
            argv += ["--allowedTools", SIGNAL_TOOL]
            return argv, {}, {config: json.dumps({"mcpServers": {"scaffold": entry}})}

        yield Rig("claude", program, server, env, bare)


# --------------------------------------------------------------------------- codex


@contextmanager
def codex_rig() -> Iterator[Rig]:
    sys.path.insert(0, str(REPO / "tests" / "codex"))
    from responses_server import ResponsesServer, When, chain, signal_back

    program = _program("codex")
    script = chain(signal_back("complete", summary="benchmark"), when=When(), name="bench")
    with ResponsesServer(script) as server:
        env = {"OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": "sk-bench"}

        def bare(
            folder: Path, url: str, secret: str, prompt: str
        ) -> tuple[list[str], dict[str, str], dict[Path, str]]:
            home = folder / "codex-home"
            config = "\n".join(
                [
                    'model = "gpt-5.5"',
                    'model_provider = "local"',
                    "[model_providers.local]",
                    'name = "local"',
                    f'base_url = "{server.base_url}"',
                    'wire_api = "responses"',
                    'env_key = "OPENAI_API_KEY"',
                    "[features]",
                    "plugins = false",
                    "[analytics]",
                    "enabled = false",
                    "[mcp_servers.scaffold]",
                    f'url = "{url}"',
                    'bearer_token_env_var = "SIGNAL_TOKEN"',
                    "required = true",
                    'default_tools_approval_mode = "approve"',
                    "",
                ]
            )
            argv = [program, "exec", "--json", "--skip-git-repo-check", prompt]
            return (
                argv,
                {"CODEX_HOME": str(home), "SIGNAL_TOKEN": secret},
                {home / "config.toml": config},
            )

        yield Rig("codex", program, server, env, bare)


# --------------------------------------------------------------------------- gemini


@contextmanager
def gemini_rig() -> Iterator[Rig]:
    sys.path.insert(0, str(REPO / "tests" / "gemini"))
    from gemini_server import GeminiServer, When, chain, signal_back

    program = _program("gemini")
    script = chain(signal_back("complete", summary="benchmark"), when=When(), name="bench")
    with GeminiServer(script) as server:
        env = {"GOOGLE_GEMINI_BASE_URL": server.base_url, "GEMINI_API_KEY": "bench"}

        def bare(
            folder: Path, url: str, secret: str, prompt: str
        ) -> tuple[list[str], dict[str, str], dict[Path, str]]:
            home = folder / "home"
            headers = {"Authorization": f"Bearer {secret}"}
            settings = {
                "security": {"auth": {"selectedType": "gemini-api-key"}},
                "privacy": {"usageStatisticsEnabled": False},
                "mcpServers": {"scaffold": {"httpUrl": url, "headers": headers}},
            }
            argv = [program, "-p", prompt, "-o", "stream-json", "-m", Gemini.default_model]
            argv += ["--skip-trust", "--allowed-mcp-server-names", "scaffold"]
            return (
                argv,
                {"HOME": str(home)},
                {home / ".gemini" / "settings.json": json.dumps(settings)},
            )

        references = {"bare-norelaunch": {"GEMINI_CLI_NO_RELAUNCH": "true"}}
        yield Rig("gemini", program, server, env, bare, references)


RIGS: Mapping[str, Callable[[], AbstractContextManager[Rig]]] = {
    "claude": claude_rig,
    "codex": codex_rig,
    "gemini": gemini_rig,
}


# --------------------------------------------------------------------------- runs


@dataclass
class Bench:
    """One backend's bench: its rig, a git repository to run in, a shared HOME."""

    rig: Rig
    root: Path
    sandboxes: dict[str, Sandbox]  # variant -> the sandbox its scaffold runs get

    @property
    def work(self) -> Path:
        return self.root / "work"

    def env(self) -> dict[str, str]:
        """A hermetic environment: PATH, a HOME of the bench's own, the rig's settings."""
        env = {"PATH": os.environ.get("PATH", os.defpath), "HOME": str(self.root / "home")}
        for name in ("LANG", "LC_ALL"):
            if name in os.environ:
                env[name] = os.environ[name]
        return {**env, **self.rig.env}

    def first_request(self, spawn: float, end: float) -> float | None:
        times = [r.received_at for r in self.rig.server.requests if spawn <= r.received_at <= end]
        return min(times) if times else None

    def run(self, variant: str, round_no: int) -> Run:
        folder = self.root / "runs" / f"{round_no:02d}-{variant}"
        signal_dir = folder / "signals"
        signal_dir.mkdir(parents=True)
        binding = Binding(signal_dir, STEP, ROLE, "bench", self.work)
        if variant in (SCAFFOLD, SANDBOXED):
            run = asyncio.run(self.run_scaffold(variant, round_no, folder, binding))
        else:
            run = self.run_bare(variant, round_no, folder, binding)
        run.first_request = self.first_request(run.spawn, run.end)
        if run.ok and latest_signal(signal_dir) is None:
            run.ok, run.detail = False, "no signal"
        if run.ok and run.first_request is None:
            run.ok, run.detail = False, "no model request"
        return run

    def run_bare(self, variant: str, round_no: int, folder: Path, binding: Binding) -> Run:
        prompt = build_prompt(ROLE, AgentRun(role=ROLE), DATA)
        with served_tools(binding) as mcp:
            entry = mcp["mcpServers"]["scaffold"]
            secret = entry["headers"]["Authorization"].removeprefix("Bearer ")
            argv, extra, files = self.rig.bare(folder, entry["url"], secret, prompt)
            write_run_files(files)
            env = {**self.env(), **extra, **self.rig.references.get(variant, {})}
            spawn = time.time()
            proc = subprocess.run(
                argv,
                cwd=self.work,
                env=env,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=300,
                check=False,
            )
            end = time.time()
        ok = proc.returncode == 0
        detail = "" if ok else f"exit {proc.returncode}: {proc.stderr[-300:]!r}"
        return Run(variant, round_no, spawn, None, end, ok, detail)

    async def run_scaffold(
        self, variant: str, round_no: int, folder: Path, binding: Binding
    ) -> Run:
        cfg = ScaffoldConfig(
            agent=AgentConfig(backend=self.rig.backend, command=(self.rig.program,))
        )
        private = folder / "private"
        confinement = Confinement(
            repo=self.work, cwd=self.work, private=private, worktree=self.work
        )
        base_env = agent_environment(self.env(), {})
        channel = RunChannel(
            self.sandboxes[variant],
            binding,
            confinement,
            python=sys.executable,
            env=base_env,
            model_host=agent_for(cfg.agent, ROLE).backend.model_host(base_env),
        )
        async with channel:
            began = time.time()
            prepared = prepare_run(
                cfg,
                AgentRun(role=ROLE),
                DATA,
                quest_id="bench",
                signal_dir=binding.signal_dir,
                signal=channel.signal,
                home=private / "home",
                env=base_env,
                sandboxed=channel.sandbox.active,
            )
            write_run_files(prepared.invocation.files)
            argv, env = channel.wrap(prepared.invocation.argv, agent_env(base_env, prepared))
            spec = AgentSpec(
                argv=argv,
                cwd=self.work,
                base_env=env,
                stuck_timeout_s=120,
                parse=prepared.parse,
            )
            prepare_s = time.time() - began
            stop = asyncio.Event()
            refused: list[str] = []

            async def on_event(ev: Event) -> None:
                if isinstance(ev, SystemInit) and (problem := start_problem(prepared, None, ev)):
                    refused.append(problem)
                    stop.set()

            spawn = time.time()
            agent = asyncio.create_task(
                run_agent(spec, on_event=on_event, children=LiveChildren(), stop_requested=stop)
            )
            watcher = asyncio.create_task(watch_signal(channel.signalled, stop))
            try:
                outcome = await agent
            finally:
                watcher.cancel()
            end = time.time()
        ok = outcome.ok and not refused
        detail = "" if ok else f"exit {outcome.exit_code} {refused}: {outcome.stderr_tail[-300:]!r}"
        return Run(variant, round_no, spawn, None, end, ok, detail, prepare_s)


# --------------------------------------------------------------------------- figures


def _ms(values: list[float]) -> dict[str, Any]:
    if not values:
        return {"n": 0}
    return {
        "n": len(values),
        "median_ms": statistics.median(values) * 1000,
        "min_ms": min(values) * 1000,
        "max_ms": max(values) * 1000,
    }


def analyse(variants: list[str], runs: list[Run]) -> dict[str, Any]:
    figures: dict[str, Any] = {}
    medians: dict[str, float] = {}
    for variant in variants:
        good = [r for r in runs if r.variant == variant and r.ok]
        starts = [r.to_first_request for r in good if r.to_first_request is not None]
        figures[variant] = {
            "spawn_to_first_request": _ms(starts),
            "spawn_to_end": _ms([r.end - r.spawn for r in good]),
            "failed": sum(1 for r in runs if r.variant == variant and not r.ok),
        }
        if variant in (SCAFFOLD, SANDBOXED):
            figures[variant]["prepare"] = _ms([r.prepare_s for r in good if r.prepare_s])
        if starts:
            medians[variant] = statistics.median(starts)
    references = [v for v in variants if v not in (SCAFFOLD, SANDBOXED)]
    ratios = {
        f"{ours} / {theirs}": round(medians[ours] / medians[theirs], 3)
        for ours in (SCAFFOLD, SANDBOXED)
        for theirs in references
        if ours in medians and theirs in medians
    }
    # Each round's runs sat side by side: the median of the per-round ratios.
    per_round: dict[str, float] = {}
    for theirs in references:
        paired = []
        for n in sorted({r.round_no for r in runs}):
            starts_of = {r.variant: r.to_first_request for r in runs if r.round_no == n and r.ok}
            ours_s, theirs_s = starts_of.get(SCAFFOLD), starts_of.get(theirs)
            if ours_s and theirs_s:
                paired.append(ours_s / theirs_s)
        if paired:
            per_round[f"{SCAFFOLD} / {theirs}"] = round(statistics.median(paired), 3)
    headline = ratios.get(f"{SCAFFOLD} / {BARE}")
    return {
        "variants": figures,
        "ratio_first_request": headline,
        "ratios_of_medians": ratios,
        "per_round_ratio_medians": per_round,
        "target": TARGET,
    }


# --------------------------------------------------------------------------- main


def bench(backend: str, rounds: int) -> dict[str, Any]:
    runs: list[Run] = []
    load: list[float] = []
    with RIGS[backend]() as rig, tempfile.TemporaryDirectory(prefix="bench-start-") as tmp:
        root = Path(tmp)
        (root / "home").mkdir()
        (root / "work").mkdir()
        subprocess.run(["git", "init", "-q", str(root / "work")], check=True)
        (root / "work" / "README.md").write_text("# bench\n", encoding="utf-8")
        sandboxes = {
            SCAFFOLD: resolve_sandbox(SandboxConfig(mode="off"), strict=False),
            SANDBOXED: resolve_sandbox(SandboxConfig(mode="bwrap"), strict=False),
        }
        b = Bench(rig, root, sandboxes)
        variants = rig.variants
        print(f"{backend}: {rig.program}; warm-up ...", flush=True)
        for variant in variants:  # warm-up (page cache, node's compile cache), unrecorded
            warm = b.run(variant, 0)
            if not warm.ok:
                raise SystemExit(f"{backend}: warm-up {variant} failed: {warm.detail}")
        for n in range(1, rounds + 1):
            load.append(round(os.getloadavg()[0], 2))
            shift = n % len(variants)
            for variant in variants[shift:] + variants[:shift]:
                run = b.run(variant, n)
                runs.append(run)
                start = run.to_first_request
                shown = f"{start * 1000:7.0f} ms" if start is not None else "    n/a"
                print(f"{backend} round {n} {variant:18s} {shown} {run.detail}", flush=True)
        problems = list(rig.server.problems)  # requests the script could not answer
        version = subprocess.run(
            [rig.program, "--version"], capture_output=True, text=True, check=False
        ).stdout.strip()
    return {
        "backend": backend,
        "version": version,
        "rounds": rounds,
        **analyse(variants, runs),
        "loadavg_1m_by_round": load,
        "failures": [f"round {r.round_no} {r.variant}: {r.detail}" for r in runs if not r.ok],
        "server_problems": problems,
        "runs": [
            {"variant": r.variant, "round": r.round_no, "first_request_ms": _round_ms(r)}
            for r in runs
        ],
    }


def _round_ms(run: Run) -> float | None:
    start = run.to_first_request
    return None if start is None else round(start * 1000, 1)


def _table_line(result: dict[str, Any]) -> str:
    figures = result["variants"]

    def median(variant: str) -> str:
        value = figures.get(variant, {}).get("spawn_to_first_request", {}).get("median_ms")
        return f"{value:8.0f}" if value is not None else "     n/a"

    others = ", ".join(f"{k} {v:.2f}" for k, v in result["ratios_of_medians"].items())
    load = result["loadavg_1m_by_round"]
    return (
        f"{result['backend']:7s} {median(BARE)} {median(SCAFFOLD)} {median(SANDBOXED)} "
        f"{result['ratio_first_request'] or float('nan'):6.2f} {result['rounds']:6d} "
        f"{min(load):5.1f}-{max(load):<5.1f}  {others}"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--backend", choices=[*RIGS, "all"], default="all")
    ap.add_argument("--rounds", type=int, default=7)
    args = ap.parse_args()
    backends = list(RIGS) if args.backend == "all" else [args.backend]
    lines = []
    for backend in backends:
        result = bench(backend, args.rounds)
        out = write_result(f"backend_start_{backend}", result)
        print(f"{backend}: written to {out}", flush=True)
        lines.append(_table_line(result))
    print("\nspawn -> first model request, medians in ms (ratio: scaffold / bare)")
    print("backend     bare scaffold  sandbox  ratio rounds load    other ratios")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
