"""The in-sandbox end of the session's network proxy (run as ``python3 -I -c SOURCE``).

``bwrap --unshare-net`` leaves a sandbox with loopback only. This script, run inside it
before the command, listens on 127.0.0.1 (a free port), forwards each connection to the
daemon's proxy through its Unix socket (bound into the sandbox), starts the command with
``HTTP_PROXY``/``HTTPS_PROXY`` (and lower-case twins) pointing at the listener, and exits
with the command's status. Standard library only: it runs under whatever ``python3`` the
sandbox has, not musec's environment.

Usage: ``python3 -I -c SOURCE SOCKET_PATH COMMAND [ARG...]``.
"""

import os
import socket
import subprocess
import sys
import threading


def _pump(source: socket.socket, sink: socket.socket) -> None:
    try:
        while True:
            data = source.recv(65536)
            if not data:
                break
            sink.sendall(data)
    except OSError:
        pass
    try:
        sink.shutdown(socket.SHUT_WR)
    except OSError:
        pass


def _serve(listener: socket.socket, path: str) -> None:
    while True:
        try:
            conn, _ = listener.accept()
        except OSError:
            return
        upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            upstream.connect(path)
        except OSError:
            conn.close()
            upstream.close()
            continue
        threading.Thread(target=_pump, args=(conn, upstream), daemon=True).start()
        threading.Thread(target=_pump, args=(upstream, conn), daemon=True).start()


def main(argv: list) -> int:
    """Bridge, run the command, return its exit status (``128 + signal`` when killed)."""
    path, command = argv[0], argv[1:]
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    proxy = f"http://127.0.0.1:{listener.getsockname()[1]}"
    threading.Thread(target=_serve, args=(listener, path), daemon=True).start()
    env = dict(os.environ)
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"):
        env[name] = proxy
    env.pop("NO_PROXY", None)
    env.pop("no_proxy", None)
    try:
        status = subprocess.call(command, env=env)
    except OSError as exc:
        sys.stderr.write(f"cannot start {command[0]}: {exc}\n")
        return 127
    return 128 - status if status < 0 else status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
