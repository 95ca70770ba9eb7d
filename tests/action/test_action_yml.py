"""action.yml and the workflows parse, and name every mode and output the CLI has."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from actionkit import ROOT
from ruamel.yaml import YAML

from scaffold.action.diagram_check import OUTPUTS
from scaffold.action.slot import SlotResult
from scaffold.cli.action_cmds import action


def _load(path: Path) -> Any:
    return YAML(typ="safe").load(path.read_text(encoding="utf-8"))


ACTION = _load(ROOT / "action.yml")
STEP_OF_MODE = {"diagram-check": "diagram-check", "slot": "slot", "event": "event"}


def _steps() -> list[dict[str, Any]]:
    steps: list[dict[str, Any]] = ACTION["runs"]["steps"]
    return steps


def test_action_is_composite_with_pinned_actions() -> None:
    assert ACTION["runs"]["using"] == "composite"
    uses = [s["uses"] for s in _steps() if "uses" in s]
    assert "actions/setup-python@v5" in uses
    assert "actions/upload-artifact@v4" in uses
    assert ACTION["inputs"]["python-version"]["default"] == "3.11"
    assert ACTION["inputs"]["mode"]["required"] is True
    install = next(s for s in _steps() if s.get("name") == "Install scaffold")
    assert install["env"]["SCAFFOLD_ACTION_PATH"] == "${{ github.action_path }}"
    # issue 27: pinned versions with hashes, nothing resolved from ranges at run time
    run = install["run"]
    assert '-r "$SCAFFOLD_ACTION_PATH/requirements/uv.txt"' in run
    assert '-r "$SCAFFOLD_ACTION_PATH/requirements/action.txt")' in run
    assert run.count("--require-hashes") == 2
    assert "pip install" in run


def test_every_mode_has_its_step() -> None:
    modes = set(action.commands) - {"agent-clis"}  # a helper of the install step, not a mode
    assert modes == set(STEP_OF_MODE)
    install = next(s for s in _steps() if s.get("name") == "Install the agent CLIs")
    assert "action agent-clis" in install["run"]
    check = _steps()[0]["run"]
    for mode in modes:
        step = next(s for s in _steps() if s.get("id") == STEP_OF_MODE[mode])
        assert step["if"] == f"inputs.mode == '{mode}'"
        assert f"action {mode} " in step["run"] or step["run"].rstrip("'").endswith(
            f'action {mode} --state-dir "$GITHUB_WORKSPACE/.scaffold-state"'
        )
        assert mode in check
    upload = next(s for s in _steps() if s.get("uses", "").startswith("actions/upload-artifact"))
    assert upload["if"] == "always() && inputs.mode == 'slot'"
    assert upload["with"]["path"] == "${{ runner.temp }}/scaffold-slot"
    slot_step = next(s for s in _steps() if s.get("id") == "slot")
    assert '--output-dir "$RUNNER_TEMP/scaffold-slot"' in slot_step["run"]


def test_every_output_the_cli_writes_is_declared() -> None:
    written = {
        "diagram-check": set(OUTPUTS),
        "slot": set(SlotResult(0, "b", None, None, None, Path("/tmp/x")).outputs()),
        "event": {"handled"},
    }
    declared = ACTION["outputs"]
    for mode, names in written.items():
        for name in names:
            assert name in declared, name
            assert (
                declared[name]["value"] == f"${{{{ steps.{STEP_OF_MODE[mode]}.outputs.{name} }}}}"
            )
    assert set(declared) == written["diagram-check"] | written["slot"] | written["event"]


def test_inputs_reach_scripts_only_through_the_environment() -> None:
    """No ``${{ inputs.x }}`` inside a script (injection); every input used is declared."""
    used: set[str] = set()
    text = (ROOT / "action.yml").read_text(encoding="utf-8")
    used |= set(re.findall(r"inputs\.([a-z-]+)", text))
    assert used <= set(ACTION["inputs"])
    for step in _steps():
        assert "${{" not in step.get("run", ""), step.get("name")


def test_workflows_parse() -> None:
    ci = _load(ROOT / ".github" / "workflows" / "ci.yml")
    steps = ci["jobs"]["test"]["steps"]
    assert steps[0]["with"]["fetch-depth"] == 0
    assert any(s.get("run") == "./scripts/test" for s in steps)
    local = next(s for s in steps if s.get("uses") == "./")
    assert local["with"]["mode"] == "diagram-check"
    assert local["if"] == "github.event_name == 'pull_request'"

    dc = _load(ROOT / "examples" / "workflows" / "diagram-check.yml")
    assert set(dc["on"]) == {"pull_request"}
    assert dc["permissions"] == {"contents": "read"}

    slot = _load(ROOT / "examples" / "workflows" / "scaffold-slot.yml")
    inputs = slot["on"]["workflow_dispatch"]["inputs"]
    assert set(inputs) == {
        "quest-id",
        "task-id",
        "role",
        "run-spec",
        "resume-session",
        "session-run-id",
    }
    assert slot["permissions"] == {"contents": "write", "actions": "read"}
    step = next(s for s in slot["jobs"]["slot"]["steps"] if s.get("id") == "slot")
    assert step["with"]["mode"] == "slot"
    assert step["env"]["ANTHROPIC_API_KEY"] == "${{ secrets.ANTHROPIC_API_KEY }}"
    assert set(step["with"]) - {"mode", "artifact-name"} <= set(ACTION["inputs"])

    ev = _load(ROOT / "examples" / "workflows" / "scaffold-event.yml")
    assert {"issues", "issue_comment", "pull_request_review", "schedule"} <= set(ev["on"])
    assert ev["concurrency"]["cancel-in-progress"] is False
    step = ev["jobs"]["scaffold"]["steps"][0]
    assert step["with"] == {"mode": "event"}


def test_event_mode_keeps_its_state_in_the_cache() -> None:
    restore = next(s for s in _steps() if s.get("name") == "Restore scaffold's state")
    save = next(s for s in _steps() if s.get("name") == "Save scaffold's state")
    assert restore["uses"] == "actions/cache/restore@v4"
    assert save["uses"] == "actions/cache/save@v4"
    # issue 27: the same path string on every run (act and self-hosted runners give each
    # job another temp folder and workspace), so the cache version matches
    assert restore["with"]["path"] == save["with"]["path"] == ".scaffold-state"
    assert save["if"] == "always() && inputs.mode == 'event'"
    assert restore["with"]["restore-keys"] == "scaffold-state-${{ github.repository }}-"


def test_examples_pin_the_release_tag_the_release_workflow_makes() -> None:
    """Issue 12: the examples named a tag (v1) no release ever made."""
    import tomllib

    from scaffold import __version__

    project = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["project"]
    assert project["version"] == __version__
    tag = f"v{__version__}"
    for path in sorted((ROOT / "examples" / "workflows").glob("*.yml")):
        text = path.read_text("utf-8")
        pins = re.findall(r"uses:\s*<owner>/scaffold@(\S+)", text)
        assert pins, path.name
        assert set(pins) == {tag}, path.name
    release = _load(ROOT / ".github" / "workflows" / "release.yml")
    assert release["on"] == {"push": {"tags": ["v*.*.*"]}}
    runs = [s.get("run", "") for s in release["jobs"]["release"]["steps"]]
    assert "./scripts/test" in runs
    assert any('"scaffold, version ${TAG#v}"' in r for r in runs)  # tag == version
    assert any(r.startswith("gh release create") for r in runs)


def test_cache_paths_are_the_same_on_every_run() -> None:
    """actions/cache hashes the path into the cache's version: no per-run folder in it."""
    cached = [s for s in _steps() if s.get("uses", "").startswith("actions/cache")]
    assert len(cached) == 4
    for step in cached:
        path = step["with"]["path"]
        assert "${{" not in path, step["name"]
        assert "runner.temp" not in path
        assert "github.workspace" not in path
    install = [s for s in cached if "install" in s["name"]]
    assert {s["with"]["path"] for s in install} == {"~/.cache/scaffold-action"}
    assert {s["with"]["key"] for s in install} == {"${{ steps.mode.outputs.install-key }}"}
