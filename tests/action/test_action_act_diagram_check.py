"""examples/workflows/diagram-check.yml under act: the DiagramCheck job as a user runs it.

Each test is one ``act pull_request`` run of the example workflow (``<owner>`` filled
in), with the real setup-python, cache and upload-artifact actions and scaffold's
action.yml as a tagged remote action (tests/action/actkit.py).
"""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest
from actionkit import ARCH, DATA, Repo, mermaid_doc, pull_request_payload
from actkit import ActRun, example_workflow, new_act, offline_install_env, require_prepared

# act runs whole jobs (the event test: two, with five agents): more than the default
# timeout on a busy machine, with act's own timeout below this one.
pytestmark = [pytest.mark.act, pytest.mark.timeout(240)]

MODEL = "from dataclasses import dataclass\n\n\n@dataclass\nclass Order:\n    id: int\n"


def _run(tmp_path: Path, action_cache: Path, *, with_diagrams: bool) -> tuple[ActRun, Repo]:
    repo = Repo.create(tmp_path / "ws")
    repo.git("remote", "add", "origin", "https://github.com/acme/widgets")
    base = repo.head()
    repo.write("app/pkg/models.py", MODEL)
    if with_diagrams:
        repo.write(ARCH, mermaid_doc('flowchart LR\n    app\n    pkg_models["pkg.models"]'))
        repo.write(
            DATA,
            mermaid_doc(
                "classDiagram\n    class Placeholder\n    class Order {\n        +int id\n    }"
            ),
        )
    head = repo.commit("a model")
    act = new_act(
        tmp_path, action_cache, repo.root, offline_install_env(require_prepared(), tmp_path)
    )
    workflow = act.write_workflow("diagram-check.yml", example_workflow("diagram-check.yml"))
    return act.run("pull_request", pull_request_payload(base, head), workflow), repo


def _uploaded_report(run: ActRun) -> dict[str, object]:
    [archive] = [p for p in run.artifacts.rglob("*") if p.is_file()]
    if archive.suffix == ".zip":
        with zipfile.ZipFile(archive) as z:
            [name] = z.namelist()
            data: dict[str, object] = json.loads(z.read(name))
            return data
    loaded: dict[str, object] = json.loads(archive.read_text(encoding="utf-8"))
    return loaded


def test_blocking_pull_request_fails_the_job(tmp_path: Path, act_action_cache: Path) -> None:
    run, _ = _run(tmp_path, act_action_cache, with_diagrams=False)
    log = run.text()
    assert run.returncode == 1, log[-4000:]
    assert "Job 'DiagramCheck' failed" in run.stderr
    results = run.step_results()
    assert results["diagrams/mode"] == "success"
    assert results["diagrams/install-cache"] == "success"
    assert results["diagrams/diagram-check"] == "failure"
    # one annotation a finding, on the line of the code that needs a diagram change
    assert (
        "::error file=app/pkg/models.py,line=1,title=DiagramCheck%3A module-added "
        "(docs/diagrams/02-architecture.md)::" in log
    )
    assert (
        "::error file=app/pkg/models.py,line=5,title=DiagramCheck%3A class-added "
        "(docs/diagrams/05-data-model.md)::" in log
    )
    # what action.yml's `outputs:` mapping gave the composite step (act's first value)
    outputs = run.step_outputs("diagrams")
    assert outputs["blocking"] == "true"
    assert outputs["findings"] == "2"
    assert outputs["report"].endswith("/scaffold-diagram-check/report.json")
    assert outputs["signal"] == outputs["head-sha"] == outputs["handled"] == ""
    assert len(outputs) == 8  # action.yml's outputs, each mapped once
    assert "### ❌ DiagramCheck: the diagrams lag the code" in log
    # the workflow's next step read `steps.diagrams.outputs.report` and uploaded it
    assert results["2"] == "success"
    report = _uploaded_report(run)
    assert report["blocking"] is True


def test_diagrams_in_step_pass(tmp_path: Path, act_action_cache: Path) -> None:
    run, _ = _run(tmp_path, act_action_cache, with_diagrams=True)
    log = run.text()
    assert run.returncode == 0, log[-4000:]
    assert run.step_results()["diagrams/diagram-check"] == "success"
    assert "::error" not in log
    outputs = run.step_outputs("diagrams")
    assert outputs["blocking"] == "false"
    assert outputs["findings"] == "0"
    assert "### ✅ DiagramCheck passed" in log
    assert _uploaded_report(run)["blocking"] is False
