"""Where a benchmark writes its figures: ``bench/results/<name>.json``, with the machine."""

from __future__ import annotations

import json
import os
import platform
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"


def stamp(result: dict[str, Any]) -> None:
    """Add when and on what machine ``result`` was measured. Others' work on a shared
    machine inflates every figure: the load average says how busy it was."""
    result["when"] = datetime.now(UTC).isoformat(timespec="seconds")
    result["machine"] = {
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "loadavg_1m": os.getloadavg()[0],
    }


def write_result(name: str, result: dict[str, Any]) -> Path:
    """Write ``result``, stamped (:func:`stamp`); return the path."""
    stamp(result)
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / f"{name}.json"
    out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return out
