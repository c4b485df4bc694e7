"""``musec daemon start|stop|status|run|install``."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from importlib import resources
from pathlib import Path

from musec.daemon import protocol as p

from . import exitcodes
from .connection import connect, try_connect
from .errors import DaemonLost


def cmd_daemon(args: argparse.Namespace) -> int:
    match args.action:
        case "run":
            from musec.daemon.server import run_daemon

            return run_daemon()
        case "start":
            conn = connect()
            print(f"musecd running (pid {conn.daemon.pid}) at {p.socket_path()}")
            return exitcodes.OK
        case "stop":
            return stop()
        case "status":
            return status(args.json)
        case "install":
            return install()
    return exitcodes.USAGE


def stop(timeout_s: float = 10.0) -> int:
    conn = try_connect()
    if conn is None:
        print("musecd is not running")
        return exitcodes.OK
    pid = conn.daemon.pid
    try:
        conn.request(p.Shutdown(id=conn.next_id()))
        conn.sock.settimeout(timeout_s)
        while conn.sock.recv(65536):
            pass
    except (DaemonLost, OSError):
        pass
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and try_connect(timeout_s=1) is not None:
        time.sleep(0.05)
    print(f"musecd (pid {pid}) stopped")
    return exitcodes.OK


def status(as_json: bool) -> int:
    conn = try_connect()
    if conn is None:
        if as_json:
            print(json.dumps({"running": False, "socket": str(p.socket_path())}))
        else:
            print(f"musecd is not running (socket {p.socket_path()})")
        return exitcodes.GOAL_UNMET
    r = conn.request(p.Status(id=conn.next_id()))
    info = {"running": True, "pid": r.pid, "socket": r.socket, "version": r.version, "sessions": r.sessions,
            "state": r.home, "log_file": r.log_file}
    if as_json:
        print(json.dumps(info))
    else:
        print(f"musecd {r.version} running, pid {r.pid}, socket {r.socket}, {len(r.sessions)} live session(s); log {r.log_file}")
    return exitcodes.OK


def _unit_text(package: str, name: str) -> str:
    text = resources.files(package).joinpath(name).read_text()
    exec_line = f"{sys.executable} -m musec.daemon"
    text = text.replace("/usr/bin/env musec daemon run", exec_line)
    if os.environ.get("MUSEC_HOME"):
        text = text.replace("# Environment=MUSEC_HOME=", f"Environment=MUSEC_HOME={os.environ['MUSEC_HOME']}\n# ")
    return text


def install() -> int:
    """Put the user service for this platform in place and say how to enable it."""
    if sys.platform == "darwin":
        target = Path.home() / "Library" / "LaunchAgents" / "dev.musec.musecd.plist"
        target.parent.mkdir(parents=True, exist_ok=True)
        text = resources.files("musec.launchd").joinpath("dev.musec.musecd.plist").read_text()
        parts = "".join(f"<string>{a}</string>" for a in (sys.executable, "-m", "musec.daemon"))
        text = text.replace("<string>/usr/bin/env</string><string>musec</string><string>daemon</string><string>run</string>", parts)
        target.write_text(text)
        print(f"installed {target}\nenable it with: launchctl load -w {target}")
        return exitcodes.OK
    base = Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config") / "systemd" / "user"
    base.mkdir(parents=True, exist_ok=True)
    for name in ("musecd.service", "musecd.socket"):
        (base / name).write_text(_unit_text("musec.systemd", name))
    print(f"installed {base / 'musecd.service'} and {base / 'musecd.socket'}")
    if shutil.which("systemctl"):
        print("enable them with: systemctl --user daemon-reload && systemctl --user enable --now musecd.socket")
    return exitcodes.OK
