"""Network by rule (issue 20 case 6): the sandbox's network stays closed, and ``net(HOST)``
rules open it for some hosts through the session's filtering proxy. A local HTTP server
stands in for a package index; ``pip download`` runs in the real bubblewrap sandbox."""

from __future__ import annotations

import hashlib
import http.server
import io
import json
import threading
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from musec.agents.core.events import NetConnection, decode_event

from tests.conftest import Musec

WHEEL = "demo_pkg-1.0-py3-none-any.whl"


def _wheel() -> bytes:
    files = {
        "demo_pkg/__init__.py": b"VERSION = '1.0'\n",
        "demo_pkg-1.0.dist-info/METADATA": b"Metadata-Version: 2.1\nName: demo-pkg\nVersion: 1.0\n",
        "demo_pkg-1.0.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = "".join(f"{name},,\n" for name in files) + "demo_pkg-1.0.dist-info/RECORD,,\n"
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        for name, data in [*files.items(), ("demo_pkg-1.0.dist-info/RECORD", record.encode())]:
            zf.writestr(zipfile.ZipInfo(name, date_time=(2026, 1, 1, 0, 0, 0)), data)  # the same bytes each time
    return buffer.getvalue()


@contextmanager
def package_index() -> Iterator[tuple[int, list[str]]]:
    """A PEP 503 simple index with one wheel; yields its port and the paths requested."""
    wheel = _wheel()
    digest = hashlib.sha256(wheel).hexdigest()
    seen: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            seen.append(self.path)
            if self.path.rstrip("/") == "/simple/demo-pkg":
                body = f'<html><body><a href="/files/{WHEEL}#sha256={digest}">{WHEEL}</a></body></html>'.encode()
                kind = "text/html"
            elif self.path == f"/files/{WHEEL}":
                body, kind = wheel, "application/octet-stream"
            else:
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1], seen
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def _download(port: int) -> str:
    return (f"python3 -m pip download --no-cache-dir --disable-pip-version-check --no-deps --retries 0 "
            f"--timeout 10 -d dl --index-url http://127.0.0.1:{port}/simple demo-pkg")


def _run(musec: Musec, repo: Path, tmp_path: Path, name: str, commands: list[str]) -> list[dict]:
    script = tmp_path / f"{name}.json"
    script.write_text(json.dumps({"turns": [[{"tool": "bash", "input": {"command": c}}] for c in commands]
                                  + [[{"text": "done"}]]}))
    proc = musec("run", "--model", f"scripted:{script}", "--approval", "auto", "--output-format", "json",
                 "get the package", cwd=repo, timeout=180)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return [json.loads(x) for x in musec("log", json.loads(proc.stdout)["session_id"], "--json").stdout.splitlines()]


def test_net_rules_open_the_sandbox_to_allowed_hosts_only(musec: Musec, buggy_repo: Path, tmp_path: Path) -> None:
    with package_index() as (port, seen), package_index() as (other, other_seen):
        # No rule: the network is closed as before (nothing reaches the index).
        events = _run(musec, buggy_repo, tmp_path, "closed", [_download(port)])
        [closed] = [e for e in events if e["type"] == "tool_finished"]
        assert closed["exit_status"] != 0 and seen == [] and not (buggy_repo / "dl" / WHEEL).exists()
        assert not [e for e in events if e["type"] == "net_connection"]

        config = musec.home / "config"
        config.mkdir(parents=True, exist_ok=True)
        (config / "config.toml").write_text(f'[permissions]\nallow = ["net(127.0.0.1:{port})"]\n')
        events = _run(musec, buggy_repo, tmp_path, "open", [_download(port), _download(other)])
        allowed, refused = [e for e in events if e["type"] == "tool_finished"]
        assert allowed["exit_status"] == 0, allowed["content"]
        assert (buggy_repo / "dl" / WHEEL).read_bytes() == _wheel()
        assert "/simple/demo-pkg/" in seen and f"/files/{WHEEL}" in seen
        assert refused["exit_status"] != 0 and other_seen == []  # another port of the same host: refused
        connections = [e for e in events if e["type"] == "net_connection"]
        assert {(e["port"], e["decision"], e["rule"]) for e in connections} == {
            (port, "allow", f"net(127.0.0.1:{port})"), (other, "deny", "")}
        assert all(e["host"] == "127.0.0.1" for e in connections)
        assert all(isinstance(decode_event(json.dumps(e)), NetConnection) for e in connections)


def test_an_ask_net_rule_is_an_approval_and_a_headless_run_denies_it(
        musec: Musec, buggy_repo: Path, tmp_path: Path) -> None:
    with package_index() as (port, seen):
        config = musec.home / "config"
        config.mkdir(parents=True, exist_ok=True)
        (config / "config.toml").write_text('[permissions]\nask = ["net(127.0.0.1)"]\n')
        events = _run(musec, buggy_repo, tmp_path, "ask", [_download(port)])
    [asked] = [e for e in events if e["type"] == "approval_requested"]
    assert asked["tool"] == "net" and asked["input"] == {"host": "127.0.0.1", "port": port}
    assert asked["rule"] == "net(127.0.0.1)"
    [resolved] = [e for e in events if e["type"] == "approval_resolved"]
    assert resolved["call_id"] == asked["call_id"] and resolved["decision"] == "deny"
    assert seen == [] and [e["exit_status"] for e in events if e["type"] == "tool_finished"] != [0]
