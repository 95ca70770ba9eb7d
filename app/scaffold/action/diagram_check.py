"""DiagramCheck as a workflow step: the event's commits in, annotations and outputs out.

:func:`choose_range` picks the two commits (or why there is nothing to check);
:func:`run_diagram_check` fetches what a shallow checkout lacks, runs the analyzer and
writes the annotations, the JSON report, the job summary and the step outputs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scaffold.action.env import SHA, ActionEnv
from scaffold.action.outputs import append_summary, write_outputs
from scaffold.diagramcheck.analyzer import analyze, config_at
from scaffold.diagramcheck.git_diff import check_ref, resolve_commit
from scaffold.diagramcheck.render import render, render_json, render_markdown, workflow_command
from scaffold.errors import UsageError
from scaffold.git.changes import NULL_SHA
from scaffold.git.runner import NETWORK_TIMEOUT_S, SAFE_LOCAL, run_git

TITLE = "DiagramCheck"
REPORT_DIR = "scaffold-diagram-check"
PULL_REQUEST_EVENTS = frozenset({"pull_request", "pull_request_target"})


def _sha(value: Any) -> str | None:
    if isinstance(value, str) and SHA.match(value.lower()):
        return value.lower()
    return None


def _field(obj: Mapping[str, Any], outer: str, inner: str) -> Any:
    value = obj.get(outer)
    return value.get(inner) if isinstance(value, dict) else None


@dataclass(frozen=True)
class Skip:
    reason: str


def choose_range(
    repo: Path,
    event_name: str,
    payload: Mapping[str, Any],
    default_head: str | None,
    base: str | None,
    head: str | None,
) -> tuple[str, str] | Skip:
    """The commits to compare: ``base``/``head`` win over what the event names.

    A pull request compares ``base.sha`` with ``head.sha``; a push ``before``
    with ``after``. A push that created the branch (``before`` all zeros) is
    checked against the parent of ``after``; a root commit or a deleted branch
    leaves nothing to check. Any other event needs ``base``.
    """
    found_base = found_head = None
    if event_name in PULL_REQUEST_EVENTS:
        pr = payload.get("pull_request")
        if not isinstance(pr, dict):
            raise UsageError(f"the {event_name} payload has no pull_request object")
        found_base, found_head = _sha(_field(pr, "base", "sha")), _sha(_field(pr, "head", "sha"))
    elif event_name == "push":
        before, after = _sha(payload.get("before")), _sha(payload.get("after"))
        if after is None or after == NULL_SHA:
            if not base and not head:
                return Skip("the push deleted the branch: nothing to check")
        else:
            found_base, found_head = (None if before == NULL_SHA else before), after
    the_head = head or found_head or default_head or "HEAD"
    the_base = base or found_base
    if the_base is None and event_name == "push":
        parent = parent_commit(repo, the_head)
        if parent is None:
            return Skip(
                f"the push created a branch at a root commit ({the_head[:12]}): nothing to compare"
            )
        the_base = parent
    if the_base is None:
        if event_name in PULL_REQUEST_EVENTS:
            raise UsageError(f"the {event_name} payload names no base commit; pass --base")
        what = f"a {event_name} event" if event_name else "a run outside GitHub Actions"
        raise UsageError(f"{what} names no commits to compare: pass --base (the `base` input)")
    return check_ref(the_base), check_ref(the_head)


# --------------------------------------------------------------------------- git


def _has_commit(repo: Path, ref: str) -> bool:
    out = run_git(["cat-file", "-e", "--end-of-options", f"{ref}^{{commit}}"], repo, check=False)
    return out.returncode == 0


def parent_commit(repo: Path, ref: str) -> str | None:
    out = run_git(
        ["rev-parse", "--verify", "--quiet", "--end-of-options", f"{check_ref(ref)}^1^{{commit}}"],
        repo,
        check=False,
    )
    sha = out.stdout.strip()
    return sha if out.returncode == 0 and SHA.match(sha) else None


def fetch_missing(repo: Path, refs: Sequence[str], pull_number: int | None = None) -> None:
    """Fetch commits a shallow or partial checkout lacks (best effort, quietly).

    ``actions/checkout`` fetches one commit by default; the merge base needs the
    history, so a shallow repository is deepened too. A pull request's head that
    fetching by id does not bring (a fork's commits) comes from
    ``refs/pull/<n>/head``, which GitHub keeps in the base repository. A failed
    fetch is left for the revision lookup to report.
    """
    shallow = (
        run_git(["rev-parse", "--is-shallow-repository"], repo, check=False).stdout.strip()
        == "true"
    )
    missing = [r for r in refs if SHA.match(r) and r != NULL_SHA and not _has_commit(repo, r)]
    if not missing and not shallow:
        return
    if run_git(["remote", "get-url", "origin"], repo, check=False).returncode != 0:
        return
    args = ["fetch", "--no-tags", "--quiet", *(["--unshallow"] if shallow else []), "origin"]
    run_git([*SAFE_LOCAL, *args, *missing], repo, check=False, timeout_s=NETWORK_TIMEOUT_S)
    still = [r for r in missing if not _has_commit(repo, r)]
    if still and pull_number is not None:
        refspec = f"+refs/pull/{pull_number}/head:refs/remotes/origin/pull/{pull_number}/head"
        run_git(
            [*SAFE_LOCAL, "fetch", "--no-tags", "--quiet", "origin", refspec],
            repo,
            check=False,
            timeout_s=NETWORK_TIMEOUT_S,
        )


def fork_of(event_name: str, payload: Mapping[str, Any]) -> str | None:
    """The fork a pull request comes from (its full name), or ``None`` (same repository,
    or not a pull request). A deleted fork (no head repository) counts as a fork."""
    pr = payload.get("pull_request")
    if event_name not in PULL_REQUEST_EVENTS or not isinstance(pr, dict):
        return None
    head, base = _field(pr, "head", "repo"), _field(pr, "base", "repo")
    if not isinstance(head, dict):
        return "a deleted fork"
    head_name = str(head.get("full_name") or "")
    base_name = str(base.get("full_name") or "") if isinstance(base, dict) else ""
    if head.get("fork") is True or (head_name and head_name.lower() != base_name.lower()):
        return head_name or "a fork"
    return None


def fork_note(fork: str) -> str:
    """What the job summary says on a pull request from a fork."""
    return (
        f"\n> [!NOTE]\n> This pull request comes from a fork ({fork}). GitHub gives its"
        " workflow a read-only token and no secrets, so DiagramCheck reports through the"
        " annotations above and this job summary only: it cannot post a pull request"
        " comment, a check run of its own or a commit status. It read the fork's code"
        " without running any of it, with the `diagrams` settings of the base commit (a"
        " pull request cannot relax its own check).\n"
    )


def _pull_number(payload: Mapping[str, Any]) -> int | None:
    pr = payload.get("pull_request")
    number = pr.get("number") if isinstance(pr, Mapping) else None
    return number if type(number) is int and number > 0 else None


# --------------------------------------------------------------------------- the step

OUTPUTS = ("blocking", "findings", "report")


def run_diagram_check(
    env: ActionEnv,
    payload: Mapping[str, Any],
    repo: Path,
    *,
    base: str | None,
    head: str | None,
    fmt: str,
    report_path: Path | None,
    echo: Callable[[str], None],
) -> int:
    """The whole step: prints, writes the report, summary and outputs; returns the exit
    code. Raises :class:`~scaffold.errors.ScaffoldError` for usage errors."""
    for given in (base, head):
        if given is not None:
            check_ref(given)
    fork = fork_of(env.event_name, payload)
    pull = _pull_number(payload) if env.event_name in PULL_REQUEST_EVENTS else None
    pr = payload.get("pull_request")
    named = (
        [_field(pr, "base", "sha"), _field(pr, "head", "sha")]
        if env.event_name in PULL_REQUEST_EVENTS and isinstance(pr, dict)
        else [payload.get("before"), payload.get("after")]
    )
    fetch_missing(repo, [r for r in (base, head, env.sha, *map(_sha, named)) if r], pull)
    chosen = choose_range(repo, env.event_name, payload, env.sha, base, head)
    if isinstance(chosen, Skip):
        blocking, findings, path = False, 0, ""
        text = workflow_command(
            "notice", f"DiagramCheck skipped: {chosen.reason}", {"title": TITLE}
        )
        text += "\n"
        summary = f"### DiagramCheck skipped\n\n{chosen.reason}.\n"
    else:
        base_sha, head_sha = chosen
        config = None
        if fork:  # the base commit's ``diagrams`` settings: a fork cannot relax its check
            config = config_at(repo, resolve_commit(repo, base_sha))
        report = analyze(repo, base_sha, head_sha, config)
        written = report_path or env.temp_dir() / REPORT_DIR / "report.json"
        written.parent.mkdir(parents=True, exist_ok=True)
        written.write_text(render_json(report), encoding="utf-8")
        blocking, findings, path = report.blocking, len(report.findings), str(written)
        text = render(report, fmt)
        if fmt == "github" and not blocking:
            passed = "DiagramCheck passed: the diagrams are in sync with the code"
            text += workflow_command("notice", passed, {"title": TITLE}) + "\n"
        summary = render_markdown(report) + (fork_note(fork) if fork else "")
    echo(text)
    append_summary(env.step_summary, summary)
    values = ("true" if blocking else "false", str(findings), path)
    write_outputs(env.output, dict(zip(OUTPUTS, values, strict=True)))
    return 1 if blocking else 0
