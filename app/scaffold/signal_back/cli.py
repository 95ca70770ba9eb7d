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

ENV_QUEST_ID = "SCAFFOLD_QUEST_ID"
ENV_STEP_ID = "SCAFFOLD_STEP_ID"
ENV_ROLE = "SCAFFOLD_ROLE"
ENV_SIGNAL_DIR = "SCAFFOLD_SIGNAL_DIR"
ENV_REPO_ROOT = "SCAFFOLD_REPO_ROOT"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="scaffold signal-server",
        description="Serve signal-back for one step over MCP Streamable HTTP on loopback; "
        "print the --mcp-config JSON an agent needs, then serve until interrupted.",
    )
    parser.add_argument("--signal-dir", help=f"where accepted signals go (env {ENV_SIGNAL_DIR})")
    parser.add_argument("--step-id", help=f"the caller's step (env {ENV_STEP_ID})")
    parser.add_argument("--role", help=f"the caller's role (env {ENV_ROLE})")
    parser.add_argument("--quest-id", help=f"the caller's quest (env {ENV_QUEST_ID})")
    parser.add_argument(
        "--repo-root",
        help=f"the repository whose backlog create-tasks writes (env {ENV_REPO_ROOT})",
    )
    return parser


def resolve_binding(argv: list[str], environ: Mapping[str, str]) -> Binding:
    """The binding of the options, falling back to the environment; options win.

    Raises :class:`UsageError` for a missing or invalid signal dir, step id or role.
    """
    opts, _ = _parser().parse_known_args(argv)
    signal_dir = opts.signal_dir or environ.get(ENV_SIGNAL_DIR, "")
    step_id = (opts.step_id or environ.get(ENV_STEP_ID, "")).strip()
    role_name = (opts.role or environ.get(ENV_ROLE, "")).strip().lower()
    quest_id = (opts.quest_id or environ.get(ENV_QUEST_ID, "")).strip() or None
    repo_root = opts.repo_root or environ.get(ENV_REPO_ROOT, "")
    if not signal_dir:
        raise UsageError(f"signal-server needs --signal-dir or {ENV_SIGNAL_DIR}")
    if not step_id:
        raise UsageError(f"signal-server needs --step-id or {ENV_STEP_ID}")
    if not role_name:
        raise UsageError(f"signal-server needs --role or {ENV_ROLE}")
    try:
        role = Role(role_name)
    except ValueError:
        names = ", ".join(r.value for r in Role)
        raise UsageError(f"unknown role {role_name!r}; expected one of {names}") from None
    root = Path(repo_root).absolute() if repo_root else None
    return Binding(Path(signal_dir).absolute(), step_id, role, quest_id, root)


async def serve(binding: Binding) -> None:
    """Serve until SIGINT or SIGTERM, the config printed once the endpoint listens."""
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    async with SignalEndpoint(binding) as endpoint:
        print(json.dumps(mcp_config(endpoint.url, endpoint.secret)), flush=True)
        await stop.wait()


def main(argv: list[str] | None = None, environ: Mapping[str, str] | None = None) -> int:
    """Entry point of ``scaffold signal-server``; logs go to stderr."""
    args = sys.argv[1:] if argv is None else argv
    try:
        _parser().parse_args(args)
    except SystemExit as exc:  # --help, or a usage error argparse has reported
        return exc.code if isinstance(exc.code, int) else 2
    try:
        binding = resolve_binding(args, os.environ if environ is None else environ)
    except UsageError as exc:
        print(f"scaffold signal-server: {exc}", file=sys.stderr)
        return 2
    logging.basicConfig(
        stream=sys.stderr, level=logging.INFO, format="scaffold signal-server: %(message)s"
    )
    asyncio.run(serve(binding))
    return 0
