"""``musec login`` / ``logout``: a key in the system keyring (a file-backed test backend),
used by the client when the variable is not set, never written by the daemon."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO_ROOT, Musec
from tests.support.anthropic_server import AnthropicServer, message

KEY = "stored-test-key-not-a-real-one-0123456789"


def _env(tmp_path: Path) -> dict[str, str]:
    return {"PYTHON_KEYRING_BACKEND": "tests.support.keyring_file.FileKeyring", "PYTHONPATH": str(REPO_ROOT),
            "MUSEC_TEST_KEYRING": str(tmp_path / "keyring.json")}


def test_login_stores_the_key_and_run_uses_it(musec: Musec, buggy_repo: Path, tmp_path: Path) -> None:
    env = _env(tmp_path)
    musec.secrets.add(KEY)  # assert_no_secrets: nothing under MUSEC_HOME holds it
    proc = musec("login", "anthropic", env=env, input=KEY + "\n")
    assert proc.returncode == 0, proc.stderr
    assert "stored the anthropic key" in proc.stdout and KEY not in proc.stdout
    # F19 (fresh-user trial s5): a plaintext file backend was called "the system keyring"
    plaintext = f"the FileKeyring keyring backend, in plaintext in {tmp_path / 'keyring.json'}: anyone who can read"
    assert plaintext in proc.stdout and "system keyring" not in proc.stdout, proc.stdout
    assert json.loads((tmp_path / "keyring.json").read_text()) == {"musec/ANTHROPIC_API_KEY": KEY}
    doctor = musec("doctor", env=env).stdout
    assert "! credentials  ANTHROPIC_API_KEY in the keyring (musec login): " + plaintext in doctor, doctor
    sealed = musec("doctor", env={**env, "PYTHON_KEYRING_BACKEND": "tests.support.keyring_file.SealedFileKeyring"}).stdout
    assert "✓ credentials  ANTHROPIC_API_KEY in the keyring (musec login): the SealedFileKeyring keyring" in sealed, sealed
    with AnthropicServer() as server:
        server.enqueue(message([{"type": "text", "text": "Done."}]))
        proc = musec("run", "--model", "anthropic/claude-sonnet-4-6", "--approval", "auto", "say done",
                     env={**env, "ANTHROPIC_BASE_URL": server.base_url}, cwd=buggy_repo)
        assert proc.returncode == 0, proc.stderr
        assert server.requests[0].headers["x-api-key"] == KEY
    # The variable wins over the stored key.
    with AnthropicServer() as server:
        server.enqueue(message([{"type": "text", "text": "Done."}]))
        proc = musec("run", "--model", "anthropic/claude-sonnet-4-6", "--approval", "auto", "say done", cwd=buggy_repo,
                     env={**env, "ANTHROPIC_BASE_URL": server.base_url, "ANTHROPIC_API_KEY": "sk-ant-from-the-variable"})
        assert proc.returncode == 0, proc.stderr
        assert server.requests[0].headers["x-api-key"] == "sk-ant-from-the-variable"
    proc = musec("logout", "anthropic", env=env)
    assert proc.returncode == 0 and "removed the anthropic key" in proc.stdout
    assert json.loads((tmp_path / "keyring.json").read_text()) == {}
    assert "no anthropic key was stored" in musec("logout", "anthropic", env=env).stdout


def test_login_without_a_key_stores_nothing(musec: Musec, tmp_path: Path) -> None:
    proc = musec("login", "openai", env=_env(tmp_path), input="\n")
    assert proc.returncode == 2 and proc.stderr.strip() == "musec: no key given; nothing stored"
    assert not (tmp_path / "keyring.json").exists()


def test_login_without_the_keyring_library_says_so_before_asking(tmp_path: Path) -> None:
    """A new user typed the key first and only then read that keyring is missing. With
    nothing on stdin, a client that asked first says "no key given" instead."""
    code = ("import sys; sys.modules['keyring'] = None; from musec.client.cli import main; "
            "sys.exit(main(['login', 'openai']))")
    proc = subprocess.run([sys.executable, "-c", code], env=_env(tmp_path), input="", capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 2 and "needs the keyring library" in proc.stderr, proc.stderr


def test_login_without_a_keyring_backend_says_so_before_asking(musec: Musec, tmp_path: Path) -> None:
    """Fresh-user trial s7: on a headless Linux keyring picks its `fail` backend; login
    asked for the key "stored ... in the fail keyring", then said the keyring refused it."""
    env = {**_env(tmp_path), "PYTHON_KEYRING_BACKEND": "keyring.backends.fail.Keyring"}
    proc = musec("login", "anthropic", env=env, input=KEY + "\n")
    assert proc.returncode == 2 and "no keyring to store the key in here" in proc.stderr, proc.stderr
    assert "set ANTHROPIC_API_KEY in the environment" in proc.stderr and "refused" not in proc.stderr
    assert "fail keyring" not in proc.stdout + proc.stderr
    doctor = musec("doctor", env={k: v for k, v in env.items()}).stdout
    assert "musec login cannot store one here: keyring found no backend" in doctor, doctor
