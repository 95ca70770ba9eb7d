"""Benchmark: scaffold's stream-json reader against claude-agent-sdk's own parser.

Both read the same synthetic transcript of realistic Claude Code 2.1.x stream-json
lines (assistant text and tool_use, user tool_result, occasional init and result;
each line 200 B to 20 KB, log-uniform, with escapes and non-ASCII text):

- scaffold: `StreamDecoder().feed` on 64 KiB chunks: bytes framing,
  `json` decoding, typed events and the running `StreamSummary`.
- claude-agent-sdk: the path its subprocess transport takes for every stdout chunk,
  driven from a file instead of a pipe: 64 KiB chunks through an incremental UTF-8
  decoder (what anyio's TextReceiveStream does), `_LineFramer.push`, the 1 MB buffer
  guard, `_parse_stdout_line` (strip + `json.loads`) and `parse_message` (typed
  messages). Its async plumbing (one await per chunk) is left out for both sides.
- floor: split the chunks on newlines and `json.loads` each line, nothing else; the
  cost no reader can avoid.
- scaffold_run_agent_pipe: `run_agent` on `cat <file>`: the same reader behind a real
  pipe and the asyncio pump, as in production.

Throughput is best-of-N wall time per reader (runs interleaved), in MB/s, and the
ratio scaffold/sdk. Memory is the peak RSS (ru_maxrss) of a fresh child process that
reads a transcript of `--small-mb` and one of `--big-mb`: a streaming reader's peak must
not grow with the file. A transcript with one `--giant-line-mb` line checks that an
over-long line is discarded without being held (the SDK refuses such a line with an
error, so only scaffold reads that one).

    .venv/bin/python bench/bench_stream.py                      # 200 MB, 100 MB vs 1 GB
    .venv/bin/python bench/bench_stream.py --mb 20 --small-mb 10 --big-mb 50 --giant-line-mb 16

Results go to stdout and, as JSON, to ``bench/results/stream.json`` (``--no-save``
to skip).
"""

from __future__ import annotations

import argparse
import asyncio
import codecs
import json
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from scaffold.agent.process import AgentSpec, run_agent
from scaffold.agent.stream import DEFAULT_CHUNK_BYTES, StreamDecoder

MEMORY_READERS = ("scaffold", "sdk", "scaffold_run_agent_pipe")
RESULTS = Path(__file__).resolve().parent / "results" / "stream.json"
MB = 1024 * 1024
POOL = 3000

WORDS = [
    "def",
    "return",
    "self",
    "import",
    "async",
    "await",
    "value",
    "path",
    "worktree",
    "branch",
    "merge",
    "commit",
    "signal-back",
    "résumé",
    "naïve",
    "—",
    "test",
    "assert",
    "None",
    "True",
    "False",
    "{}",
    "[]",
    "()",
    "=>",
    '"quoted"',
    "tab\there",
    "newline\nhere",
    "backslash\\",
    "unicode",
    "✓",
    "emoji",
    "🚀",
    "ok",
]


# --- transcript generation ------------------------------------------------------------


def _text(rng: random.Random, size: int) -> str:
    out: list[str] = []
    n = 0
    while n < size:
        w = rng.choice(WORDS)
        out.append(w)
        n += len(w) + 1
    return " ".join(out)[:size]


def _size(rng: random.Random, lo: int = 200, hi: int = 20_000) -> int:
    return int(lo * (hi / lo) ** rng.random())


def _assistant(rng: random.Random, sid: str) -> dict[str, Any]:
    if rng.random() < 0.6:
        block: dict[str, Any] = {"type": "text", "text": _text(rng, _size(rng, 50, 15_000))}
    else:
        block = {
            "type": "tool_use",
            "id": f"toolu_{uuid.UUID(int=rng.getrandbits(128)).hex[:24]}",
            "name": rng.choice(["Bash", "Edit", "Read", "mcp__scaffold__signal-back"]),
            "input": {
                "command": _text(rng, _size(rng, 20, 400)),
                "old_string": _text(rng, _size(rng, 20, 6000)),
                "new_string": _text(rng, _size(rng, 20, 6000)),
            },
        }
    return {
        "type": "assistant",
        "message": {
            "id": f"msg_{rng.getrandbits(64):016x}",
            "type": "message",
            "role": "assistant",
            "model": "claude-sonnet-4-5-20250929",
            "content": [block],
            "stop_reason": None,
            "usage": {"input_tokens": rng.randrange(10_000), "output_tokens": rng.randrange(900)},
            "context_management": None,
        },
        "parent_tool_use_id": None,
        "session_id": sid,
        "uuid": str(uuid.UUID(int=rng.getrandbits(128))),
    }


def _user(rng: random.Random, sid: str) -> dict[str, Any]:
    content = _text(rng, _size(rng, 50, 9000))
    return {
        "type": "user",
        "message": {
            "role": "user",
            "content": [
                {
                    "tool_use_id": f"toolu_{rng.getrandbits(64):016x}",
                    "type": "tool_result",
                    "content": content,
                    "is_error": rng.random() < 0.05,
                }
            ],
        },
        "parent_tool_use_id": None,
        "session_id": sid,
        "uuid": str(uuid.UUID(int=rng.getrandbits(128))),
        "timestamp": "2026-11-22T02:38:23.311Z",
        "tool_use_result": {
            "stdout": content[: len(content) // 2],
            "stderr": "",
            "interrupted": False,
        },
    }


def _init(rng: random.Random, sid: str) -> dict[str, Any]:
    return {
        "type": "system",
        "subtype": "init",
        "cwd": "/work/repo/.scaffold/worktrees/task-3",
        "session_id": sid,
        "tools": ["Task", "Bash", "Edit", "Read", "Write", "mcp__scaffold__signal-back"],
        "mcp_servers": [{"name": "scaffold", "status": "connected"}],
        "model": "claude-sonnet-4-5-20250929",
        "permissionMode": "default",
        "apiKeySource": "ANTHROPIC_API_KEY",
        "claude_code_version": "2.1.197",
        "uuid": str(uuid.UUID(int=rng.getrandbits(128))),
    }


def _status(rng: random.Random, sid: str) -> dict[str, Any]:
    """A small line of a type scaffold does not model (kept as Unknown)."""
    return {
        "type": "system",
        "subtype": "status",
        "status": rng.choice(["compacting", None]),
        "session_id": sid,
        "uuid": str(uuid.UUID(int=rng.getrandbits(128))),
    }


def _result(rng: random.Random, sid: str) -> dict[str, Any]:
    return {
        "type": "result",
        "subtype": "success",
        "is_error": False,
        "api_error_status": None,
        "duration_ms": rng.randrange(100_000),
        "duration_api_ms": rng.randrange(100_000),
        "num_turns": rng.randrange(1, 40),
        "result": _text(rng, _size(rng, 20, 2000)),
        "stop_reason": "end_turn",
        "session_id": sid,
        "total_cost_usd": rng.random(),
        "usage": {"input_tokens": 240, "output_tokens": 80},
        "permission_denials": [],
        "uuid": str(uuid.UUID(int=rng.getrandbits(128))),
    }


def line_pool(seed: int) -> list[bytes]:
    rng = random.Random(seed)
    sid = str(uuid.UUID(int=rng.getrandbits(128)))
    kinds: list[Callable[[random.Random, str], dict[str, Any]]] = [
        _assistant,
        _user,
        _init,
        _result,
        _status,
    ]
    pool = []
    for _ in range(POOL):
        make = rng.choices(kinds, weights=[48, 44, 2, 2, 4])[0]
        pool.append(json.dumps(make(rng, sid)).encode() + b"\n")
    return pool


def write_transcript(path: Path, size_mb: float, pool: list[bytes], seed: int) -> int:
    rng = random.Random(seed)
    target = int(size_mb * MB)
    written = 0
    with path.open("wb") as fh:
        while written < target:
            batch = rng.choices(pool, k=256)
            data = b"".join(batch)
            fh.write(data)
            written += len(data)
    return written


def write_giant(path: Path, giant_mb: float, pool: list[bytes]) -> int:
    """Normal lines, one line of `giant_mb` (a runaway tool result), normal lines."""
    block = b"x" * MB
    with path.open("wb") as fh:
        fh.write(b"".join(pool[:50]))
        fh.write(b'{"type":"user","message":{"content":"')
        for _ in range(int(giant_mb)):
            fh.write(block)
        fh.write(b'"}}\n')
        fh.write(b"".join(pool[50:100]))
    return path.stat().st_size


# --- readers ----------------------------------------------------------------------------


def read_scaffold(path: Path) -> int:
    dec = StreamDecoder()
    n = 0
    with path.open("rb", buffering=0) as fh:
        while chunk := fh.read(DEFAULT_CHUNK_BYTES):
            n += len(dec.feed(chunk))
    return n + len(dec.finish())


def read_sdk(path: Path) -> int:
    from claude_agent_sdk._internal.message_parser import parse_message
    from claude_agent_sdk._internal.transport.subprocess_cli import (
        _DEFAULT_MAX_BUFFER_SIZE,
        _LineFramer,
        _parse_stdout_line,
    )

    limit = _DEFAULT_MAX_BUFFER_SIZE

    def guard(length: int) -> None:
        if length > limit:
            raise ValueError(f"JSON message exceeded maximum buffer size of {limit} bytes")

    decoder = codecs.getincrementaldecoder("utf-8")()
    framer = _LineFramer()
    n = 0
    with path.open("rb", buffering=0) as fh:
        while chunk := fh.read(DEFAULT_CHUNK_BYTES):
            text = decoder.decode(chunk)
            if not text:
                continue
            for line in framer.push(text):
                guard(len(line))
                data = _parse_stdout_line(line)
                if data is not None and parse_message(data) is not None:
                    n += 1
            guard(framer.pending_len)
    data = _parse_stdout_line(framer.flush())
    if data is not None and parse_message(data) is not None:
        n += 1
    return n


def read_floor(path: Path) -> int:
    loads = json.loads
    n = 0
    tail = b""
    with path.open("rb", buffering=0) as fh:
        while chunk := fh.read(DEFAULT_CHUNK_BYTES):
            lines = (tail + chunk).split(b"\n")
            tail = lines.pop()
            for line in lines:
                loads(line)
                n += 1
    return n


def read_scaffold_pipe(path: Path) -> int:
    """End to end: `run_agent` on `cat <file>`, through a real pipe and the asyncio
    pump (CPU time counts this process only, not cat)."""
    cat = shutil.which("cat") or "/bin/cat"
    spec = AgentSpec(argv=[cat, str(path)], cwd=path.parent, stuck_timeout_s=600)
    events: list[object] = []
    asyncio.run(run_agent(spec, on_event=events.append))
    return len(events)


READERS: dict[str, Callable[[Path], int]] = {
    "scaffold": read_scaffold,
    "sdk": read_sdk,
    "floor": read_floor,
    "scaffold_run_agent_pipe": read_scaffold_pipe,
}


def throughput(path: Path, repeat: int) -> dict[str, dict[str, float]]:
    """Best-of-`repeat` CPU time (the file sits in the page cache, so reading is CPU
    bound; CPU time is less disturbed than wall time by other work on the machine)."""
    size = path.stat().st_size
    best_cpu: dict[str, float] = {}
    best_wall: dict[str, float] = {}
    events: dict[str, int] = {}
    for i in range(repeat):
        order = list(READERS) if i % 2 == 0 else list(reversed(READERS))
        for name in order:
            w0, c0 = time.perf_counter(), time.process_time()
            events[name] = READERS[name](path)
            cpu, wall = time.process_time() - c0, time.perf_counter() - w0
            best_cpu[name] = min(best_cpu.get(name, cpu), cpu)
            best_wall[name] = min(best_wall.get(name, wall), wall)
    return {
        name: {
            "cpu_seconds": best_cpu[name],
            "wall_seconds": best_wall[name],
            "mb_per_s": size / MB / best_cpu[name],
            "events": events[name],
        }
        for name in READERS
    }


# --- memory (in a fresh child per measurement) -----------------------------------------


def measure_child(reader: str, path: Path | None) -> dict[str, Any]:
    argv = [sys.executable, __file__, "--child", reader]
    if path is not None:
        argv.append(str(path))
    out = subprocess.run(argv, check=True, capture_output=True, text=True)
    return dict(json.loads(out.stdout))


def child_main(reader: str, path: str | None) -> None:
    # Import both readers' modules first so the baseline holds the same code.
    import claude_agent_sdk._internal.message_parser
    import claude_agent_sdk._internal.transport.subprocess_cli  # noqa: F401

    result: dict[str, Any] = {"events": 0, "error": None}
    if path is not None:
        try:
            result["events"] = READERS[reader](Path(path))
        except Exception as exc:  # the SDK refuses over-long lines
            result["error"] = f"{type(exc).__name__}: {str(exc)[:120]}"
    result["maxrss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps(result))


# --- main -----------------------------------------------------------------------------


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mb", type=float, default=200, help="throughput transcript size (MB)")
    ap.add_argument("--small-mb", type=float, default=100, help="small memory transcript (MB)")
    ap.add_argument("--big-mb", type=float, default=1024, help="big memory transcript (MB)")
    ap.add_argument(
        "--giant-line-mb", type=float, default=256, help="one over-long line (MB); 0 skips"
    )
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--no-save", action="store_true")
    ap.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child_main(args.child[0], args.child[1] if len(args.child) > 1 else None)
        return

    pool = line_pool(args.seed)
    sizes = sorted(len(x) for x in pool)
    print(
        f"line pool: {len(pool)} lines, {sizes[0]}..{sizes[-1]} B, "
        f"median {sizes[len(sizes) // 2]} B"
    )
    payload: dict[str, Any] = {
        "python": sys.version.split()[0],
        "chunk_bytes": DEFAULT_CHUNK_BYTES,
        "args": {k: v for k, v in vars(args).items() if k != "child"},
    }
    with tempfile.TemporaryDirectory(prefix="bench-stream-") as tmp:
        tmpdir = Path(tmp)
        main_file = tmpdir / "throughput.jsonl"
        written = write_transcript(main_file, args.mb, pool, args.seed)
        print(f"\nthroughput on {written / MB:.0f} MB ({args.repeat} runs each, best):")
        tp = throughput(main_file, args.repeat)
        for name, r in tp.items():
            print(
                f"  {name:24s} {r['mb_per_s']:8.1f} MB/s  cpu {r['cpu_seconds']:6.2f} s  "
                f"wall {r['wall_seconds']:6.2f} s  {r['events']} events"
            )
        ratio = tp["scaffold"]["mb_per_s"] / tp["sdk"]["mb_per_s"]
        floor_share = tp["floor"]["cpu_seconds"] / tp["scaffold"]["cpu_seconds"]
        print(f"  scaffold / sdk throughput ratio: {ratio:.2f}x")
        print(f"  json.loads floor is {floor_share:.0%} of scaffold's time")
        payload["throughput"] = {
            "mb": written / MB,
            "readers": tp,
            "scaffold_over_sdk": ratio,
            "floor_share_of_scaffold": floor_share,
        }
        main_file.unlink()

        print("\npeak RSS of a fresh reader process (MiB):")
        base = measure_child("scaffold", None)["maxrss_mib"]
        print(f"  interpreter + modules, no reading: {base:.1f}")
        memory: dict[str, Any] = {"baseline_mib": base}
        for label, mb in (("small", args.small_mb), ("big", args.big_mb)):
            f = tmpdir / f"{label}.jsonl"
            size = write_transcript(f, mb, pool, args.seed + 1)
            row: dict[str, float] = {"mb": size / MB}
            for reader in MEMORY_READERS:
                row[reader] = measure_child(reader, f)["maxrss_mib"]
            memory[label] = row
            print(
                f"  {size / MB:7.0f} MB transcript: scaffold {row['scaffold']:.1f}, "
                f"sdk {row['sdk']:.1f}, run_agent pipe {row['scaffold_run_agent_pipe']:.1f}"
            )
            f.unlink()
        for reader in MEMORY_READERS:
            growth = memory["big"][reader] - memory["small"][reader]
            memory[f"{reader}_growth_mib"] = growth
            print(f"  {reader}: big - small = {growth:+.1f} MiB")
        if args.giant_line_mb > 0:
            f = tmpdir / "giant.jsonl"
            size = write_giant(f, args.giant_line_mb, pool)
            giant: dict[str, Any] = {"mb": size / MB}
            for reader in MEMORY_READERS:
                r = measure_child(reader, f)
                giant[reader] = {
                    "maxrss_mib": r["maxrss_mib"],
                    "events": r["events"],
                    "error": r["error"],
                }
                what = r["error"] or f"{r['events']} events"
                print(
                    f"  one {args.giant_line_mb:.0f} MB line: {reader} peak {r['maxrss_mib']:.1f} "
                    f"MiB ({what})"
                )
            memory["giant_line"] = giant
            f.unlink()
        payload["memory"] = memory

    if not args.no_save:
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        RESULTS.write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
        print(f"\nsaved {RESULTS}")


if __name__ == "__main__":
    main()
