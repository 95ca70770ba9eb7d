"""``scaffold signal-server``: one binding's tools over Streamable HTTP, for an agent run by hand.

It prints the ``--mcp-config`` JSON (a loopback URL and a fresh secret) on stdout, then
serves until SIGINT or SIGTERM. The binding comes from the options, else the
``SCAFFOLD_*`` environment variables an agent run gets.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import signal
import sys
from collections.abc import Mapping
from pathlib import Path

from scaffold.errors import UsageError
from scaffold.roles import Role
from scaffold.signal_back import mcp_config
from scaffold.signal_back.endpoint import SignalEndpoint
from scaffold.signal_back.records import Binding

# Each option, the environment variable it falls back to, and its help.
_OPTIONS = {
    "--signal-dir": ("SCAFFOLD_SIGNAL_DIR", "where accepted signals go"),
    "--step-id": ("SCAFFOLD_STEP_ID", "the caller's step"),
    "--role": ("SCAFFOLD_ROLE", "the caller's role"),
    "--quest-id": ("SCAFFOLD_QUEST_ID", "the caller's quest"),
    "--repo-root": ("SCAFFOLD_REPO_ROOT", "the repository whose backlog create-tasks writes"),
}


def resolve_binding(argv: list[str], environ: Mapping[str, str]) -> Binding:
    """The binding of the options, falling back to the environment; UsageError for a missing
    or invalid signal dir, step id or role (argparse's SystemExit for bad options)."""
    parser = argparse.ArgumentParser(
        prog="scaffold signal-server",
        description="Serve signal-back for one step over MCP Streamable HTTP on loopback; "
        "print the --mcp-config JSON an agent needs, then serve until interrupted.",
    )
    for option, (env, text) in _OPTIONS.items():
        parser.add_argument(option, default=environ.get(env, ""), help=f"{text} (env {env})")
    opts = parser.parse_args(argv)
    step_id = opts.step_id.strip()
    role_name = opts.role.strip().lower()
    for option, value in [
        ("--signal-dir", opts.signal_dir),
        ("--step-id", step_id),
        ("--role", role_name),
    ]:
        if not value:
            raise UsageError(f"signal-server needs {option} or {_OPTIONS[option][0]}")
    try:
        role = Role(role_name)
    except ValueError:
        names = ", ".join(r.value for r in Role)
        raise UsageError(f"unknown role {role_name!r}; expected one of {names}") from None
    root = Path(opts.repo_root).absolute() if opts.repo_root else None
    quest_id = opts.quest_id.strip() or None
    return Binding(Path(opts.signal_dir).absolute(), step_id, role, quest_id, root)


async def serve(binding: Binding) -> None:
    """Serve until SIGINT or SIGTERM, the config printed once the endpoint listens."""
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    async with SignalEndpoint(binding) as endpoint:
        print(json.dumps(mcp_config(endpoint.url, endpoint.secret)), flush=True)
        await stop.wait()


def main(argv: list[str]) -> int:
    """Entry point of ``scaffold signal-server``; logs go to stderr."""
    try:
        binding = resolve_binding(argv, os.environ)
    except SystemExit as exc:  # --help, or a usage error argparse has reported
        return exc.code if isinstance(exc.code, int) else 2
    except UsageError as exc:
        print(f"scaffold signal-server: {exc}", file=sys.stderr)
        return 2
    logging.basicConfig(
        stream=sys.stderr, level=logging.INFO, format="scaffold signal-server: %(message)s"
    )
    asyncio.run(serve(binding))
    return 0
