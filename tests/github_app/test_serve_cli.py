"""``scaffold serve`` refuses to start on bad credentials, with a message that names the
variable and never the secret."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest


def _serve(tmp_path: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    base = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "scaffold",
            "serve",
            "--port",
            "0",
            "--state-dir",
            str(tmp_path / "s"),
        ],
        env={**base, **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.mark.parametrize(
    ("env", "named"),
    [
        (
            {"SCAFFOLD_PRIVATE_KEY": "x", "SCAFFOLD_WEBHOOK_SECRET": "s3cret-value"},
            "SCAFFOLD_APP_ID",
        ),
        (
            {
                "SCAFFOLD_APP_ID": "12",
                "SCAFFOLD_PRIVATE_KEY": "-----BEGIN RSA PRIVATE KEY-----\nnot a key\n-----END RSA PRIVATE KEY-----\n",
                "SCAFFOLD_WEBHOOK_SECRET": "s3cret-value",
            },
            "SCAFFOLD_PRIVATE_KEY",
        ),
        (
            {
                "SCAFFOLD_APP_ID": "twelve",
                "SCAFFOLD_PRIVATE_KEY": "x",
                "SCAFFOLD_WEBHOOK_SECRET": "s3cret-value",
            },
            "SCAFFOLD_APP_ID",
        ),
        (
            {
                "SCAFFOLD_APP_ID": "12",
                "SCAFFOLD_PRIVATE_KEY_PATH": "/nonexistent/key.pem",
                "SCAFFOLD_WEBHOOK_SECRET": "s3cret-value",
            },
            "SCAFFOLD_PRIVATE_KEY_PATH",
        ),
    ],
)
def test_bad_credentials_stop_the_server_at_start(
    tmp_path: Path, env: dict[str, str], named: str
) -> None:
    done = _serve(tmp_path, env)
    assert done.returncode == 2
    assert named in done.stderr
    assert "s3cret-value" not in done.stderr + done.stdout
    assert "not a key" not in done.stderr + done.stdout


def test_a_damaged_delivery_database_stops_the_server_at_start(tmp_path: Path) -> None:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.TraditionalOpenSSL,
        serialization.NoEncryption(),
    )
    webhooks = tmp_path / "s" / "webhooks"
    webhooks.mkdir(parents=True)
    (webhooks / "deliveries.sqlite").write_bytes(b"not a database, long enough to tell " * 40)
    env = {"SCAFFOLD_APP_ID": "12", "SCAFFOLD_PRIVATE_KEY": pem.decode()}
    done = _serve(tmp_path, {**env, "SCAFFOLD_WEBHOOK_SECRET": "s3cret-value"})
    assert done.returncode == 2
    assert "deliveries.sqlite: cannot open the delivery database: file is not a database" in (
        done.stderr
    )
    assert "Traceback" not in done.stderr
