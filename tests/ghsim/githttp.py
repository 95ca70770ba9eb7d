"""Smart HTTP git, served by `git http-backend` as a CGI child, behind token auth."""

from __future__ import annotations

import asyncio
import base64
import re
from typing import TYPE_CHECKING

from aiohttp import web

from .gitrepo import ZERO, BareRepo, base_env

if TYPE_CHECKING:
    from .server import GitHubSimulator

_PATH = re.compile(
    r"^/git/(?P<owner>[A-Za-z0-9._-]+)/(?P<name>[A-Za-z0-9._-]+?)(?:\.git)?(?P<rest>/.*)$"
)


def _unauthorized() -> web.Response:
    return web.Response(
        status=401,
        text="Authentication failed\n",
        headers={"WWW-Authenticate": 'Basic realm="GitHub"'},
    )


def _basic_token(header: str) -> str | None:
    scheme, _, value = header.partition(" ")
    if scheme.lower() != "basic":
        return None
    try:
        user, _, password = base64.b64decode(value.strip()).decode().partition(":")
    except ValueError:
        return None
    return password if user == "x-access-token" else None


async def handle_git(sim: GitHubSimulator, request: web.Request) -> web.StreamResponse:
    match = _PATH.match(request.path)
    if match is None:
        return web.Response(status=404, text="Repository not found\n")
    full_name = f"{match['owner']}/{match['name']}"
    token_text = _basic_token(request.headers.get("Authorization", ""))
    token = sim.live_token(token_text) if token_text else None
    if token is None:
        return _unauthorized()
    repo = sim.repos.get(full_name.lower())
    inst = sim.installations.get(token.installation_id)
    if repo is None or inst is None or repo.full_name not in inst.repos:
        return web.Response(status=404, text="Repository not found\n")
    rest = match["rest"]
    if rest not in ("/info/refs", "/git-upload-pack", "/git-receive-pack", "/HEAD"):
        return web.Response(status=404, text="Not found\n")
    pushing = rest == "/git-receive-pack" or request.query.get("service") == "git-receive-pack"
    if pushing and token.read_only:
        return web.Response(status=403, text="Permission to push denied (a read-only token)\n")
    git = BareRepo(repo.bare_path)
    before = git.refs() if rest == "/git-receive-pack" else None

    env = base_env()
    env.update(
        GIT_PROJECT_ROOT=str(repo.bare_path.parent),
        GIT_HTTP_EXPORT_ALL="1",
        PATH_INFO=f"/{repo.bare_path.name}{rest}",
        REQUEST_METHOD=request.method,
        QUERY_STRING=request.query_string,
        CONTENT_TYPE=request.headers.get("Content-Type", ""),
        REMOTE_USER=sim.bot_login,
        REMOTE_ADDR="127.0.0.1",
        GIT_HTTP_MAX_REQUEST_BUFFER="100M",
    )
    if "Content-Encoding" in request.headers:
        env["HTTP_CONTENT_ENCODING"] = request.headers["Content-Encoding"]
    if "Git-Protocol" in request.headers:
        env["GIT_PROTOCOL"] = request.headers["Git-Protocol"]
    body = await request.read()
    env["CONTENT_LENGTH"] = str(len(body))
    proc = await asyncio.create_subprocess_exec(
        "git",
        "http-backend",
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=env,
    )
    out, _err = await proc.communicate(body)
    head, sep, payload = out.partition(b"\r\n\r\n")
    if not sep:
        head, sep, payload = out.partition(b"\n\n")
    status = 200
    headers: dict[str, str] = {}
    for line in head.decode(errors="replace").splitlines():
        name, _, value = line.partition(":")
        if name.lower() == "status":
            status = int(value.strip().split()[0])
        elif name:
            headers[name.strip()] = value.strip()
    response = web.Response(status=status, body=payload, headers=headers)
    if before is not None and pushing:
        after = git.refs()
        changes = {
            ref: (before.get(ref, ZERO), after.get(ref, ZERO))
            for ref in set(before) | set(after)
            if before.get(ref) != after.get(ref)
        }
        if changes:
            try:
                with sim.lock:
                    sim.on_ref_changes(repo, changes, sim.bot_login)
            except Exception as exc:  # recorded as a violation by emit; the push itself stands
                sim.violation(f"deliveries after push to {full_name} failed: {exc}")
    return response
