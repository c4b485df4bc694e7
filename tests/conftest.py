"""Shared fixtures: a private MUSEC_HOME, the real ``musec`` CLI as a subprocess, real git repos."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from musec.daemon.protocol import is_secret_name

from tests.support.outside import install as install_outside_guard

# Without a GPU, Triton kernels run on its CPU interpreter; the switch must be set before
# anything imports triton, so it is set here, in the first conftest pytest loads.
if "TRITON_INTERPRET" not in os.environ and shutil.which("nvidia-smi") is None:
    os.environ["TRITON_INTERPRET"] = "1"

REPO_ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent

# The suite reads nothing outside the repository: a clone in any directory must pass it.
install_outside_guard(REPO_ROOT)


# Tests of seconds each, marked ``slow`` here by place (so a new test there is marked too):
# the end-to-end tests (the whole product through the CLI or a terminal) and the kernel tests
# (Triton's interpreter on the CPU). The README's quick command skips them; CI runs them
# (``-m slow``). Elsewhere, mark a test that takes more than a few seconds by hand.
_SLOW_PLACES = (
    REPO_ROOT / "tests" / "e2e",
    REPO_ROOT / "tests" / "client" / "test_interactive_tmux.py",
    REPO_ROOT / "tests" / "kernels",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if any(Path(item.path).is_relative_to(place) for place in _SLOW_PLACES):
            item.add_marker(pytest.mark.slow)


def clean_env(home: Path) -> dict[str, str]:
    """The environment for a musec subprocess: this one's, without credentials or user git config."""
    env = {k: v for k, v in os.environ.items() if not is_secret_name(k)}
    for k in ("ANTHROPIC_BASE_URL", "OPENAI_BASE_URL", "AZURE_OPENAI_ENDPOINT", "MUSEC_MODEL", "MUSEC_SOCKET", "XDG_RUNTIME_DIR"):
        env.pop(k, None)
    env.update(
        MUSEC_HOME=str(home), PATH=f"{BIN}{os.pathsep}{env.get('PATH', '')}",
        GIT_CONFIG_GLOBAL="/dev/null", GIT_CONFIG_NOSYSTEM="1", PYTHONDONTWRITEBYTECODE="1",
        MUSEC_AGENTS="none",  # tests that want background agents ask for them with --agents
        # Never the person's keyring: no stored keys (a test of `musec login` sets its own).
        PYTHON_KEYRING_BACKEND="keyring.backends.null.Keyring",
    )
    return env


class Musec:
    """Runs the real ``musec`` console script against one MUSEC_HOME."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self.env = clean_env(home)
        self.secrets: set[str] = set()

    def __call__(self, *args: str, env: dict[str, str] | None = None, cwd: Path | None = None,
                 timeout: float = 90, input: str | None = None) -> subprocess.CompletedProcess[str]:
        full_env = {**self.env, **(env or {})}
        for k, v in (env or {}).items():
            if is_secret_name(k):
                self.secrets.add(v)
        return subprocess.run([str(BIN / "musec"), *args], env=full_env, cwd=cwd, capture_output=True,
                              text=True, timeout=timeout, input=input if input is not None else "")

    def json(self, *args: str, **kw) -> object:
        proc = self(*args, **kw)
        assert proc.returncode == 0, proc.stderr
        return json.loads(proc.stdout)

    def daemon_pid(self) -> int | None:
        proc = self("daemon", "status", "--json")
        if proc.returncode != 0:
            return None
        return json.loads(proc.stdout)["pid"]

    def stop(self) -> None:
        pid = self.daemon_pid()
        self("daemon", "stop", timeout=30)
        if pid is not None:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def assert_no_secrets(self) -> None:
        """No credential passed to any command appears in any file under MUSEC_HOME."""
        needles = [s.encode() for s in self.secrets if len(s) >= 8]
        for path in self.home.rglob("*"):
            if path.is_file() and not path.is_socket():
                data = path.read_bytes()
                for needle in needles:
                    assert needle not in data, f"a credential was written to {path}"


@pytest.fixture
def musec_home() -> Iterator[Path]:
    # Short paths: a Unix socket path must stay under 108 bytes.
    home = Path(tempfile.mkdtemp(prefix="mh", dir="/tmp"))
    yield home
    shutil.rmtree(home, ignore_errors=True)


@pytest.fixture
def musec(musec_home: Path) -> Iterator[Musec]:
    runner = Musec(musec_home)
    yield runner
    runner.stop()
    runner.assert_no_secrets()


@pytest.fixture
def connect(musec: Musec, monkeypatch: pytest.MonkeyPatch):
    """``connect()`` -> a new wire connection to the test's own running daemon (started
    here); every connection made is closed at the end."""
    from musec.client import connection

    monkeypatch.setenv("MUSEC_HOME", str(musec.home))
    monkeypatch.delenv("MUSEC_SOCKET", raising=False)
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    assert musec("daemon", "start").returncode == 0
    made: list = []

    def make():
        conn = connection.connect(start=False)
        made.append(conn)
        return conn

    yield make
    for conn in made:
        conn.close()


LIBRARY = {
    "pager.py": '''"""Split a list into pages."""


def page(items, number, size):
    """The items on page ``number`` (counted from 1) when pages hold ``size`` items."""
    if number < 1 or size < 1:
        raise ValueError("page number and size start at 1")
    start = number * size
    return items[start : start + size]
''',
    "test_pager.py": '''import unittest

from pager import page


class PageTest(unittest.TestCase):
    def test_first_page(self):
        self.assertEqual(page(list(range(10)), 1, 3), [0, 1, 2])

    def test_last_partial_page(self):
        self.assertEqual(page(list(range(10)), 4, 3), [9])

    def test_past_the_end(self):
        self.assertEqual(page(list(range(10)), 5, 3), [])


if __name__ == "__main__":
    unittest.main()
''',
}
BUGGY = "    start = number * size\n"
FIXED = "    start = (number - 1) * size\n"


def run_library_tests(repo: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "unittest", "-q"], cwd=repo, capture_output=True, text=True, timeout=60)


@pytest.fixture
def buggy_repo(tmp_path: Path) -> Path:
    """A real git repository holding a small library whose tests fail by an off-by-one."""
    import pygit2

    repo_dir = tmp_path / "pager"
    repo_dir.mkdir()
    for name, text in LIBRARY.items():
        (repo_dir / name).write_text(text)
    repo = pygit2.init_repository(str(repo_dir))
    repo.index.add_all()
    repo.index.write()
    sig = pygit2.Signature("test", "test@example.invalid")
    repo.create_commit("HEAD", sig, sig, "pager with an off-by-one", repo.index.write_tree(), [])
    assert run_library_tests(repo_dir).returncode != 0
    return repo_dir


def fix_turns() -> list[list[dict]]:
    """The turns (DESIGN §8 blocks) that fix ``buggy_repo``."""
    return [
        [{"text": "Running the tests."}, {"tool": "bash", "input": {"command": "python3 -m unittest -q 2>&1"}}],
        [{"expect_result": "FAILED"}, {"tool": "read_file", "input": {"path": "pager.py"}}],
        [{"expect_result": "start = number * size"},
         {"tool": "edit_file", "input": {"path": "pager.py", "old_string": BUGGY, "new_string": FIXED}}],
        [{"tool": "bash", "input": {"command": "python3 -m unittest -q 2>&1"}}],
        [{"expect_result": "OK"}, {"text": "Pages are counted from 1, so page n starts at (n - 1) * size. Fixed; tests pass."}],
    ]


@pytest.fixture
def fix_script(tmp_path: Path) -> Path:
    path = tmp_path / "fix.json"
    path.write_text(json.dumps({"turns": fix_turns()}))
    return path
