"""The daemon process: one per MUSEC_HOME, serving the wire protocol on a Unix socket.

Structure (DESIGN §6): one root task group; the listener, each connection and each
session are tasks in it. A connection handler that fails is logged and closed; it never
takes the daemon down. Liveness is the OS lock on ``state/musecd.lock`` plus the socket
handshake, never a PID file.

The pieces, each in its own module: ``paths`` (directories and the lock), ``index`` (the
sessions on disk), ``collect`` (``musec gc``), ``host`` (the live sessions), ``handler``
(one client connection); this module is the serve loop and the entry point.
"""

from __future__ import annotations

import os
import signal
import socket
import sys
from typing import Any

import anyio
import anyio.abc
import structlog

from .errors import DaemonAlreadyRunning
from .handler import Connection
from .host import SessionHost, stopped_by
from .memory import freeze_startup
from .paths import Paths, acquire_lock

log = structlog.get_logger("musec.daemon")


async def serve(listener: anyio.abc.SocketListener, paths: Paths, *,
                task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
    """Serve ``listener`` until a signal or a ``Shutdown`` request; the sessions run in
    the same root task group, with one shared HTTP client and one set of rate limiters."""
    import httpx
    from musec.agents.core.faults import Faults
    from musec.agents.providers.ratelimit import RateLimitRegistry

    from .agent_setup import AgentDeps

    settle_missing_sniffio()
    async with httpx.AsyncClient(timeout=httpx.Timeout(connect=10, read=300, write=30, pool=30)) as http:
        async with anyio.create_task_group() as tg:
            # The restart tests' crash points, if the environment arms one (read here, once).
            host = SessionHost(AgentDeps(paths, http, RateLimitRegistry(), Faults.from_env(os.environ)), tg)

            def stop(how: str = "`musec daemon stop`") -> None:
                host.end_all(stopped_by(how))
                tg.cancel_scope.cancel()

            tg.start_soon(_signals, stop)
            task_status.started()
            log.info("daemon_ready", socket=str(paths.socket), pid=os.getpid())
            async with listener:
                while True:
                    conn = await listener.accept()
                    tg.start_soon(_connection, Connection(conn, host, paths, stop))


def settle_missing_sniffio() -> None:
    """Make a missing ``sniffio`` fail to import at once, every time after the first.

    httpcore imports ``sniffio`` each time it makes a lock or an event (six times a
    request) and falls back to asyncio when that fails; a failed import is not cached,
    so each one searched ``sys.path`` again (~0.2 ms a call, issue 19). ``None`` in
    ``sys.modules`` makes the import fail at once, with the same fallback. Nothing
    changes when sniffio is installed.
    """
    try:
        import sniffio  # noqa: F401
    except ImportError:
        sys.modules["sniffio"] = None  # type: ignore[assignment]


async def _signals(stop: Any) -> None:
    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async for signum in signals:
            log.info("daemon_signal", signal=signum)
            stop("SIGTERM: its service stopped, or a kill" if signum == signal.SIGTERM else "SIGINT: Ctrl-C where it ran")
            return


async def _connection(handler: Connection) -> None:
    try:
        await handler.run()
    except Exception as exc:  # supervision at the edge: one bad client never kills the daemon
        log.exception("connection_failed", error=str(exc))
    finally:
        with anyio.move_on_after(2, shield=True):
            await handler.conn.aclose()


# --- entry point ----------------------------------------------------------------------


def configure_logging(paths: Paths) -> None:
    """structlog to ``state/logs/musecd.log`` as JSON lines (configured once, here)."""
    import logging

    fd = os.open(paths.logs / "musecd.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)
    handler = open(fd, "a", buffering=1, encoding="utf-8")  # noqa: SIM115
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            structlog.processors.JSONRenderer(),
        ],
        wrapper_class=structlog.make_filtering_bound_logger(logging.INFO),
        logger_factory=structlog.WriteLoggerFactory(file=handler),
        cache_logger_on_first_use=True,
    )


def _listen_socket(paths: Paths) -> socket.socket:
    """The listening socket: systemd's (socket activation) or a fresh one."""
    if os.environ.get("LISTEN_PID") == str(os.getpid()) and os.environ.get("LISTEN_FDS") == "1":
        sock = socket.socket(fileno=3)
        sock.setblocking(False)
        return sock
    path = paths.socket
    if path.exists() or path.is_symlink():
        path.unlink()  # we hold the lock, so whoever made it is gone
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(str(path))
    os.chmod(path, 0o600)
    sock.listen(64)
    sock.setblocking(False)
    return sock


def run_daemon() -> int:
    """Run the daemon in the foreground (``musec daemon run``, ``musecd``); return the exit status."""
    paths = Paths()
    paths.ensure()
    try:
        lock_fd = acquire_lock(paths)
    except DaemonAlreadyRunning as exc:
        print(f"musec: {exc}", file=sys.stderr)
        return 1
    configure_logging(paths)
    sock = _listen_socket(paths)

    async def main() -> None:
        listener = await anyio.abc.SocketListener.from_socket(sock)
        freeze_startup()  # what the imports made is never garbage: no full pass walks it
        await serve(listener, paths)

    try:
        anyio.run(main, backend="asyncio", backend_options={"use_uvloop": _has_uvloop()})
    except KeyboardInterrupt:
        pass
    finally:
        try:
            if paths.socket.exists() and os.environ.get("LISTEN_FDS") is None:
                paths.socket.unlink()
        finally:
            os.close(lock_fd)
        log.info("daemon_stopped")
    return 0


def _has_uvloop() -> bool:
    try:
        import uvloop  # noqa: F401
    except ImportError:
        return False
    return True
