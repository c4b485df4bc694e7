"""Daemon lifecycle through the real CLI: start on demand, one per home, stale sockets."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from tests.conftest import BIN, Musec


def _gone(pid: int) -> bool:
    """Dead or a zombie (the killed daemon is not our child, so we cannot reap it)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except FileNotFoundError:
        return True


def _wait_gone(pid: int) -> None:
    for _ in range(500):
        if _gone(pid):
            return
        subprocess.run(["true"])  # yield the CPU without sleeping a fixed time
    raise AssertionError(f"process {pid} did not go")


def test_client_starts_daemon_on_demand_and_status_reports_it(musec: Musec) -> None:
    assert musec.daemon_pid() is None
    proc = musec("sessions", "--all", "--json")
    assert proc.returncode == 0 and proc.stdout.strip() == "[]"
    status = musec.json("daemon", "status", "--json")
    assert status["running"] and status["pid"] > 0 and status["sessions"] == []
    sock_dir = musec.home / "run"
    assert oct(sock_dir.stat().st_mode & 0o777) == "0o700"
    assert oct((sock_dir / "musecd.sock").stat().st_mode & 0o777) == "0o600"


def test_second_daemon_fails_with_a_clear_message(musec: Musec) -> None:
    musec("daemon", "start")
    pid = musec.daemon_pid()
    second = subprocess.run([sys.executable, "-m", "musec.daemon"], env=musec.env, capture_output=True, text=True, timeout=30)
    assert second.returncode == 1
    assert "already running" in second.stderr and str(pid) in second.stderr
    assert "Traceback" not in second.stderr
    assert musec.daemon_pid() == pid  # the first one is untouched


def test_sigkilled_daemon_is_replaced_on_next_command(musec: Musec) -> None:
    musec("daemon", "start")
    pid = musec.daemon_pid()
    os.kill(pid, signal.SIGKILL)
    _wait_gone(pid)
    assert (musec.home / "run" / "musecd.sock").exists()  # left behind by the killed daemon
    proc = musec("sessions")
    assert proc.returncode == 0, proc.stderr
    new_pid = musec.daemon_pid()
    assert new_pid is not None and new_pid != pid


def test_stop_and_status_when_not_running(musec: Musec) -> None:
    musec("daemon", "start")
    assert musec("daemon", "stop").returncode == 0
    assert musec.daemon_pid() is None
    proc = musec("daemon", "status")
    assert proc.returncode == 5 and "not running" in proc.stdout


def test_daemon_install_writes_user_units(musec: Musec, tmp_path) -> None:
    proc = musec("daemon", "install", env={"XDG_CONFIG_HOME": str(tmp_path), "HOME": str(tmp_path)})
    assert proc.returncode == 0, proc.stderr
    unit = (tmp_path / "systemd" / "user" / "musecd.service").read_text()
    assert f"ExecStart={Path(sys.executable).parent}/python" in unit and " -m musec.daemon" in unit
    assert f"Environment=MUSEC_HOME={musec.home}\n" in unit and "\n# \n" not in unit
    # The unit listens where the client (with the same MUSEC_HOME) looks for the daemon.
    assert f"ListenStream={musec.home}/run/musecd.sock\n" in (tmp_path / "systemd" / "user" / "musecd.socket").read_text()


def test_daemon_install_without_musec_home_listens_in_the_runtime_directory(musec: Musec, tmp_path) -> None:
    env = {k: v for k, v in musec.env.items() if k != "MUSEC_HOME"}
    env.update(XDG_CONFIG_HOME=str(tmp_path), HOME=str(tmp_path), XDG_RUNTIME_DIR=str(tmp_path / "run"))
    proc = subprocess.run([str(BIN / "musec"), "daemon", "install"], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "ListenStream=%t/musec/musecd.sock\n" in (tmp_path / "systemd" / "user" / "musecd.socket").read_text()
    assert "# Environment=MUSEC_HOME=\n" in (tmp_path / "systemd" / "user" / "musecd.service").read_text()


def test_log_of_unknown_session_is_a_clear_error(musec: Musec) -> None:
    proc = musec("log", "nope")
    assert proc.returncode == 2 and "no session 'nope'" in proc.stderr and "Traceback" not in proc.stderr


def test_daemon_run_becomes_the_daemon_without_importing_it_into_the_client(musec: Musec) -> None:
    """``musec daemon run`` replaces the client process (same pid): the client never
    imports the daemon, and a service manager supervises the daemon itself."""

    proc = subprocess.Popen([str(BIN / "musec"), "daemon", "run"], env=musec.env, stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(600):
            if musec.daemon_pid() is not None:
                break
            assert proc.poll() is None, "musec daemon run exited"
        assert musec.daemon_pid() == proc.pid
        with open(f"/proc/{proc.pid}/cmdline", "rb") as f:
            assert b"musec.daemon" in f.read()
        assert musec("daemon", "stop").returncode == 0
        assert proc.wait(timeout=30) == 0
    finally:
        proc.kill()
        proc.wait()
