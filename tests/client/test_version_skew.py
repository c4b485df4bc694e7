"""A new client and an old daemon (issue 18, 11): the versions are compared at ``Hello``;
an idle daemon of another version is restarted, one with live sessions is kept and the
client says what to do. The old daemon is the real one reporting an older version."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from musec.client import __version__, connection
from musec.daemon import protocol as p

from tests.conftest import Musec

OLD_VERSION = "0.0.1"
OLD_DAEMON = (
    "import musec.daemon.version as v\n"
    f"v.musec_version = lambda: {OLD_VERSION!r}\n"
    "from musec.daemon.server import run_daemon\n"
    "raise SystemExit(run_daemon())\n"
)


@pytest.fixture
def old_daemon(musec: Musec) -> Iterator[subprocess.Popen[bytes]]:
    log = musec.home / "old-daemon.stderr"
    with log.open("wb") as stderr:
        proc = subprocess.Popen([sys.executable, "-c", OLD_DAEMON], env=musec.env, cwd="/",
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=stderr,
                                start_new_session=True)
    for _ in range(600):  # until it answers (a status round trip each time; no restart from `status`)
        status = musec("daemon", "status", "--json")
        if status.returncode == 0:
            assert json.loads(status.stdout)["version"] == OLD_VERSION
            break
        assert proc.poll() is None, log.read_text()
    else:
        pytest.fail("the old daemon did not start")
    yield proc
    proc.kill()
    proc.wait()


def test_an_idle_daemon_of_another_version_is_restarted(musec: Musec, old_daemon: subprocess.Popen[bytes]) -> None:
    proc = musec("sessions", "--all")
    assert proc.returncode == 0, proc.stderr
    assert f"restarting the daemon: it was musec {OLD_VERSION}" in proc.stderr
    assert old_daemon.wait(timeout=30) == 0  # it stopped cleanly
    status = json.loads(musec("daemon", "status", "--json").stdout)
    assert status["version"] == __version__ and status["pid"] != old_daemon.pid


def test_a_daemon_of_another_version_with_live_sessions_is_kept(
    musec: Musec, old_daemon: subprocess.Popen[bytes], buggy_repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("MUSEC_HOME", str(musec.home))
    monkeypatch.delenv("MUSEC_SOCKET", raising=False)
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    script = tmp_path / "s.json"
    script.write_text(json.dumps({"turns": [[{"text": "ok"}]]}))
    conn = connection.try_connect()
    assert conn is not None and conn.daemon.version == OLD_VERSION
    conn.send(p.StartSession(id=1, workspace=str(buggy_repo), model=f"scripted:{script}", interactive=True,
                             end_when_idle=False))
    assert isinstance(conn.recv(30), p.SessionStarted)
    try:
        proc = musec("sessions", "--all")
        assert proc.returncode == 0, proc.stderr
        assert f"the daemon is musec {OLD_VERSION}" in proc.stderr and "1 live session" in proc.stderr
        assert "musec daemon stop" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
        assert old_daemon.poll() is None  # kept: a person is using it
    finally:
        conn.close()
