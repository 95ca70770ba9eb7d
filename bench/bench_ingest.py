"""Benchmark: webhook ingest of `scaffold serve` against a bare aiohttp receiver and Probot.

Every server gets the same signed 15 KB ``issues.labeled`` delivery (GitHub's example
payload, its issue body padded), each request with a unique ``X-GitHub-Delivery``:

- scaffold: ``create_app`` + ``serve`` with a no-op handler and warning-level logs
  (verify, commit to the sqlite store, enqueue, answer 202; the worker then handles and
  marks done);
- scaffold-info: the same with info-level JSON logs (one line per handled delivery);
- scaffold-nostore (what-if, not the shipped code): the same with the delivery store
  replaced by a dict, nothing written before the 202: what the sqlite store costs;
- scaffold-fsync: the same with ``fsync=True`` (sqlite's ``synchronous=FULL``: each group
  commit fsynced before the 202s: durable across a power loss, not only across ``kill -9``);
- scaffold-base (with ``--base DIR``): the same as scaffold, from another checkout's
  ``app/`` (e.g. a ``git worktree`` of the commit before a change), for before/after in
  one run;
- bare: an aiohttp app doing only HMAC-SHA256 + ``compare_digest`` + ``json.loads`` and
  answering 202: the practical floor for a Python receiver;
- bare-uvloop: the same on uvloop, the loop ``scaffold serve`` runs on;
- bare-fast: uvloop and orjson, the parser scaffold uses: the same tools, none of the work;
- probot: a minimal Probot 14.3.2 app (bench/probot) whose ``issues.labeled`` handler does
  nothing; it answers 200 after its handlers (``LOG_LEVEL=warn``).

Each server runs pinned to core 0 (``taskset -c 0``); the load generator (raw asyncio
sockets, keep-alive, ``--concurrency`` connections, closed loop) runs pinned to core 1 and
reports its own CPU use so one can see it is not the bottleneck. Rounds of ``--requests``
are interleaved across servers; figures are medians over rounds. RSS is read from
/proc after each round (VmRSS) and at the end (VmHWM, the peak).

Two more checks on scaffold:
- busy: the same load on a scaffold whose handler sleeps 50 ms (4 workers), so the
  queue grows by thousands while the 202s are measured; compare p99 with idle scaffold.
- burst: 10,000 deliveries to a scaffold whose handler sleeps 1 ms; once the queue is
  empty, handled (from /metrics) must equal the number of 202s.

    .venv/bin/python bench/bench_ingest.py [--rounds 5] [--requests 20000] [--quick]
        [--base /work/h-ingest-base] [--only scaffold,bare,probot]

Probot must be installed first: ``npm install --prefix bench/probot``. Results go to
stdout and ``bench/results/ingest.json`` (``--no-save`` to skip).
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import hmac
import json
import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
PROBOT_DIR = BENCH / "probot"
PROBOT_BIN = PROBOT_DIR / "node_modules" / "probot" / "bin" / "probot.js"
EXAMPLE = REPO / "tests" / "fixtures" / "github" / "webhook-examples" / "issues" / "labeled.0.json"
RESULTS = BENCH / "results" / "ingest.json"
SECRET = "bench-webhook-secret"
PAYLOAD_BYTES = 15 * 1024
SERVER_CORE, LOAD_CORE = 0, 1

SCAFFOLD_SERVER = """
import asyncio, dataclasses, logging, sys
from pathlib import Path
from scaffold.server.app import create_app
from scaffold.server.logs import configure_json_logging
from scaffold.server.run import serve
from scaffold.server.settings import ServerSettings

port, state, delay, level, secret = int(sys.argv[1]), Path(sys.argv[2]), float(sys.argv[3]), sys.argv[4], sys.argv[5]
configure_json_logging(level.upper(), extra_secrets=[secret])

async def handler(delivery):
    if delay:
        await asyncio.sleep(delay)

settings = ServerSettings(app_id=123456, private_key=b"-", webhook_secret=secret, state_dir=state)
if sys.argv[6] == "fsync":
    settings = dataclasses.replace(settings, fsync=True)
if sys.argv[6] == "nostore":  # what-if, not the shipped code: deliveries kept in a dict
    import scaffold.server.ingest as ingest

    class NoStore(ingest.DeliveryStore):
        async def open(self):
            self.kept = {}
            return []
        async def add(self, accepted, raw):
            return self.kept.setdefault(accepted.id, raw) is raw
        async def payload(self, delivery_id):
            return self.kept.get(delivery_id)
        def finish(self, delivery_id, state):
            self.kept.pop(delivery_id, None)
        async def compact(self, before):
            return 0
        async def close(self):
            pass

    ingest.DeliveryStore = NoStore
serve(create_app(settings, handler), "127.0.0.1", port, drain_timeout_s=1.0)
"""

BARE_SERVER = """
import asyncio, hashlib, hmac, json, sys
from aiohttp import web

port, secret, loop = int(sys.argv[1]), sys.argv[2].encode(), sys.argv[3]
if loop == "fast":
    import orjson
    loads = orjson.loads
else:
    loads = json.loads

async def webhook(request):
    body = await request.read()
    expected = "sha256=" + hmac.new(secret, body, hashlib.sha256).hexdigest()
    if not hmac.compare_digest(expected, request.headers.get("X-Hub-Signature-256", "")):
        return web.Response(status=401)
    loads(body)
    return web.json_response({"status": "queued"}, status=202)

async def main():
    app = web.Application(client_max_size=25 * 1024 * 1024)
    app.router.add_post("/webhook", webhook)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    await asyncio.Event().wait()

if loop in ("uvloop", "fast"):
    import uvloop
    uvloop.run(main())
else:
    asyncio.run(main())
"""


# -- the payload and the requests --------------------------------------------------------------


def make_payload() -> bytes:
    payload = json.loads(EXAMPLE.read_bytes())
    payload["issue"]["body"] = ""
    base = len(json.dumps(payload).encode())
    filler = "Steps to reproduce: open the page, click the button, wait. " * 400
    payload["issue"]["body"] = filler[: PAYLOAD_BYTES - base]
    body = json.dumps(payload).encode()
    assert len(body) == PAYLOAD_BYTES, len(body)
    return body


def request_parts(path: str, port: int, body: bytes) -> tuple[bytes, bytes]:
    """What comes before and after the delivery id in every request."""
    sig = "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
    head = (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUser-Agent: GitHub-Hookshot/bench\r\n"
        f"Accept: */*\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n"
        f"X-GitHub-Event: issues\r\nX-GitHub-Hook-ID: 1\r\nX-Hub-Signature-256: {sig}\r\n"
        "X-GitHub-Delivery: "
    ).encode()
    return head, b"\r\n\r\n" + body


# -- the load generator ------------------------------------------------------------------------


class _Conn(asyncio.Protocol):
    """One keep-alive connection; one request at a time."""

    def __init__(self) -> None:
        self.buf = bytearray()
        self.waiter: asyncio.Future[int] | None = None
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.buf += data
        self._try_complete()

    def connection_lost(self, exc: Exception | None) -> None:
        if self.waiter and not self.waiter.done():
            self.waiter.set_exception(ConnectionError("connection closed"))

    def _try_complete(self) -> None:
        if self.waiter is None or self.waiter.done():
            return
        end = self.buf.find(b"\r\n\r\n")
        if end < 0:
            return
        head = bytes(self.buf[:end]).decode("latin-1")
        status = int(head.split(" ", 2)[1])
        m = re.search(r"(?im)^content-length:\s*(\d+)", head)
        if m:
            total = end + 4 + int(m.group(1))
            if len(self.buf) < total:
                return
        elif re.search(r"(?im)^transfer-encoding:\s*chunked", head):
            fin = self.buf.find(b"0\r\n\r\n", end + 4)
            if fin < 0:
                return
            total = fin + 5
        else:
            total = end + 4
        del self.buf[:total]
        self.waiter.set_result(status)

    async def send(self, data: bytes) -> int:
        assert self.transport is not None
        self.waiter = asyncio.get_running_loop().create_future()
        self.transport.write(data)
        return await self.waiter


@dataclass
class LoadResult:
    requests: int
    seconds: float
    statuses: dict[int, int]
    latencies_ms: list[float] = field(repr=False)
    client_cpu: float  # share of one core the load generator used
    server_cpu_s: float = 0.0  # CPU time the server used for the round

    @property
    def cpu_us_per_request(self) -> float:
        return self.server_cpu_s / self.requests * 1e6

    @property
    def rps(self) -> float:
        return self.requests / self.seconds

    def pct(self, q: float) -> float:
        xs = sorted(self.latencies_ms)
        return xs[min(len(xs) - 1, int(q * len(xs)))]


async def run_load(
    port: int, path: str, body: bytes, n: int, concurrency: int, prefix: str
) -> LoadResult:
    loop = asyncio.get_running_loop()
    head, tail = request_parts(path, port, body)
    conns = []
    for _ in range(concurrency):
        _, proto = await loop.create_connection(_Conn, "127.0.0.1", port)
        conns.append(proto)
    latencies: list[float] = []
    statuses: dict[int, int] = {}
    counter = iter(range(n))
    perf = time.perf_counter

    async def worker(conn: _Conn) -> None:
        for i in counter:
            data = head + f"{prefix}-{i:07d}".encode() + tail
            t0 = perf()
            status = await conn.send(data)
            latencies.append((perf() - t0) * 1000)
            statuses[status] = statuses.get(status, 0) + 1

    cpu0, t0 = time.process_time(), perf()
    await asyncio.gather(*(worker(c) for c in conns))
    seconds = perf() - t0
    cpu = (time.process_time() - cpu0) / seconds
    for c in conns:
        assert c.transport is not None
        c.transport.close()
    return LoadResult(n, seconds, statuses, latencies, cpu)


# -- the servers -------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Server:
    name: str
    proc: subprocess.Popen[bytes]
    port: int
    path: str
    rss_kb: list[int] = field(default_factory=list)

    def status(self, key: str) -> int:
        text = Path(f"/proc/{self.proc.pid}/status").read_text()
        m = re.search(rf"^{key}:\s+(\d+) kB", text, re.M)
        return int(m.group(1)) if m else 0

    def cpu_seconds(self) -> float:
        """User and system CPU time of the server so far (children too: Probot has none)."""
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rpartition(")")[2].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def wait_listening(server: Server, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.proc.poll() is not None:
            raise RuntimeError(f"{server.name} exited with {server.proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", server.port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"{server.name} did not start listening")


def pinned(argv: list[str]) -> list[str]:
    return ["taskset", "-c", str(SERVER_CORE), *argv]


def start_scaffold(
    name: str,
    tmp: Path,
    delay: float = 0.0,
    level: str = "warning",
    *,
    fsync: bool = False,
    nostore: bool = False,
    app_dir: Path | None = None,
) -> Server:
    """``app_dir``: run the ``scaffold`` package found there (another checkout's app/)."""
    port = free_port()
    state = tmp / name
    argv = [sys.executable, "-c", SCAFFOLD_SERVER, str(port), str(state), str(delay), level]
    argv += [SECRET, "fsync" if fsync else "nostore" if nostore else "-"]
    env = dict(os.environ)
    if app_dir is not None:
        env["PYTHONPATH"] = str(app_dir)

    proc = subprocess.Popen(
        pinned(argv), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env
    )
    server = Server(name, proc, port, "/webhook")
    wait_listening(server)
    return server


def start_bare(tmp: Path, loop: str = "asyncio") -> Server:
    port = free_port()
    argv = [sys.executable, "-c", BARE_SERVER, str(port), SECRET, loop]
    proc = subprocess.Popen(pinned(argv), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    server = Server("bare" if loop == "asyncio" else f"bare-{loop}", proc, port, "/webhook")
    wait_listening(server)
    return server


def start_probot(tmp: Path) -> Server | None:
    if not PROBOT_BIN.is_file():
        print(
            "probot is not installed; to include it run:  npm install --prefix bench/probot",
            file=sys.stderr,
        )
        return None
    if (PROBOT_DIR / ".env").exists():
        raise RuntimeError("bench/probot/.env exists; Probot would read it")
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = tmp / "key.pem"
    pem.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.TraditionalOpenSSL,
            serialization.NoEncryption(),
        )
    )
    port = free_port()
    env = {
        "PATH": os.environ["PATH"],
        "HOME": os.environ.get("HOME", "/tmp"),
        "APP_ID": "123456",
        "PRIVATE_KEY_PATH": str(pem),
        "WEBHOOK_SECRET": SECRET,
        "PORT": str(port),
        "HOST": "127.0.0.1",
        "LOG_LEVEL": "warn",
        "NODE_ENV": "production",
    }
    argv = pinned(["node", str(PROBOT_BIN), "run", "./index.js"])
    proc = subprocess.Popen(
        argv, cwd=PROBOT_DIR, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    server = Server("probot", proc, port, "/api/github/webhooks")
    wait_listening(server)
    return server


def scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as resp:
        return str(resp.read().decode())


def metric_sum(text: str, name: str, **labels: str) -> float:
    total = 0.0
    for line in text.splitlines():
        if not line.startswith(name + "{") and not line.startswith(name + " "):
            continue
        if all(f'{k}="{v}"' in line for k, v in labels.items()):
            total += float(line.rsplit(" ", 1)[1])
    return total


# -- the run -----------------------------------------------------------------------------------


def summarize(results: list[LoadResult], server: Server) -> dict[str, Any]:
    statuses: dict[str, int] = {}
    for r in results:
        for k, v in r.statuses.items():
            statuses[str(k)] = statuses.get(str(k), 0) + v
    return {
        "rounds": len(results),
        "rps_median": statistics.median(r.rps for r in results),
        "rps_all": [round(r.rps) for r in results],
        "p50_ms_median": statistics.median(r.pct(0.50) for r in results),
        "p99_ms_median": statistics.median(r.pct(0.99) for r in results),
        "p99_ms_all": [round(r.pct(0.99), 2) for r in results],
        "load_generator_cpu_median": statistics.median(r.client_cpu for r in results),
        # CPU time per request on the server: what contention on a shared machine
        # changes least (req/s and latency move with the other processes on core 0).
        "server_cpu_us_per_request_median": statistics.median(
            r.cpu_us_per_request for r in results
        ),
        "statuses": statuses,
        "rss_mb_after_rounds_max": max(server.rss_kb) / 1024 if server.rss_kb else None,
        "rss_mb_peak": server.status("VmHWM") / 1024,
    }


async def burst(tmp: Path, body: bytes, n: int, concurrency: int) -> dict[str, Any]:
    server = start_scaffold("scaffold-burst", tmp, delay=0.001)
    try:
        before = scrape(server.port)
        r = await run_load(server.port, server.path, body, n, concurrency, uuid.uuid4().hex)
        accepted = r.statuses.get(202, 0)
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            text = scrape(server.port)
            if metric_sum(text, "scaffold_queue_depth") == 0 and (
                metric_sum(text, "scaffold_webhook_in_flight") == 0
            ):
                break
            await asyncio.sleep(0.2)
        handled = metric_sum(text, "scaffold_webhook_deliveries_total", outcome="handled")
        failed = metric_sum(text, "scaffold_webhook_deliveries_total", outcome="failed")
        handled -= metric_sum(before, "scaffold_webhook_deliveries_total", outcome="handled")
        return {
            "sent": n,
            "accepted_202": accepted,
            "handled": int(handled),
            "failed": int(failed),
            "lost": accepted - int(handled) - int(failed),
            "rss_mb_peak": server.status("VmHWM") / 1024,
        }
    finally:
        server.stop()


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    os.sched_setaffinity(0, {LOAD_CORE})
    body = make_payload()
    with tempfile.TemporaryDirectory(prefix="bench-ingest-") as tmp_name:
        tmp = Path(tmp_name)
        wanted = set(args.only.split(",")) if args.only else None

        def want(name: str) -> bool:
            return wanted is None or name in wanted or name in ("scaffold", "bare")

        servers = [start_scaffold("scaffold", tmp), start_bare(tmp)]
        if args.base:
            base_app = Path(args.base).resolve() / "app"
            servers.append(start_scaffold("scaffold-base", tmp, app_dir=base_app))
        if want("scaffold-fsync"):
            servers.append(start_scaffold("scaffold-fsync", tmp, fsync=True))
        if want("scaffold-nostore"):
            servers.append(start_scaffold("scaffold-nostore", tmp, nostore=True))
        if want("scaffold-info"):
            servers.append(start_scaffold("scaffold-info", tmp, level="info"))
        if want("bare-uvloop"):
            servers.append(start_bare(tmp, "uvloop"))
        if want("bare-fast"):
            servers.append(start_bare(tmp, "fast"))
        probot = start_probot(tmp) if want("probot") else None
        if probot:
            servers.append(probot)
        busy = start_scaffold("scaffold-busy", tmp, delay=0.05) if want("scaffold-busy") else None
        if busy:
            servers.append(busy)
        results: dict[str, list[LoadResult]] = {s.name: [] for s in servers}
        try:
            for s in servers:  # warm-up
                await run_load(
                    s.port, s.path, body, args.warmup, args.concurrency, uuid.uuid4().hex
                )
            for rnd in range(args.rounds):
                order = servers[rnd % len(servers) :] + servers[: rnd % len(servers)]
                for s in order:
                    cpu0 = s.cpu_seconds()
                    r = await run_load(
                        s.port, s.path, body, args.requests, args.concurrency, uuid.uuid4().hex
                    )
                    r.server_cpu_s = s.cpu_seconds() - cpu0
                    s.rss_kb.append(s.status("VmRSS"))
                    results[s.name].append(r)
                    print(
                        f"round {rnd + 1} {s.name:14s} {r.rps:8.0f} req/s  p50 {r.pct(0.5):6.2f} ms"
                        f"  p99 {r.pct(0.99):6.2f} ms  rss {s.rss_kb[-1] / 1024:6.1f} MB"
                        f"  cpu/req {r.cpu_us_per_request:5.0f} us"
                        f"  loadgen cpu {r.client_cpu:4.0%}  {r.statuses}",
                        flush=True,
                    )
            summary = {s.name: summarize(results[s.name], s) for s in servers}
            if busy:
                summary["scaffold-busy"]["queue_depth_at_end"] = metric_sum(
                    scrape(busy.port), "scaffold_queue_depth"
                )
        finally:
            for s in servers:
                s.stop()
        burst_result = await burst(tmp, body, args.burst, args.concurrency) if args.burst else None
    return {
        "payload_bytes": len(body),
        "concurrency": args.concurrency,
        "requests_per_round": args.requests,
        "rounds": args.rounds,
        "cpu": f"servers on core {SERVER_CORE}, load generator on core {LOAD_CORE}",
        "python": sys.version.split()[0],
        "servers": summary,
        "ratios": ratios(summary),
        "burst": burst_result,
    }


def ratios(summary: dict[str, Any]) -> dict[str, float | None]:
    """scaffold (and scaffold-base, scaffold-fsync) against the bare receivers and Probot."""
    bare, probot = summary["bare"], summary.get("probot")
    out: dict[str, float | None] = {}

    def ratio(key: str, a: str, b: str, field: str) -> None:
        if a in summary and b in summary:
            out[key] = summary[a][field] / summary[b][field]

    for name, tag in (("scaffold", ""), ("scaffold-base", "_base"), ("scaffold-fsync", "_fsync")):
        if name not in summary:
            continue
        sc = summary[name]
        out[f"rps_scaffold{tag}_over_bare"] = sc["rps_median"] / bare["rps_median"]
        out[f"rss_peak_scaffold{tag}_over_bare"] = sc["rss_mb_peak"] / bare["rss_mb_peak"]
        out[f"cpu_per_request_scaffold{tag}_over_bare"] = (
            sc["server_cpu_us_per_request_median"] / bare["server_cpu_us_per_request_median"]
        )
        out[f"p99_scaffold{tag}_over_probot"] = (
            sc["p99_ms_median"] / probot["p99_ms_median"] if probot else None
        )
        out[f"rps_scaffold{tag}_over_probot"] = (
            sc["rps_median"] / probot["rps_median"] if probot else None
        )
        out[f"rss_scaffold{tag}_over_probot"] = (
            sc["rss_mb_peak"] / probot["rss_mb_peak"] if probot else None
        )
    # Paired: the median over rounds of the ratio within each round (the servers of one
    # round run minutes apart at most, so they share more of the machine's load).
    for name, tag in (("scaffold", ""), ("scaffold-base", "_base"), ("scaffold-fsync", "_fsync")):
        if name not in summary:
            continue
        sc = summary[name]
        out[f"rps_scaffold{tag}_over_bare_paired"] = statistics.median(
            a / b for a, b in zip(sc["rps_all"], bare["rps_all"], strict=True)
        )
        if probot:
            out[f"p99_scaffold{tag}_over_probot_paired"] = statistics.median(
                a / b for a, b in zip(sc["p99_ms_all"], probot["p99_ms_all"], strict=True)
            )
    ratio("rps_scaffold_over_bare_uvloop", "scaffold", "bare-uvloop", "rps_median")
    ratio("p99_scaffold_over_bare_uvloop", "scaffold", "bare-uvloop", "p99_ms_median")
    ratio("rps_scaffold_over_bare_fast", "scaffold", "bare-fast", "rps_median")
    ratio("rps_scaffold_info_over_bare", "scaffold-info", "bare", "rps_median")
    ratio("p99_busy_over_idle", "scaffold-busy", "scaffold", "p99_ms_median")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--requests", type=int, default=20_000)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--warmup", type=int, default=2_000)
    parser.add_argument("--burst", type=int, default=10_000)
    parser.add_argument("--quick", action="store_true", help="2 rounds of 3,000 requests")
    parser.add_argument("--no-save", action="store_true")
    parser.add_argument("--base", help="another checkout whose app/ runs as scaffold-base")
    parser.add_argument(
        "--only", help="comma-separated servers besides scaffold and bare (default: all)"
    )
    args = parser.parse_args()
    if args.quick:
        args.rounds, args.requests, args.warmup, args.burst = 2, 3_000, 500, 2_000
    if len(os.sched_getaffinity(0)) < 2:
        raise SystemExit("needs two cores")
    report = asyncio.run(main_async(args))
    print(json.dumps({k: report[k] for k in ("ratios", "burst")}, indent=2))
    for name, s in report["servers"].items():
        print(
            f"{name:14s} {s['rps_median']:8.0f} req/s  p50 {s['p50_ms_median']:6.2f} ms  "
            f"p99 {s['p99_ms_median']:6.2f} ms  rss peak {s['rss_mb_peak']:6.1f} MB  "
            f"cpu/req {s['server_cpu_us_per_request_median']:5.0f} us  "
            f"loadgen cpu {s['load_generator_cpu_median']:4.0%}"
        )
    if not args.no_save and not args.quick and not args.only:
        RESULTS.write_text(json.dumps(report, indent=2) + "\n")
        print(f"saved {RESULTS.relative_to(REPO)}")


if __name__ == "__main__":
    main()
