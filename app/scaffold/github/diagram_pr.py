"""DiagramCheck on any pull request of an installed repository, as a GitHub check.

For each new head the App fetches it into its clone, runs the analyzer between the base
branch and the head (with ``diagrams`` from the DEFAULT branch's config, so a PR cannot
relax its own check), and reports a check run ``scaffold/diagram-check`` with
annotations, plus ONE PR comment listing what is missing, edited in place (none for a PR
that always passed). A head the analyzer cannot get through fails the check, saying so:
a check that could not run never passes.
"""

from __future__ import annotations

import asyncio
import logging
import re
from typing import Any

from scaffold.diagramcheck.analyzer import analyze_commits
from scaffold.diagramcheck.findings import Report
from scaffold.diagramcheck.render import check_annotations, render_markdown
from scaffold.errors import GitError, ScaffoldError
from scaffold.git.runner import run_git
from scaffold.github.access import same_repository
from scaffold.github.client import edit_comment, post_comment, repo_vars
from scaffold.github.runner import RepoContext

log = logging.getLogger("scaffold.app")

COMMENT_MARKER = "<!-- scaffold:diagram-check -->"
MAX_ANNOTATIONS = 50  # per request, GitHub's limit


def _title(report: Report) -> str:
    if not report.blocking:
        return "Diagrams in sync"
    n = len(report.failures)
    return f"{n} diagram update{'s' * (n != 1)} missing"


_SHA = re.compile(r"^[0-9a-f]{40}(?:[0-9a-f]{24})?$")


def _safe_branch(ctx: RepoContext, name: str) -> bool:
    """A branch name from a payload, checked before it goes into a refspec."""
    if not name or name.startswith("-") or ":" in name or "@{" in name:
        return False
    out = run_git(["check-ref-format", f"refs/heads/{name}"], cwd=ctx.checkout.path, check=False)
    return out.returncode == 0


async def _fetch_head(ctx: RepoContext, pr: dict[str, Any], head_sha: str) -> None:
    token = await ctx.client.token()
    number = int(pr["number"])
    if not _SHA.match(head_sha):
        raise ScaffoldError(f"#{number}: not a commit id: {head_sha!r}")
    refspecs = [f"+refs/pull/{number}/head:refs/scaffold/pr/{number}"]
    head_ref = str(pr["head"]["ref"])
    # The branch itself only when it is this repository's (a fork's may share its name).
    if same_repository(pr, ctx.full_name) and _safe_branch(ctx, head_ref):
        refspecs.append(f"+refs/heads/{head_ref}:refs/scaffold/pr/{number}")
    # The base branch as it is now, in the same fetch: the diff is taken against it
    # (and the config read from the default branch), with no fetch of everything else.
    base_ref = str(pr["base"]["ref"])
    base = (
        [f"+refs/heads/{base_ref}:refs/remotes/origin/{base_ref}"]
        if _safe_branch(ctx, base_ref)
        else []
    )

    def work() -> None:
        with ctx.default_branch_lock:
            for refspec in refspecs:
                if ctx.checkout.fetch_refspecs(token, refspec, *base, check=False):
                    break
            have = run_git(
                ["cat-file", "-e", f"{head_sha}^{{commit}}"], cwd=ctx.checkout.path, check=False
            )
            if have.returncode != 0:
                raise ScaffoldError(f"cannot fetch the head {head_sha[:12]} of #{number}")

    await asyncio.to_thread(work)


def _failure_text(exc: BaseException) -> str:
    if isinstance(exc, ScaffoldError | GitError):
        return str(exc)
    kind = type(exc).__name__
    detail = str(exc).splitlines()[0][:500] if str(exc) else ""
    return (
        f"The analyzer could not get through this head ({kind}{': ' + detail if detail else ''})."
        " A file too deeply nested or too large to analyze blocks the check: simplify it."
    )


async def check_pull_request(
    ctx: RepoContext, pr: dict[str, Any], *, force: bool, bot: str | None = None
) -> Report | None:
    """Run DiagramCheck on ``pr``'s head and report it; None when it was already done.

    ``bot`` is the App's own login: the comment it edits is its own, no one else's."""
    where = repo_vars(ctx.full_name)
    number = int(pr["number"])
    head_sha = str(pr["head"]["sha"])
    run = await ctx.app.start_check(
        ctx.client, ctx.full_name, head_sha, {"status": "in_progress"}, force=force
    )
    if run is None:
        return None

    async def update(data: dict[str, Any]) -> None:
        await ctx.client.patch(
            "/repos/{owner}/{repo}/check-runs/{check_run_id}",
            {**where, "check_run_id": int(run["id"])},
            data=data,
        )

    try:
        await _fetch_head(ctx, pr, head_sha)
        base_ref = f"origin/{pr['base']['ref']}"
        config = ctx.checkout.config().diagrams
        base_sha = run_git(["rev-parse", base_ref], cwd=ctx.checkout.path).stdout.strip()
        report = await asyncio.to_thread(
            analyze_commits, ctx.checkout.path, base_sha, head_sha, config
        )
    except Exception as exc:  # any failure (MemoryError, RecursionError...) ends the run
        text = _failure_text(exc)
        log.warning(
            "diagram check could not run",
            extra={"repo": ctx.full_name, "pr": number, "error": text},
        )
        failed = {"title": "DiagramCheck could not run", "summary": text[:60000]}
        await update({"status": "completed", "conclusion": "failure", "output": failed})
        if isinstance(exc, ScaffoldError | GitError):
            raise
        raise ScaffoldError(f"#{number}: DiagramCheck could not run: {text}") from None
    summary = render_markdown(report)
    annotations = [dict(a) for a in check_annotations(report)]
    # The first request completes the run; later ones add the rest of the annotations.
    for start in range(0, max(len(annotations), 1), MAX_ANNOTATIONS):
        batch = annotations[start : start + MAX_ANNOTATIONS]
        output = {"title": _title(report), "summary": summary[:60000], "annotations": batch}
        done = (
            {"status": "completed", "conclusion": "failure" if report.blocking else "success"}
            if not start
            else {}
        )
        await update({**done, "output": output})
    await _sync_comment(ctx, where, number, report, summary, bot)
    log.info(
        "diagram check reported",
        extra={"repo": ctx.full_name, "pr": number, "blocking": report.blocking},
    )
    return report


async def _sync_comment(
    ctx: RepoContext,
    where: dict[str, str | int],
    number: int,
    report: Report,
    summary: str,
    bot: str | None,
) -> None:
    comments = await ctx.client.get_all(
        "/repos/{owner}/{repo}/issues/{number}/comments", {**where, "number": number}
    )

    def mine(comment: dict[str, Any]) -> bool:
        login = str((comment.get("user") or {}).get("login", ""))
        return login == bot if bot else login.endswith("[bot]")

    ours = next(
        (c for c in comments if COMMENT_MARKER in str(c.get("body") or "") and mine(c)),
        None,
    )
    body = f"{COMMENT_MARKER}\n{summary}"
    if ours is None:
        if report.blocking:
            await post_comment(ctx.client, ctx.full_name, number, body)
        return
    if ours.get("body") != body:
        await edit_comment(ctx.client, ctx.full_name, int(ours["id"]), body)
