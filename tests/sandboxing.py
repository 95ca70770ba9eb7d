"""A hostile agent for the trust-boundary tests of every mode (local, App, event, slot).

:func:`hostile_run` is a scripted agent run that first runs
``tests/fixtures/agent/hostile_probe.py`` (every attack of the trust-boundary issue,
from inside the agent's run) and then completes normally. :class:`Evidence` owns the
probe's plan, its report, the marker folder planted commands would write to, and a
listener on the host's loopback that must never hear from the agent.
"""

from __future__ import annotations

import json
import secrets
import shutil
import socket
import sys
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

PROBE = Path(__file__).resolve().parent / "fixtures" / "agent" / "hostile_probe.py"


class Listener:
    """A TCP server on the host's 127.0.0.1 that records every connection it gets."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.port: int = self.sock.getsockname()[1]
        self.heard: list[bytes] = []
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                conn.settimeout(2)
                try:
                    self.heard.append(conn.recv(4096))
                except OSError:
                    self.heard.append(b"")

    def close(self) -> None:
        self.sock.close()


class Evidence:
    """The probe's plan and what came of it."""

    def __init__(self, root: Path, writable: Path | None = None) -> None:
        self.root = root
        # Writable for the agent (its plan and report): a folder the operator allows.
        self.dir = writable or root / "evidence"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.markers = root / "markers"  # never exposed: planted commands write here
        self.markers.mkdir(parents=True, exist_ok=True)
        self.report = self.dir / "report.jsonl"
        self.plan_path = self.dir / "plan.json"
        # The probe runs from here: the test tree itself may be out of the sandbox's sight
        # (a checkout under HOME or /tmp).
        self.probe = self.dir / PROBE.name
        shutil.copyfile(PROBE, self.probe)
        self.token = "ghs_" + secrets.token_hex(16)
        self.daemon_token = "scaffold-hostile-daemon-" + secrets.token_hex(4)

    @property
    def env(self) -> dict[str, str]:
        """Operator settings that let the probe read its plan and write its report."""
        return {"SCAFFOLD_SANDBOX_WRITABLE": str(self.dir)}

    def write_plan(self, **plan: Any) -> None:
        data = {
            "report": str(self.report),
            "marker_dir": str(self.markers),
            "daemon_token": self.daemon_token,
            **plan,
        }
        data["secrets"] = [self.token, *plan.get("secrets", [])]
        self.plan_path.write_text(json.dumps(data, indent=1), encoding="utf-8")

    def results(self) -> list[dict[str, Any]]:
        assert self.report.exists(), "the hostile probe never ran"
        lines = self.report.read_text(encoding="utf-8").splitlines()
        return [json.loads(line) for line in lines]

    def not_blocked(self) -> list[dict[str, Any]]:
        return [r for r in self.results() if not r["blocked"]]

    def markers_left(self) -> list[str]:
        return sorted(p.name for p in self.markers.iterdir())

    def daemons_alive(self) -> list[int]:
        alive = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                cmdline = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            if self.daemon_token.encode() in cmdline:
                alive.append(int(entry.name))
        return alive


def hostile_run(evidence: Evidence, step: str, role: str = "codeweaver") -> dict[str, Any]:
    """A scripted run: the probe, then a normal ``complete`` through the real MCP server."""
    return {
        "role": role,
        "step": step,
        "attempt": 1,
        "actions": [
            {"run": [sys.executable, "-I", str(evidence.probe), str(evidence.plan_path)]},
            {"write": "feature.txt", "content": "the agent's honest work\n"},
            {"signal": {"signal": "complete", "summary": "done, and tried everything"}},
        ],
    }


@contextmanager
def listening() -> Iterator[Listener]:
    listener = Listener()
    try:
        yield listener
    finally:
        listener.close()


def expect_all_blocked(evidence: Evidence, must_include: Sequence[str] = ()) -> None:
    """Every attempt failed, and the ones a mode is about were really tried."""
    results = evidence.results()
    tried = " | ".join(r["attack"] for r in results)
    for word in must_include:
        assert word in tried, f"the probe never tried {word!r}: {tried}"
    assert evidence.not_blocked() == [], json.dumps(evidence.not_blocked(), indent=1)


def tree_mentions(files: Mapping[str, str], secret: str) -> list[str]:
    return [path for path, text in files.items() if secret in text]
