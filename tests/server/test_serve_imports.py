"""``scaffold serve`` listens with only what ingest needs imported: the App's GitHub side
(client, service, orchestration, models) comes after, and so does prometheus_client."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

# Stands in for scaffold.server.run.serve: reports the modules imported at the moment
# the server would start listening, then runs the after-listening start as serve would.
PROBE = """
import asyncio, json, sys
from scaffold.server import run

def serve(app, host, port, *, drain_timeout_s, after_listening=None):
    before = sorted(sys.modules)
    async def later():
        await after_listening()
    asyncio.run(later())
    after = sorted(sys.modules)
    print(json.dumps({"listening": before, "after": after}))

run.serve = serve
sys.argv = ["scaffold", "serve", "--state-dir", sys.argv[1], "--port", "0"]
from scaffold.cli.entry import main
main()
"""

DEFERRED = (
    "scaffold.cli.main",
    "scaffold.config",
    "scaffold.github.client",
    "scaffold.github.service",
    "scaffold.github.runner",
    "scaffold.quest.model",
    "scaffold.runtime.session",
    "gidgethub",
    "pydantic",
    "prometheus_client",
)


def test_serve_listens_before_importing_the_github_side(tmp_path: Path) -> None:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = tmp_path / "key.pem"
    pem.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.TraditionalOpenSSL,
            serialization.NoEncryption(),
        )
    )
    env = {
        **os.environ,
        "SCAFFOLD_APP_ID": "1",
        "SCAFFOLD_PRIVATE_KEY_PATH": str(pem),
        "SCAFFOLD_WEBHOOK_SECRET": "probe-secret",
        "SCAFFOLD_GITHUB_URL": "http://127.0.0.1:9",
    }
    env.pop("SCAFFOLD_PRIVATE_KEY", None)
    done = subprocess.run(
        [sys.executable, "-c", PROBE, str(tmp_path / "state")],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    modules = json.loads(done.stdout.strip().splitlines()[-1])
    listening, after = set(modules["listening"]), set(modules["after"])
    assert {"aiohttp.web", "scaffold.server.ingest", "scaffold.cli.serve_cmd"} <= listening
    early = sorted(
        m
        for m in listening
        if m.split(".")[0] in ("gidgethub", "pydantic", "prometheus_client") or m in DEFERRED
    )
    assert early == []
    # ...and the GitHub side is there once the server has started it.
    assert {"scaffold.github.service", "scaffold.github.client"} <= after


async def test_a_failing_start_after_listening_stops_the_server(settings) -> None:
    """If the App's GitHub side cannot be built, the server does not go on answering 202
    to deliveries nobody will handle: it stops, and the error comes out."""
    import asyncio

    from webhook_support import Recorder

    from scaffold.server.app import create_app
    from scaffold.server.run import serve_async

    async def broken() -> None:
        raise RuntimeError("no GitHub side")

    app = create_app(settings, Recorder())
    serving = serve_async(app, "127.0.0.1", 0, drain_timeout_s=30, after_listening=broken)
    with pytest.raises(RuntimeError, match="no GitHub side"):
        await asyncio.wait_for(serving, 60)
