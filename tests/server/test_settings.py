"""ServerSettings.from_env: what it reads, and errors that name the variable, not the value."""

from __future__ import annotations

from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from scaffold.errors import ConfigError
from scaffold.server.settings import ServerSettings

SECRET = "hunter2-super-secret-value"


@pytest.fixture(scope="module")
def rsa_pem() -> str:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.TraditionalOpenSSL,
        serialization.NoEncryption(),
    ).decode()


@pytest.fixture
def env(rsa_pem: str) -> dict[str, str]:
    return {
        "SCAFFOLD_APP_ID": "123456",
        "SCAFFOLD_PRIVATE_KEY": rsa_pem,
        "SCAFFOLD_WEBHOOK_SECRET": SECRET,
    }


def test_reads_the_environment(env, rsa_pem, tmp_path) -> None:
    s = ServerSettings.from_env(env, tmp_path)
    assert (s.app_id, s.webhook_secret, s.state_dir) == (123456, SECRET, tmp_path)
    assert s.private_key == rsa_pem.encode()
    assert s.github_url == "https://api.github.com"
    assert (s.max_body_bytes, s.drain_timeout_s) == (25 * 1024 * 1024, 30.0)
    ghe = ServerSettings.from_env(
        {**env, "SCAFFOLD_GITHUB_URL": "https://ghe.example/api/v3/"}, tmp_path
    )
    assert ghe.github_url == "https://ghe.example/api/v3"


def test_key_from_a_path_and_from_an_escaped_one_liner(env, rsa_pem, tmp_path) -> None:
    path = tmp_path / "key.pem"
    path.write_text(rsa_pem)
    del env["SCAFFOLD_PRIVATE_KEY"]
    s = ServerSettings.from_env({**env, "SCAFFOLD_PRIVATE_KEY_PATH": str(path)}, tmp_path)
    assert s.private_key == rsa_pem.encode()
    one_line = rsa_pem.strip().replace("\n", "\\n")
    s = ServerSettings.from_env({**env, "SCAFFOLD_PRIVATE_KEY": one_line}, tmp_path)
    assert s.private_key == rsa_pem.encode()


def test_repr_hides_the_secrets(env, tmp_path) -> None:
    s = ServerSettings.from_env(env, tmp_path)
    for text in (repr(s), str(s)):
        assert SECRET not in text
        assert "PRIVATE KEY" not in text
        assert "123456" in text


def check(error: ConfigError, variable: str, *hidden: str) -> None:
    assert error.key == variable
    assert variable in str(error)
    for value in hidden:
        assert value not in str(error)
        assert value not in repr(error.args)


@pytest.mark.parametrize(
    "variable", ["SCAFFOLD_APP_ID", "SCAFFOLD_PRIVATE_KEY", "SCAFFOLD_WEBHOOK_SECRET"]
)
def test_missing_variable(env, tmp_path, variable) -> None:
    del env[variable]
    with pytest.raises(ConfigError) as info:
        ServerSettings.from_env(env, tmp_path)
    check(info.value, variable, SECRET)


def test_empty_secret_is_missing(env, tmp_path) -> None:
    with pytest.raises(ConfigError) as info:
        ServerSettings.from_env({**env, "SCAFFOLD_WEBHOOK_SECRET": "  "}, tmp_path)
    check(info.value, "SCAFFOLD_WEBHOOK_SECRET")


@pytest.mark.parametrize("bad", ["abc", "12.5", "-3", "0", "١٢٣"])
def test_bad_app_id(env, tmp_path, bad) -> None:
    with pytest.raises(ConfigError) as info:
        ServerSettings.from_env({**env, "SCAFFOLD_APP_ID": bad}, tmp_path)
    check(info.value, "SCAFFOLD_APP_ID", SECRET)


def test_unparsable_key(env, tmp_path) -> None:
    garbage = "-----BEGIN RSA PRIVATE KEY-----\nc2VjcmV0LWtleS1tYXRlcmlhbA==\n-----END RSA PRIVATE KEY-----\n"
    with pytest.raises(ConfigError) as info:
        ServerSettings.from_env({**env, "SCAFFOLD_PRIVATE_KEY": garbage}, tmp_path)
    check(info.value, "SCAFFOLD_PRIVATE_KEY", "c2VjcmV0LWtleS1tYXRlcmlhbA", SECRET)
    assert info.value.__cause__ is None


def test_key_that_is_not_rsa(env, tmp_path) -> None:
    pem = (
        ec.generate_private_key(ec.SECP256R1())
        .private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
        .decode()
    )
    body = pem.splitlines()[1]
    with pytest.raises(ConfigError) as info:
        ServerSettings.from_env({**env, "SCAFFOLD_PRIVATE_KEY": pem}, tmp_path)
    check(info.value, "SCAFFOLD_PRIVATE_KEY", body)
    assert "not RSA" in str(info.value)


def test_key_path_missing(env, tmp_path) -> None:
    del env["SCAFFOLD_PRIVATE_KEY"]
    missing = tmp_path / "nope.pem"
    with pytest.raises(ConfigError) as info:
        ServerSettings.from_env({**env, "SCAFFOLD_PRIVATE_KEY_PATH": str(missing)}, tmp_path)
    check(info.value, "SCAFFOLD_PRIVATE_KEY_PATH", SECRET)
    assert str(missing) in str(info.value)


def test_key_path_with_garbage(env, tmp_path) -> None:
    del env["SCAFFOLD_PRIVATE_KEY"]
    path = tmp_path / "key.pem"
    path.write_text("not-a-key-but-a-secret-looking-thing")
    with pytest.raises(ConfigError) as info:
        ServerSettings.from_env({**env, "SCAFFOLD_PRIVATE_KEY_PATH": str(path)}, tmp_path)
    check(info.value, "SCAFFOLD_PRIVATE_KEY_PATH", "not-a-key-but")


def test_both_key_sources_is_ambiguous(env, tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        ServerSettings.from_env({**env, "SCAFFOLD_PRIVATE_KEY_PATH": "/x.pem"}, tmp_path)
    check(info.value, "SCAFFOLD_PRIVATE_KEY", SECRET)


def test_bad_github_url(env, tmp_path) -> None:
    with pytest.raises(ConfigError) as info:
        ServerSettings.from_env({**env, "SCAFFOLD_GITHUB_URL": "ftp://x"}, tmp_path)
    check(info.value, "SCAFFOLD_GITHUB_URL")


@pytest.mark.parametrize(
    ("raw", "expected"), [(None, False), ("0", False), ("", False), ("1", True), ("yes", True)]
)
def test_webhook_fsync_flag(env, tmp_path, raw, expected) -> None:
    if raw is not None:
        env["SCAFFOLD_WEBHOOK_FSYNC"] = raw
    assert ServerSettings.from_env(env, tmp_path).fsync is expected


def test_webhook_fsync_that_is_not_a_boolean(env, tmp_path) -> None:
    env["SCAFFOLD_WEBHOOK_FSYNC"] = "sometimes"
    with pytest.raises(ConfigError) as info:
        ServerSettings.from_env(env, tmp_path)
    assert info.value.key == "SCAFFOLD_WEBHOOK_FSYNC"
    assert "sometimes" not in str(info.value)
