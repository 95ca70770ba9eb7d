"""DiagramCheck on real projects' releases: precision against hand labels, and crashes.

The corpus (``tests/fixtures/diagramcheck_corpus``, built by ``corpus.py``) is checked
step by step; every finding must carry a label in ``labels.json``. The precision and
crash count go to the terminal summary (and to the JUnit report as properties).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import corpus

TARGET_PRECISION = 0.95
LABELS = corpus.FIXTURES / "labels.json"


def test_corpus_precision_and_crashes(
    tmp_path: Path, record_property: Callable[[str, object], None]
) -> None:
    labels: dict[str, dict[str, dict[str, object]]] = json.loads(
        LABELS.read_text(encoding="utf-8")
    )["steps"]
    outcome = corpus.run(tmp_path)
    unlabelled: dict[str, list[str]] = {}
    true = false = 0
    wrong: list[str] = []
    for step, findings in outcome.findings.items():
        for f in findings:
            key = corpus.finding_key(f)
            label = labels.get(step, {}).get(key)
            if label is None:
                unlabelled.setdefault(step, []).append(f"{key} -- {f.message}")
            elif label["true"] is True:
                true += 1
            else:
                false += 1
                wrong.append(f"{step}: {key} ({label['why']})")
    total = true + false + sum(len(v) for v in unlabelled.values())
    precision = true / total if total else 1.0
    steps = len(outcome.findings) + len(outcome.crashes)
    line = (
        f"DiagramCheck corpus: {steps} steps of {len(list(corpus.FIXTURES.glob('*.tar.xz')))}"
        f" projects, {total} findings, {true} true, {false} false,"
        f" {total - true - false} unlabelled: precision {precision:.1%}"
        f" (target >= {TARGET_PRECISION:.0%}); crashes {len(outcome.crashes)} (target 0)"
    )
    corpus.SUMMARY.append(line)
    print(line)
    record_property("corpus_precision", f"{precision:.4f}")
    record_property("corpus_findings", total)
    record_property("corpus_crashes", len(outcome.crashes))
    assert not outcome.crashes, "\n\n".join(f"{k}:\n{v}" for k, v in outcome.crashes.items())
    assert not unlabelled, "label these findings in labels.json:\n" + json.dumps(
        unlabelled, indent=1
    )
    assert precision >= TARGET_PRECISION, "false findings:\n" + "\n".join(wrong)
