"""Benchmark: spawn -> first model request of one agent CLI, through scaffold and bare.

One backend per run (``--backend``). Every run talks to that backend's scripted model
server on loopback (test support under ``tests/<backend>/``), which answers the first
request with a ``signal-back complete`` call and the next with text, and to a real
``signal-back`` endpoint served by this process (a thread of its own). Two variants,
interleaved round by round (the order alternates, after one unrecorded warm-up of each):

- **bare**: the CLI as a user would script it by hand, with the same MCP server and the
  fewest settings that keep it offline, started with :class:`subprocess.Popen`;
- **scaffold**: the invocation scaffold prepares (:func:`~scaffold.runtime.agent_runs.
  prepare_run`: the backend's argv, environment and files, written as the orchestrator
  writes them) run by :func:`~scaffold.agent.process.run_agent` with the backend's parser
  and an ``on_event`` that checks the start (``start_problem``), without the sandbox.

*spawn* is taken just before ``Popen`` / ``run_agent`` (after the files are written: a
fresh run's files are part of scaffold's preparation, measured apart as ``prepare``);
*first request* is the server's arrival stamp of the run's first model request. The
ratio scaffold / bare of the medians is the figure (target: at most 1.10).

Usage::

    .venv/bin/python bench/bench_backend_start.py --backend codex            # 7 rounds
    .venv/bin/python bench/bench_backend_start.py --backend codex --rounds 3

Results: ``bench/results/backend_start_<backend>.json``. A busy machine inflates every
figure; compare the variants of one run, not runs.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from results_file import write_result

from scaffold.agent.process import AgentSpec, run_agent
from scaffold.agent.stream import Event, SystemInit
from scaffold.config import AgentConfig, ScaffoldConfig
from scaffold.quest.model import AgentRun
from scaffold.roles import Role
from scaffold.runtime.agent_runs import agent_env, prepare_run, start_problem, write_run_files
from scaffold.runtime.prompts import PromptData, build_prompt
from scaffold.signal_back.records import Binding

REPO = Path(__file__).resolve().parents[1]
TOOLS_BIN = REPO / ".tools" / "node_modules" / ".bin"
# The scripted servers are test support: this script is run, never imported.
sys.path.insert(0, str(REPO / "tests"))
from harness import served_tools  # noqa: E402

STEP = "TASK-900"
ROLE = Role.CODEWEAVER
DATA = PromptData(step_id=STEP, task_title="Benchmark task", task_description="Report back.")


@dataclass
class Run:
    """One run's figures (seconds since the epoch, as the server stamps requests)."""

    variant: str
    spawn: float
    first_request: float | None
    end: float
    ok: bool
    prepare_s: float = 0.0


@dataclass
class Rig:
    """What one backend needs here: its scripted server, and its bare command line."""

    program: str
    server: Any  # the scripted server, entered for the whole run
    env: dict[str, str]  # the model host and key, as a user would set them
    # (run folder, signal url, secret, prompt) -> (argv, env additions, files)
    bare: Callable[[Path, str, str, str], tuple[list[str], dict[str, str], dict[Path, str]]]


# --------------------------------------------------------------------------- codex


@contextmanager
def codex_rig() -> Iterator[Rig]:
    sys.path.insert(0, str(REPO / "tests" / "codex"))
    from responses_server import ResponsesServer, When, chain, signal_back

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
            argv = [_program("codex"), "exec", "--json", "--skip-git-repo-check", prompt]
            return (
                argv,
                {"CODEX_HOME": str(home), "SIGNAL_TOKEN": secret},
                {home / "config.toml": config},
            )

        yield Rig("codex", server, env, bare)


RIGS: Mapping[str, Callable[[], Any]] = {"codex": codex_rig}


def _program(name: str) -> str:
    found = TOOLS_BIN / name
    if found.exists():
        return str(found)
    on_path = shutil.which(name)
    if on_path is None:
        raise SystemExit(f"{name} not found in {TOOLS_BIN} or on PATH")
    return on_path


# --------------------------------------------------------------------------- runs


def _first_request(server: Any, after: float) -> float | None:
    times = [r.received_at for r in server.requests if r.received_at >= after]
    return min(times) if times else None


def run_bare(rig: Rig, folder: Path, mcp: dict[str, Any], env: Mapping[str, str]) -> Run:
    entry = mcp["mcpServers"]["scaffold"]
    secret = entry["headers"]["Authorization"].removeprefix("Bearer ")
    prompt = build_prompt(ROLE, AgentRun(role=ROLE), DATA)
    argv, extra, files = rig.bare(folder, entry["url"], secret, prompt)
    write_run_files(files)
    spawn = time.time()
    proc = subprocess.run(
        argv,
        cwd=folder,
        env={**env, **extra},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=120,
        check=False,
    )
    end = time.time()
    return Run("bare", spawn, _first_request(rig.server, spawn), end, proc.returncode == 0)


def run_scaffold(
    rig: Rig, folder: Path, mcp: dict[str, Any], env: Mapping[str, str], backend: str
) -> Run:
    entry = mcp["mcpServers"]["scaffold"]
    secret = entry["headers"]["Authorization"].removeprefix("Bearer ")
    cfg = ScaffoldConfig(agent=AgentConfig(backend=backend, command=(_program(rig.program),)))
    began = time.time()
    prepared = prepare_run(
        cfg,
        AgentRun(role=ROLE),
        DATA,
        quest_id="bench",
        signal_dir=folder / "signals",
        signal=(entry["url"], secret, folder / "mcp.json"),
        home=folder / "home",
        env=env,
    )
    write_run_files(prepared.invocation.files)
    prepare_s = time.time() - began
    spec = AgentSpec(
        argv=prepared.invocation.argv,
        cwd=folder,
        base_env=agent_env(env, prepared),
        stuck_timeout_s=120,
        parse=prepared.parse,
    )
    refused: list[str] = []

    async def on_event(ev: Event) -> None:
        if isinstance(ev, SystemInit) and (problem := start_problem(prepared, None, ev)):
            refused.append(problem)

    spawn = time.time()
    outcome = asyncio.run(run_agent(spec, on_event=on_event))
    end = time.time()
    ok = outcome.exit_code == 0 and not refused
    first = _first_request(rig.server, spawn)
    return Run("scaffold", spawn, first, end, ok, prepare_s)


def _ms(values: list[float]) -> dict[str, float]:
    return {
        "n": len(values),
        "median_ms": statistics.median(values) * 1000 if values else float("nan"),
        "min_ms": min(values) * 1000 if values else float("nan"),
        "max_ms": max(values) * 1000 if values else float("nan"),
    }


def bench(backend: str, rounds: int) -> dict[str, Any]:
    runs: list[Run] = []
    with RIGS[backend]() as rig, tempfile.TemporaryDirectory(prefix="bench-start-") as tmp:
        root = Path(tmp)
        signals = root / "signals"
        signals.mkdir()
        env = {**os.environ, **rig.env}
        with served_tools(Binding(signals, STEP, ROLE)) as mcp:
            for index in range(rounds + 1):  # round 0 warms up, unrecorded
                order = ("bare", "scaffold") if index % 2 else ("scaffold", "bare")
                for variant in order:
                    folder = root / f"{index:02d}-{variant}"
                    folder.mkdir()
                    if variant == "bare":
                        run = run_bare(rig, folder, mcp, env)
                    else:
                        run = run_scaffold(rig, folder, mcp, env, backend)
                    if index:
                        runs.append(run)
                    first = (
                        f"{(run.first_request - run.spawn) * 1000:7.0f} ms"
                        if run.first_request
                        else "   none"
                    )
                    print(f"round {index} {variant:8s} spawn->first request {first} ok={run.ok}")
        version = subprocess.run(
            [_program(rig.program), "--version"], capture_output=True, text=True, check=False
        ).stdout.strip()
    figures: dict[str, Any] = {}
    for variant in ("bare", "scaffold"):
        mine = [r for r in runs if r.variant == variant and r.ok and r.first_request]
        figures[variant] = {
            "spawn_to_first_request": _ms([r.first_request - r.spawn for r in mine]),  # type: ignore[operator]
            "spawn_to_end": _ms([r.end - r.spawn for r in mine]),
            "failed": sum(1 for r in runs if r.variant == variant and not r.ok),
        }
    prep = [r.prepare_s for r in runs if r.variant == "scaffold"]
    figures["scaffold"]["prepare"] = _ms(prep)
    ratio = (
        figures["scaffold"]["spawn_to_first_request"]["median_ms"]
        / figures["bare"]["spawn_to_first_request"]["median_ms"]
    )
    return {
        "backend": backend,
        "version": version,
        "rounds": rounds,
        "variants": figures,
        "ratio_first_request": round(ratio, 3),
        "target": 1.10,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--backend", choices=sorted(RIGS), default="codex")
    ap.add_argument("--rounds", type=int, default=7)
    args = ap.parse_args()
    result = bench(args.backend, args.rounds)
    out = write_result(f"backend_start_{args.backend}", result)
    bare = result["variants"]["bare"]["spawn_to_first_request"]["median_ms"]
    ours = result["variants"]["scaffold"]["spawn_to_first_request"]["median_ms"]
    print(
        f"{args.backend}: spawn -> first request, median of {args.rounds}: bare {bare:.0f} ms, "
        f"scaffold {ours:.0f} ms, ratio {result['ratio_first_request']:.2f} -> {out}"
    )


if __name__ == "__main__":
    main()
