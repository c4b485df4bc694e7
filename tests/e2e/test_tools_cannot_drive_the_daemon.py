"""A session's tools cannot use musec's daemon (fresh-user trial s5, F13): a sandboxed bash
call reached the daemon's socket (a read-only bind does not stop ``connect()``), started an
unsandboxed session with ``--approval auto`` and wrote outside the sandbox through it. The
daemon now refuses any peer that runs in another PID namespace or descends from it
(``daemon/peers.py``); real daemon, real bubblewrap, a real Unix socket outside ``/tmp``
(the sandbox's private /tmp would hide one inside it and prove nothing)."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from musec.daemon.peers import peer_pid, refused_peer

from tests.conftest import BIN, Musec


@pytest.fixture
def outside_tmp():
    made: list[Path] = []

    def make(prefix: str) -> Path:
        made.append(Path(tempfile.mkdtemp(prefix=prefix, dir="/var/tmp")))
        return made[-1]

    yield make
    for path in made:
        shutil.rmtree(path, ignore_errors=True)


@pytest.mark.parametrize("sandbox", [
    pytest.param("bwrap", marks=pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap")),
    "off",
])
def test_a_tool_call_cannot_start_a_session_through_the_daemon(sandbox: str, buggy_repo: Path, tmp_path: Path,
                                                                outside_tmp) -> None:
    home, escaped = outside_tmp("home"), outside_tmp("out")
    sock = home / "d.sock"
    runner = Musec(home / "h")
    runner.env["MUSEC_SOCKET"] = str(sock)
    inner_script = tmp_path / "inner.json"
    inner_script.write_text(json.dumps({"turns": [[{"tool": "bash", "input": {"command": f"touch {escaped}/ESCAPED"}}],
                                                  [{"text": "done"}]]}))
    inner = (f"MUSEC_HOME={home / 'h'} MUSEC_SOCKET={sock} {BIN / 'musec'} run --sandbox off --approval auto "
             f"--model scripted:{inner_script} --workspace {escaped} go; echo inner-exit=$?")
    outer = tmp_path / "outer.json"
    outer.write_text(json.dumps({"turns": [[{"tool": "bash", "input": {"command": inner}}], [{"text": "tried"}]]}))
    try:
        proc = runner("run", "--sandbox", sandbox, "--approval", "auto", "--model", f"scripted:{outer}",
                      "--output-format", "json", "go", cwd=buggy_repo, timeout=120)
        assert proc.returncode == 0, proc.stderr
        sid = json.loads(proc.stdout)["session_id"]
        events = [json.loads(line) for line in runner("log", sid, "--json").stdout.splitlines()]
        [result] = [e for e in events if e["type"] == "tool_finished"]
        assert "the daemon does not serve this process" in result["content"], result["content"]
        assert "inner-exit=0" not in result["content"]
        assert not (escaped / "ESCAPED").exists()
        assert [s for s in json.loads(runner("sessions", "--all", "--json").stdout)] != []  # served from here
        assert len(json.loads(runner("sessions", "--all", "--json").stdout)) == 1  # no inner session started
    finally:
        runner.stop()


def test_the_peer_is_named_by_the_kernel_and_judged_by_its_ancestry(tmp_path: Path) -> None:
    """``peer_pid`` over a real socket pair of two processes; ``refused_peer`` for a child,
    a grandchild (double-forked: ``sh -c 'sleep &'``) and the test's own parent."""
    path = str(tmp_path / "s.sock")
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(path)
    listener.listen(1)
    child = subprocess.Popen([sys.executable, "-c", f"import socket,sys; s=socket.socket(socket.AF_UNIX); s.connect({path!r}); sys.stdin.read()"],
                             stdin=subprocess.PIPE)
    grand = subprocess.run(["sh", "-c", "sleep 60 >/dev/null 2>&1 & echo $!"], capture_output=True, text=True)
    grandchild = int(grand.stdout.strip())
    try:
        conn, _ = listener.accept()
        assert peer_pid(conn) == child.pid
        assert refused_peer(child.pid) == "it was started by a musec session"
        assert refused_peer(grandchild) is None  # its shell exited: it was re-parented away
        assert refused_peer(os.getppid()) is None  # an ancestor of the daemon is no descendant
        assert refused_peer(0) is None and refused_peer(None) is None
        conn.close()
    finally:
        child.stdin.close()
        child.wait(10)
        os.kill(grandchild, 9)
        listener.close()


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap")
def test_a_process_in_a_pid_namespace_is_refused_even_when_reparented() -> None:
    """A process inside ``bwrap --unshare-pid`` is refused by its namespace alone."""
    proc = subprocess.Popen(["bwrap", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--unshare-pid",
                             "--die-with-parent", "sh", "-c", "echo ready; exec sleep 60"], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline() == "ready\n"  # bwrap's init and its child exist now

        def children(pid: int) -> list[int]:
            return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]

        [init] = children(proc.pid)
        [inner] = children(init)
        assert refused_peer(inner, daemon_pid=1) == "it runs in a sandbox"  # not our child: the namespace says it
    finally:
        proc.kill()
        proc.wait(10)
        proc.stdout.close()
