"""The server's settings, read from the environment.

A missing or unusable variable raises :class:`ConfigError` naming the variable; the
message never contains the value, and ``repr`` leaves out the key and the secret.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from scaffold.errors import ConfigError

ENV = "environment"
APP_ID = "SCAFFOLD_APP_ID"
PRIVATE_KEY = "SCAFFOLD_PRIVATE_KEY"
PRIVATE_KEY_PATH = "SCAFFOLD_PRIVATE_KEY_PATH"
WEBHOOK_SECRET = "SCAFFOLD_WEBHOOK_SECRET"  # noqa: S105 (a variable name)
GITHUB_URL = "SCAFFOLD_GITHUB_URL"
WEBHOOK_FSYNC = "SCAFFOLD_WEBHOOK_FSYNC"

DEFAULT_GITHUB_URL = "https://api.github.com"
_URL = re.compile(r"^https?://[^\s/?#]+(/[^\s?#]*)?$")


@dataclass(frozen=True, slots=True)
class ServerSettings:
    app_id: int
    private_key: bytes = field(repr=False)
    webhook_secret: str = field(repr=False)
    state_dir: Path
    github_url: str = DEFAULT_GITHUB_URL
    max_body_bytes: int = 25 * 1024 * 1024
    drain_timeout_s: float = 30.0
    workers: int = 4
    # Deliveries held parsed in memory; beyond that the queue keeps their ids only.
    max_parsed_in_queue: int = 256
    # fsync each stored delivery before answering 202 (sqlite's synchronous=FULL): it then
    # survives a power loss, not just the process being killed (SCAFFOLD_WEBHOOK_FSYNC=1).
    fsync: bool = False

    @classmethod
    def from_env(cls, environ: Mapping[str, str], state_dir: Path) -> ServerSettings:
        return cls(
            app_id=_app_id(environ),
            private_key=_private_key(environ),
            webhook_secret=_required(environ, WEBHOOK_SECRET),
            github_url=_github_url(environ),
            state_dir=state_dir,
            fsync=_flag(environ, WEBHOOK_FSYNC),
        )


def _required(environ: Mapping[str, str], name: str) -> str:
    value = environ.get(name, "")
    if not value.strip():
        raise ConfigError(ENV, name, "is not set")
    return value


def _flag(environ: Mapping[str, str], name: str) -> bool:
    raw = environ.get(name, "").strip().lower()
    if raw in ("", "0", "false", "no", "off"):
        return False
    if raw in ("1", "true", "yes", "on"):
        return True
    raise ConfigError(ENV, name, "is not a boolean (1/0, true/false, yes/no, on/off)")


def _app_id(environ: Mapping[str, str]) -> int:
    raw = _required(environ, APP_ID).strip()
    if not raw.isascii() or not raw.isdigit() or int(raw) <= 0:
        raise ConfigError(ENV, APP_ID, "is not a positive integer")
    return int(raw)


def _github_url(environ: Mapping[str, str]) -> str:
    url = environ.get(GITHUB_URL, "").strip() or DEFAULT_GITHUB_URL
    if not _URL.match(url):
        raise ConfigError(ENV, GITHUB_URL, "is not an http(s) URL")
    return url.rstrip("/")


def _private_key(environ: Mapping[str, str]) -> bytes:
    text = environ.get(PRIVATE_KEY, "")
    path = environ.get(PRIVATE_KEY_PATH, "")
    if text.strip() and path.strip():
        raise ConfigError(ENV, PRIVATE_KEY, f"set only one of {PRIVATE_KEY} and {PRIVATE_KEY_PATH}")
    if text.strip():
        # A PEM pasted into a one-line variable often carries literal "\n" escapes.
        if "\n" not in text.strip() and "\\n" in text:
            text = text.replace("\\n", "\n")
        return _parse_rsa_key(text.encode(), PRIVATE_KEY)
    if not path.strip():
        raise ConfigError(ENV, PRIVATE_KEY, f"is not set (nor is {PRIVATE_KEY_PATH})")
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        raise ConfigError(path, PRIVATE_KEY_PATH, "no such file") from None
    except OSError as exc:
        raise ConfigError(path, PRIVATE_KEY_PATH, f"unreadable ({exc.strerror})") from None
    return _parse_rsa_key(data, PRIVATE_KEY_PATH)


def _parse_rsa_key(pem: bytes, name: str) -> bytes:
    # Imported here: cryptography costs the server ~6 MB of RSS it needs only at start.
    from cryptography.exceptions import UnsupportedAlgorithm
    from cryptography.hazmat.primitives.asymmetric.rsa import RSAPrivateKey
    from cryptography.hazmat.primitives.serialization import load_pem_private_key

    try:
        key = load_pem_private_key(pem.strip() + b"\n", password=None)
    except (ValueError, TypeError, UnsupportedAlgorithm):
        raise ConfigError(ENV, name, "does not hold a PEM private key") from None
    if not isinstance(key, RSAPrivateKey):
        raise ConfigError(ENV, name, "holds a private key that is not RSA")
    return pem.strip() + b"\n"
