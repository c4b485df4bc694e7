"""``musec daemon start|stop|status|run|install``.

``run`` replaces this process with ``python -m musec.daemon`` (the daemon is never
imported into the client).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from importlib import resources
from pathlib import Path

from musec.daemon import protocol as p

from .connection import connect, stop_daemon, try_connect
from .errors import UsageError
from .exitcodes import OK, Condition, Exit, for_condition
from .output import err, out, out_json
from .quick import print_status


def cmd_daemon(args: argparse.Namespace) -> Exit:
    """Dispatch ``musec daemon ACTION``."""
    match args.action:
        case "run":
            return run_foreground()
        case "start":
            conn = connect()
            out(f"musecd running (pid {conn.peer_pid}) at {p.socket_path()}")
            return OK
        case "stop":
            return stop()
        case "status":
            return status(args.json)
        case "install":
            return install()
    raise UsageError(f"unknown daemon action {args.action!r}")


def run_foreground() -> Exit:
    """Become the daemon (``python -m musec.daemon``), after checking what would make it
    fail with a traceback instead of a sentence."""
    problem = p.socket_path_problem(p.socket_path())
    if problem:
        err(f"musec: {problem}")
        return for_condition(Condition.DAEMON_START_FAILED)
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(sys.executable, [sys.executable, "-m", "musec.daemon"])


def stop() -> Exit:
    """Stop the daemon (any version); say so when none runs."""
    conn = try_connect()
    if conn is None:
        out("musecd is not running")
        return OK
    pid = conn.peer_pid
    stop_daemon(conn)
    out(f"musecd (pid {pid}) stopped")
    return OK


def status(as_json: bool) -> Exit:
    """Print the daemon's pid, socket, version and live sessions; exit 5 when none runs."""
    from .version import __version__

    conn = try_connect()
    if conn is None:
        if as_json:
            out_json({"running": False, "socket": str(p.socket_path())})
        else:
            out(f"musecd is not running (socket {p.socket_path()})")
        return for_condition(Condition.DAEMON_NOT_RUNNING)
    if not conn.compatible:
        info = {"running": True, "pid": conn.peer_pid, "socket": str(p.socket_path()), "version": conn.daemon.version,
                "protocol_version": conn.daemon.protocol_version, "compatible": False}
        if as_json:
            out_json(info)
        else:
            out(f"musecd {conn.daemon.version} running, pid {conn.peer_pid}, protocol {conn.daemon.protocol_version} "
                f"(this client is musec {__version__}, protocol {p.PROTOCOL_VERSION}: stop it with `musec daemon stop`)")
        return for_condition(Condition.PROTOCOL_MISMATCH)
    r = conn.request(p.Status(id=conn.next_id()))
    print_status({"pid": r.pid, "socket": r.socket, "version": r.version, "sessions": r.sessions, "home": r.home,
                  "log_file": r.log_file}, conn.daemon.protocol_version, as_json)
    return OK


def _unit_text(package: str, name: str) -> str:
    """A systemd unit for this install: the daemon run by this Python, with this shell's
    ``MUSEC_HOME``/``MUSEC_SOCKET``, listening on the very socket path the client will look
    for (``protocol.socket_path``); ``%t`` (systemd's runtime directory) only when that path
    is the default one under ``$XDG_RUNTIME_DIR``. ``%`` is escaped as unit files need."""
    text = resources.files(package).joinpath(name).read_text()
    exec_line = f"{sys.executable} -m musec.daemon"
    text = text.replace("/usr/bin/env musec daemon run", exec_line)
    env = [f"Environment={k}={_unit_escape(os.environ[k])}\n" for k in ("MUSEC_HOME", "MUSEC_SOCKET") if os.environ.get(k)]
    if env:
        text = text.replace("# Environment=MUSEC_HOME=\n", "".join(env))
    sock = p.socket_path()
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if not (runtime and sock == Path(runtime) / "musec" / "musecd.sock"):
        text = text.replace("ListenStream=%t/musec/musecd.sock", f"ListenStream={_unit_escape(str(sock))}")
    return text


def _unit_escape(value: str) -> str:
    return value.replace("%", "%%")


def install() -> Exit:
    """Put the user service for this platform in place and say how to enable it."""
    if sys.platform == "darwin":
        target = Path.home() / "Library" / "LaunchAgents" / "dev.musec.musecd.plist"
        target.parent.mkdir(parents=True, exist_ok=True)
        text = resources.files("musec.launchd").joinpath("dev.musec.musecd.plist").read_text()
        parts = "".join(f"<string>{a}</string>" for a in (sys.executable, "-m", "musec.daemon"))
        text = text.replace("<string>/usr/bin/env</string><string>musec</string><string>daemon</string><string>run</string>", parts)
        target.write_text(text)
        out(f"installed {target}\nenable it with: launchctl load -w {target}")
        return OK
    base = Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config") / "systemd" / "user"
    base.mkdir(parents=True, exist_ok=True)
    for name in ("musecd.service", "musecd.socket"):
        (base / name).write_text(_unit_text("musec.systemd", name))
    out(f"installed {base / 'musecd.service'} and {base / 'musecd.socket'} (socket {p.socket_path()})")
    if shutil.which("systemctl"):
        out("enable them with: systemctl --user daemon-reload && systemctl --user enable --now musecd.socket")
    return OK
