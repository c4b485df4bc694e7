"""``musec doctor``: checks the sandbox, the socket, credentials, git and the GPU."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from musec.daemon import protocol as p

from .connection import try_connect
from .exitcodes import OK, Condition, Exit, for_condition
from .output import out


OK_, WARN, FAIL = "✓", "!", "✗"  # a check's mark: works; works, but read the line; does not work


def _bwrap() -> tuple[bool, str]:
    path = shutil.which("bwrap")
    if path is None:
        return False, "bubblewrap is missing: install it (`apt-get install bubblewrap`), or run with --sandbox off"
    proc = subprocess.run([path, "--ro-bind", "/", "/", "--unshare-net", "--unshare-pid", "--dev", "/dev", "--proc", "/proc", "true"],
                          capture_output=True, text=True, timeout=20)
    if proc.returncode != 0:
        why = (proc.stderr.strip().splitlines() or ["unknown error"])[-1]
        return False, f"bubblewrap cannot create namespaces ({why}): enable unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1)"
    return True, f"bubblewrap works ({path})"


def _extensions(running: bool) -> list[tuple[str, str, str]]:
    """AGENTS.md files, skills, commands, hooks and MCP servers of this directory: active or
    waiting for trust, as the daemon reads them. A daemon that was not ``running`` is
    started for this and stopped again (a check leaves things as it found them: fresh-user
    trial s8, K13), and the lines say so."""
    from .connection import connect, stop_daemon, try_connect
    from .extensions import fetch_report, report_lines

    try:
        conn = connect()
        try:
            lines = report_lines(fetch_report(conn, os.getcwd()))
        finally:
            conn.close()
    except Exception as exc:  # noqa: BLE001 - a diagnosis, not a failure
        return [("extensions", FAIL, f"cannot be listed: {exc}")]
    rows = ([("extensions", WARN if line.startswith(("warning:", "waiting for trust")) else OK_, line) for line in lines]
            or [("extensions", OK_, "none (no AGENTS.md, skills, hooks or MCP servers)")])
    if not running:
        again = try_connect()
        if again is not None and again.daemon.sessions == 0:
            stop_daemon(again)
            rows.append(("extensions", OK_, "(listed by a daemon started for this check and stopped again)"))
        elif again is not None:
            again.close()
            rows.append(("extensions", WARN, "(listed by a daemon started for this check; it still runs: "
                                             f"a session started on it meanwhile, pid {again.peer_pid})"))
    return rows


def _ripgrep() -> str | None:
    """Where the tools will find ``rg``: on ``PATH``, else beside this Python (the PyPI
    ``ripgrep`` wheel installs it into the virtual environment's ``bin``, which a venv that
    is not activated leaves off ``PATH``). The tools' own lookup is
    ``agents.tools.search.find_ripgrep``, which the client may not import."""
    beside = Path(sys.executable).parent / "rg"
    return shutil.which("rg") or (str(beside) if os.access(beside, os.X_OK) else None)


def _credentials() -> tuple[str, str, str]:
    """The provider keys set, and those ``musec login`` stored (with the backend's name: a
    plaintext one is a warning)."""
    from .login import backend_words, stored_keys

    keys = [k for k in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "AZURE_OPENAI_API_KEY") if os.environ.get(k)]
    stored = sorted(stored_keys())
    backend = backend_words() if stored else ""
    said = "; ".join(x for x in (", ".join(keys) + " set" if keys else "",
                                  ", ".join(stored) + f" in the keyring (musec login): {backend}" if stored else "") if x)
    if not said:
        return "credentials", WARN, ("no provider key set (" + _login_words() +
                                     "; musec demo and scripted: models need none)")
    return "credentials", WARN if "in plaintext" in backend else OK_, said


def _login_words() -> str:
    """Whether ``musec login`` could store a key here, in words."""
    from .login import usable

    try:
        if not usable():
            return ("musec login cannot store one here: keyring found no backend; set the variable, or "
                    "`pip install keyrings.alt` for a plaintext file")
    except Exception:  # noqa: BLE001 - keyring missing (UsageError) or broken: login says why itself
        return "musec login stores one with musec[login]"
    return "musec login stores one"


LOW_SPACE_BYTES = 64 << 20  # under this free, a session's log or one big tool output may not fit
SOME_SPACE_BYTES = 1 << 30


def _space() -> tuple[str, str, str]:
    """Free space on the disk of the state folder, where every session's log and blobs go
    (fresh-user s8 J4: a full disk failed every new session while doctor said all ✓)."""
    state = p.state_home()
    folder = state
    while not folder.exists() and folder != folder.parent:  # not made yet: the disk it will be on
        folder = folder.parent
    try:
        st = os.statvfs(folder)
    except OSError as exc:
        return ("disk space", WARN, f"cannot read the free space of {state}: {exc.strerror or exc}")
    free = st.f_bavail * st.f_frsize
    words = f"{_size(free)} free for the state folder {state}"
    if free < LOW_SPACE_BYTES:
        return ("disk space", FAIL, f"only {words}: sessions cannot log; free space there "
                "(`musec gc --older-than 30d` removes old sessions)")
    return ("disk space", OK_ if free >= SOME_SPACE_BYTES else WARN, words)


def _size(n: int) -> str:
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift:
            return f"{n / (1 << shift):.1f} {unit}"
    return f"{n} bytes"


def cmd_doctor() -> Exit:
    """Print one line per check, marked ✓ (works), ! (works; a warning) or ✗ (does not
    work: exit 1). A warning never gets the check mark (fresh-user trial s5, F19)."""
    checks: list[tuple[str, str, str]] = []
    if os.uname().sysname == "Darwin":  # pragma: no cover
        ok = shutil.which("sandbox-exec") is not None
        checks.append(("sandbox", OK_ if ok else FAIL, "sandbox-exec found" if ok else "sandbox-exec is missing"))
    else:
        ok, msg = _bwrap()
        checks.append(("sandbox", OK_ if ok else FAIL, msg))
    rg = _ripgrep()
    checks.append(("ripgrep", FAIL if rg is None else OK_,
                   rg or "ripgrep (rg) is missing: `pip install ripgrep==14.1.0` or `apt-get install ripgrep`"))
    git = shutil.which("git")
    checks.append(("git", OK_ if git else WARN, git or "git CLI not found (musec uses pygit2; the CLI is optional)"))
    running = False
    try:
        conn = try_connect()
        running = conn is not None
        checks.append(("daemon", OK_, f"running, musec {conn.daemon.version}, pid {conn.peer_pid}, {p.socket_path()}"
                        if conn else f"not running (starts on demand at {p.socket_path()})"))
        if conn is not None:
            conn.close()
    except Exception as exc:  # noqa: BLE001 - a diagnosis, not a failure
        checks.append(("daemon", FAIL, str(exc)))
    checks.append(_credentials())
    checks.append(_space())
    gpu = shutil.which("nvidia-smi")
    checks.append(("gpu", OK_ if gpu else WARN, "nvidia-smi found" if gpu else "no NVIDIA GPU (kernel benchmarks will not run)"))
    checks += _extensions(running)
    for name, mark, msg in checks:
        out(f"{mark} {name:<12} {msg}")
    failed = any(mark == FAIL for _, mark, _ in checks)
    return for_condition(Condition.CHECKS_FAILED) if failed else OK
