"""``scaffold diagram-check`` and ``scaffold diagrams generate``.

Exit codes: 0 the diagrams are in sync (or the drafts were printed/written); 1
DiagramCheck blocks the change; 2 usage or configuration error.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from scaffold.git.runner import repo_toplevel

# Only what `diagram-check` needs is imported here: the command starts in a few tens of
# milliseconds (no pydantic, no orchestrator, no aiohttp or mcp). The rest loads on use.
KINDS = ("architecture", "data-model", "states")

repo_option = click.option(
    "--repo",
    "repo_path",
    type=click.Path(file_okay=False),
    default=None,
    help="The git repository (default: the one around the current directory).",
)


def repo_root(path: str | None) -> Path:
    """The top of the git repository around ``path`` (default: the current directory)."""
    return repo_toplevel(Path(path) if path else Path.cwd())


@click.command(name="diagram-check")
@repo_option
@click.option("--base", required=True, help="The commit the change starts from.")
@click.option("--head", default="HEAD", show_default=True, help="The commit the change ends at.")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "json", "github", "markdown"]),
    default="text",
    show_default=True,
    help="github: workflow commands (::error) for GitHub Actions.",
)
def diagram_check(repo_path: str | None, base: str, head: str, fmt: str) -> None:
    """Exit 1 when a change leaves the diagrams behind the code.

    Compares HEAD with the merge base of BASE and HEAD, like a pull request:
    new modules need the architecture diagram, changed data classes the data
    model, changed states the state diagram, finished milestones the roadmap.
    """
    from scaffold.diagramcheck.analyzer import analyze
    from scaffold.diagramcheck.render import render

    repo = repo_root(repo_path)
    report = analyze(repo, base, head)
    click.echo(render(report, fmt), nl=False)
    sys.exit(1 if report.blocking else 0)


@click.group(name="diagrams")
def diagrams() -> None:
    """Mermaid diagrams drawn from the code."""


@diagrams.command(name="generate")
@repo_option
@click.option(
    "--kind",
    type=click.Choice([*KINDS, "all"]),
    default="all",
    show_default=True,
    help="Which diagram to draft.",
)
@click.option(
    "--write",
    is_flag=True,
    help="Update the generated block of the configured diagram files (prose is kept).",
)
def generate(repo_path: str | None, kind: str, write: bool) -> None:
    """Draft the architecture, data-model and state diagrams from the Python sources."""
    from scaffold.config import load_config
    from scaffold.diagramcheck.generate import drafts, fenced, read_sources, target_path
    from scaffold.diagramcheck.generate import write_drafts as write_files

    repo = repo_root(repo_path)
    cfg = load_config(repo).diagrams
    kinds = KINDS if kind == "all" else (kind,)
    bodies = drafts(read_sources(repo, cfg), cfg, kinds)
    if write:
        written = write_files(repo, cfg, bodies)
        click.echo("updated: " + ", ".join(written) if written else "diagrams already up to date")
        return
    for name, blocks in bodies.items():
        if len(bodies) > 1:
            click.echo(f"<!-- {name}: {target_path(cfg, name)} -->")
        click.echo(fenced(blocks))
