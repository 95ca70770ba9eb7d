"""Repositories: metadata, branches, protection, contents, refs, compare, permissions, statuses."""

from __future__ import annotations

import base64
import binascii
from typing import Any

from . import objects as ob
from .context import ApiError, Ctx, Reply, invalid, not_found, paginate, route
from .gitrepo import ZERO, BareRepo, valid_branch
from .merging import permission_of
from .state import PERMISSION_LEVELS, CommitStatus, RepoState


def _git(ctx: Ctx, repo: RepoState) -> BareRepo:
    return ctx.sim.git_of(repo)


def _owner(ctx: Ctx, repo: RepoState) -> Any:
    return ctx.sim.users[repo.owner]


@route("repos/get")
async def get_repo(ctx: Ctx) -> Reply:
    with ctx.sim.lock:
        repo = ctx.repo()
        obj = ob.repo_obj(ctx.sim.urls, repo, _owner(ctx, repo))
        obj["permissions"] = {
            "admin": False,
            "maintain": False,
            "push": True,
            "triage": True,
            "pull": True,
        }
        obj.update(
            network_count=0,
            subscribers_count=0,
            allow_merge_commit=True,
            allow_squash_merge=True,
            allow_rebase_merge=True,
            delete_branch_on_merge=False,
            allow_auto_merge=False,
        )
        return Reply(200, obj)


def _protection_json(ctx: Ctx, repo: RepoState, branch: str) -> dict[str, Any]:
    rule = repo.protections[branch]
    url = f"{ctx.sim.urls.repo(repo.full_name)}/branches/{branch}/protection"
    return {
        "url": url,
        "required_status_checks": {
            "url": f"{url}/required_status_checks",
            "strict": rule.strict,
            "contexts": list(rule.required_checks),
            "checks": [
                {"context": c, "app_id": rule.check_apps.get(c)} for c in rule.required_checks
            ],
            "contexts_url": f"{url}/required_status_checks/contexts",
        },
        "required_pull_request_reviews": {
            "url": f"{url}/required_pull_request_reviews",
            "dismiss_stale_reviews": False,
            "require_code_owner_reviews": False,
            "required_approving_review_count": rule.required_approvals,
            "require_last_push_approval": False,
        },
        "enforce_admins": {"url": f"{url}/enforce_admins", "enabled": False},
        "required_linear_history": {"enabled": False},
        "allow_force_pushes": {"enabled": False},
        "allow_deletions": {"enabled": False},
        "required_conversation_resolution": {"enabled": False},
        "lock_branch": {"enabled": False},
        "allow_fork_syncing": {"enabled": False},
    }


@route("repos/get-branch")
async def get_branch(ctx: Ctx) -> Reply:
    sim = ctx.sim
    with sim.lock:
        repo = ctx.repo()
        branch = ctx.params["branch"]
        git = _git(ctx, repo)
        sha = git.branch_sha(branch) if valid_branch(branch) else None
        if sha is None:
            raise ApiError(404, "Branch not found")
        protected = branch in repo.protections
        api = sim.urls.repo(repo.full_name)
        rule = repo.protections.get(branch)
        return Reply(
            200,
            {
                "name": branch,
                "commit": ob.commit_obj(sim.urls, repo, git.commit_info(sha)),
                "_links": {
                    "html": f"{sim.urls.web}/{repo.full_name}/tree/{branch}",
                    "self": f"{api}/branches/{branch}",
                },
                "protected": protected,
                "protection": {
                    "enabled": protected,
                    "required_status_checks": {
                        "enforcement_level": "non_admins" if protected else "off",
                        "contexts": list(rule.required_checks) if rule else [],
                        "checks": [
                            {"context": c, "app_id": rule.check_apps.get(c)}
                            for c in rule.required_checks
                        ]
                        if rule
                        else [],
                    },
                },
                "protection_url": f"{api}/branches/{branch}/protection",
            },
        )


@route("repos/get-branch-protection")
async def get_protection(ctx: Ctx) -> Reply:
    with ctx.sim.lock:
        repo = ctx.repo()
        branch = ctx.params["branch"]
        if branch not in repo.protections:
            raise ApiError(404, "Branch not protected")
        return Reply(200, _protection_json(ctx, repo, branch))


def _content_json(
    ctx: Ctx, repo: RepoState, ref: str, path: str, sha: str, data: bytes
) -> dict[str, Any]:
    urls = ctx.sim.urls
    api = f"{urls.repo(repo.full_name)}/contents/{path}?ref={ref}"
    git_url = f"{urls.repo(repo.full_name)}/git/blobs/{sha}"
    html = f"{urls.web}/{repo.full_name}/blob/{ref}/{path}"
    return {
        "type": "file",
        "encoding": "base64",
        "size": len(data),
        "name": path.rsplit("/", 1)[-1],
        "path": path,
        "content": base64.encodebytes(data).decode(),
        "sha": sha,
        "url": api,
        "git_url": git_url,
        "html_url": html,
        "download_url": f"{urls.web}/raw/{repo.full_name}/{ref}/{path}",
        "_links": {"self": api, "git": git_url, "html": html},
    }


@route("repos/get-content")
async def get_content(ctx: Ctx) -> Reply:
    with ctx.sim.lock:
        repo = ctx.repo()
        git = _git(ctx, repo)
        path = ctx.params["path"].strip("/")
        ref = ctx.query.get("ref") or repo.default_branch
        commit = git.resolve(ref)
        if commit is None:
            raise ApiError(404, f"No commit found for the ref {ref}")
        kind = git.run("cat-file", "-t", f"{commit}:{path}", check=False).stdout.decode().strip()
        if kind == "tree":
            listing = git.out("ls-tree", "-l", f"{commit}:{path}")
            items = []
            for line in listing.splitlines():
                meta, _, name = line.partition("\t")
                _mode, otype, osha, size = meta.split()
                full = f"{path}/{name}" if path else name
                entry = _content_json(ctx, repo, ref, full, osha, b"")
                entry.pop("content")
                entry.pop("encoding")
                entry.update(
                    type="file" if otype == "blob" else "dir",
                    size=int(size) if size.isdigit() else 0,
                )
                items.append(entry)
            return Reply(200, items, raw=True)
        data = git.file_at(commit, path)
        blob = git.blob_sha(commit, path)
        if data is None or blob is None:
            raise not_found()
        return Reply(200, _content_json(ctx, repo, ref, path, blob, data))


@route("repos/create-or-update-file-contents")
async def put_content(ctx: Ctx) -> Reply:
    sim = ctx.sim
    with sim.lock:
        repo = ctx.repo()
        git = _git(ctx, repo)
        path = ctx.params["path"].strip("/")
        message = ctx.field("message", str, resource="Content")
        encoded = ctx.field("content", str, resource="Content")
        branch = ctx.field(
            "branch", str, required=False, default=repo.default_branch, resource="Content"
        )
        given_sha = ctx.field("sha", str, required=False, resource="Content")
        try:
            data = base64.b64decode(encoded, validate=False)
        except (binascii.Error, ValueError):
            raise invalid("Content", "content") from None
        if not valid_branch(branch) or not path or ".." in path.split("/"):
            raise invalid("Content", "path")
        if branch in repo.protections:
            raise ApiError(409, "Changes must be made through a pull request.")
        before = git.branch_sha(branch)
        if before is None:
            raise ApiError(404, f"Branch {branch} not found")
        existing = git.blob_sha(before, path)
        if existing is not None and given_sha != existing:
            raise ApiError(409, f"{path} does not match {given_sha or 'missing sha'}")
        if existing is None and given_sha:
            raise ApiError(409, f"{path} does not match {given_sha}")
        bot = sim.users[ctx.actor_login]
        sha = git.commit_files(
            before,
            {path: data},
            message,
            (bot.login, f"{bot.id}+{bot.login}@users.noreply.sim.invalid"),
        )
        git.update_ref(f"refs/heads/{branch}", sha, before)
        sim.on_ref_changes(repo, {f"refs/heads/{branch}": (before, sha)}, ctx.actor_login)
        blob = git.blob_sha(sha, path) or ZERO
        content = _content_json(ctx, repo, branch, path, blob, data)
        content.pop("content")
        content.pop("encoding")
        info = git.commit_info(sha)
        commit = ob.git_commit_obj(sim.urls, repo, info)
        commit.update(
            sha=info.sha,
            node_id=ob.node_id("Commit", info.sha[:12]),
            html_url=f"{sim.urls.web}/{repo.full_name}/commit/{info.sha}",
            parents=[
                {
                    "sha": p,
                    "url": f"{sim.urls.repo(repo.full_name)}/git/commits/{p}",
                    "html_url": f"{sim.urls.web}/{repo.full_name}/commit/{p}",
                }
                for p in info.parents
            ],
        )
        return Reply(201 if existing is None else 200, {"content": content, "commit": commit})


def _ref_name(ctx: Ctx) -> str:
    ref = ctx.params["ref"]
    if not ref.startswith(("heads/", "tags/")) or not valid_branch(ref):
        raise not_found()
    return "refs/" + ref


@route("git/get-ref")
async def get_ref(ctx: Ctx) -> Reply:
    with ctx.sim.lock:
        repo = ctx.repo()
        ref = _ref_name(ctx)
        sha = _git(ctx, repo).refs().get(ref)
        if sha is None:
            raise not_found()
        return Reply(200, ob.ref_obj(ctx.sim.urls, repo, ref, sha))


@route("git/create-ref")
async def create_ref(ctx: Ctx) -> Reply:
    sim = ctx.sim
    with sim.lock:
        repo = ctx.repo()
        git = _git(ctx, repo)
        ref = ctx.field("ref", str, resource="Reference")
        sha = ctx.field("sha", str, resource="Reference")
        if not ref.startswith("refs/") or ref.count("/") < 2 or not valid_branch(ref):
            raise ApiError(
                422,
                "Reference name is invalid"
                if ref.startswith("refs/")
                else "ref must start with 'refs/' and have at least two slashes.",
            )
        if len(sha) != 40 or not git.object_exists(sha):
            raise ApiError(422, "Object does not exist")
        if ref in git.refs():
            raise ApiError(422, "Reference already exists")
        git.update_ref(ref, sha, ZERO)
        sim.on_ref_changes(repo, {ref: (ZERO, sha)}, ctx.actor_login)
        obj = ob.ref_obj(sim.urls, repo, ref, sha)
    return Reply(201, obj, {"Location": obj["url"]})


@route("git/update-ref")
async def update_ref(ctx: Ctx) -> Reply:
    sim = ctx.sim
    with sim.lock:
        repo = ctx.repo()
        git = _git(ctx, repo)
        ref = _ref_name(ctx)
        sha = ctx.field("sha", str, resource="Reference")
        force = bool(ctx.field("force", bool, required=False, default=False, resource="Reference"))
        before = git.refs().get(ref)
        if before is None:
            raise ApiError(422, "Reference does not exist")
        if len(sha) != 40 or not git.object_exists(sha):
            raise ApiError(422, "Object does not exist")
        branch = ref.removeprefix("refs/heads/")
        if branch in repo.protections and ref.startswith("refs/heads/"):
            raise ApiError(
                422, "Protected branch update failed: changes must be made through a pull request."
            )
        if not force and not git.is_ancestor(before, sha):
            raise ApiError(422, "Update is not a fast forward")
        git.update_ref(ref, sha, before)
        if before != sha:
            sim.on_ref_changes(repo, {ref: (before, sha)}, ctx.actor_login)
        return Reply(200, ob.ref_obj(sim.urls, repo, ref, sha))


@route("git/delete-ref")
async def delete_ref(ctx: Ctx) -> Reply:
    sim = ctx.sim
    with sim.lock:
        repo = ctx.repo()
        git = _git(ctx, repo)
        ref = _ref_name(ctx)
        before = git.refs().get(ref)
        if before is None:
            raise ApiError(422, "Reference does not exist")
        if (
            ref.removeprefix("refs/heads/") in repo.protections
            or ref == f"refs/heads/{repo.default_branch}"
        ):
            raise ApiError(422, "Cannot delete a protected or default branch")
        git.delete_ref(ref)
        sim.on_ref_changes(repo, {ref: (before, ZERO)}, ctx.actor_login)
        return Reply(204)


@route("repos/compare-commits-with-basehead")
async def compare(ctx: Ctx) -> Reply:
    sim = ctx.sim
    with sim.lock:
        repo = ctx.repo()
        git = _git(ctx, repo)
        basehead = ctx.params["basehead"]
        if "..." not in basehead:
            raise not_found()
        base_name, head_name = basehead.split("...", 1)
        base_sha, head_sha = git.resolve(base_name), git.resolve(head_name)
        if base_sha is None or head_sha is None:
            raise not_found()
        mb = git.merge_base(base_sha, head_sha) or base_sha
        ahead = git.rev_list(f"{mb}..{head_sha}", "--reverse")
        behind = git.rev_list(f"{mb}..{base_sha}")
        status = (
            "identical"
            if base_sha == head_sha
            else ("ahead" if not behind else "behind" if not ahead else "diverged")
        )
        urls = sim.urls
        files = []
        for f in git.changed_files(base_sha, head_sha):
            blob = str(f["sha"])
            files.append(
                {
                    **f,
                    "blob_url": f"{urls.web}/{repo.full_name}/blob/{head_sha}/{f['filename']}",
                    "raw_url": f"{urls.web}/{repo.full_name}/raw/{head_sha}/{f['filename']}",
                    "contents_url": f"{urls.repo(repo.full_name)}/contents/{f['filename']}?ref={head_sha}",
                    "sha": blob,
                }
            )
        return Reply(
            200,
            {
                "url": f"{urls.repo(repo.full_name)}/compare/{basehead}",
                "html_url": f"{urls.web}/{repo.full_name}/compare/{basehead}",
                "permalink_url": f"{urls.web}/{repo.full_name}/compare/{base_sha}...{head_sha}",
                "diff_url": f"{urls.web}/{repo.full_name}/compare/{basehead}.diff",
                "patch_url": f"{urls.web}/{repo.full_name}/compare/{basehead}.patch",
                "base_commit": ob.commit_obj(urls, repo, git.commit_info(base_sha)),
                "merge_base_commit": ob.commit_obj(urls, repo, git.commit_info(mb)),
                "status": status,
                "ahead_by": len(ahead),
                "behind_by": len(behind),
                "total_commits": len(ahead),
                "commits": [ob.commit_obj(urls, repo, git.commit_info(s)) for s in ahead[:250]],
                "files": files,
            },
        )


@route("repos/get-collaborator-permission-level")
async def permission(ctx: Ctx) -> Reply:
    sim = ctx.sim
    with sim.lock:
        repo = ctx.repo()
        login = ctx.params["username"]
        user = sim.users.get(login)
        if user is None:
            raise not_found()
        level = permission_of(repo, login)
        assert level in PERMISSION_LEVELS
        legacy = {"maintain": "write", "triage": "read"}.get(level, level)
        obj = ob.user_obj(sim.urls, user)
        obj["permissions"] = {
            "admin": level == "admin",
            "maintain": level in ("maintain", "admin"),
            "push": level in ("write", "maintain", "admin"),
            "triage": level in ("triage", "write", "maintain", "admin"),
            "pull": level != "none",
        }
        obj["role_name"] = level
        return Reply(200, {"permission": legacy, "role_name": level, "user": obj})


@route("repos/create-commit-status")
async def create_status(ctx: Ctx) -> Reply:
    sim = ctx.sim
    with sim.lock:
        repo = ctx.repo()
        git = _git(ctx, repo)
        sha = ctx.params["sha"]
        if len(sha) != 40 or not git.object_exists(sha):
            raise invalid("Status", "sha", "invalid", "No commit found for SHA: " + sha)
        state = ctx.field("state", str, resource="Status")
        if state not in ("error", "failure", "pending", "success"):
            raise invalid("Status", "state")
        st = CommitStatus(
            sim.ids.next(),
            sha,
            state,
            ctx.field("context", str, required=False, default="default", resource="Status"),
            ctx.field("description", str, required=False, resource="Status"),
            ctx.field("target_url", str, required=False, resource="Status"),
            ctx.actor_login,
        )
        repo.statuses.append(st)
        obj = ob.status_obj(sim.urls, repo, st, sim.users)
    return Reply(201, obj, {"Location": obj["url"]})


@route("repos/get-combined-status-for-ref")
async def combined_status(ctx: Ctx) -> Reply:
    sim = ctx.sim
    with sim.lock:
        repo = ctx.repo()
        git = _git(ctx, repo)
        sha = git.resolve(ctx.params["ref"])
        if sha is None:
            raise not_found()
        latest: dict[str, CommitStatus] = {}
        for st in sorted((s for s in repo.statuses if s.sha == sha), key=lambda s: s.id):
            latest[st.context] = st
        states = [s.state for s in latest.values()]
        if any(s in ("error", "failure") for s in states):
            overall = "failure"
        elif not states or any(s == "pending" for s in states):
            overall = "pending"
        else:
            overall = "success"
        owner = _owner(ctx, repo)
        statuses = [ob.status_obj(sim.urls, repo, s, sim.users) for s in latest.values()]
        chunk, headers = paginate(ctx, statuses)
        minimal = dict(ob.repo_obj(sim.urls, repo, owner).items())
        return Reply(
            200,
            {
                "state": overall,
                "statuses": chunk,
                "sha": sha,
                "total_count": len(statuses),
                "repository": minimal,
                "commit_url": f"{sim.urls.repo(repo.full_name)}/commits/{sha}",
                "url": f"{sim.urls.repo(repo.full_name)}/commits/{sha}/status",
            },
            headers,
        )
