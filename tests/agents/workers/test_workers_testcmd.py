"""Test command detection, real test runs with deadlines, and failing-test names."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest
from musec.agents.workers import TestCommand, detect_test_command, failing_tests, run_tests
from musec.agents.workers.testcmd import no_tests_ran


@pytest.mark.parametrize(
    "files,argv_tail,source",
    [
        ({"Makefile": "build:\n\tcc x.c\n\ntest: build\n\t./t\n", "pyproject.toml": "[tool.pytest.ini_options]\n"},
         ("make", "test"), "Makefile"),
        ({"package.json": '{"scripts": {"test": "jest"}}'}, ("npm", "test"), "package.json"),
        ({"Cargo.toml": "[package]\nname = 'x'\n"}, ("cargo", "test"), "Cargo.toml"),
        ({"go.mod": "module x\n"}, ("go", "test", "./..."), "go.mod"),
        ({"pyproject.toml": "[tool.pytest.ini_options]\naddopts = '-q'\n"}, ("-m", "pytest"), "pyproject.toml"),
        ({"setup.cfg": "[tool:pytest]\n"}, ("-m", "pytest"), "setup.cfg"),
        ({"tests/conftest.py": "", "conftest.py": ""}, ("-m", "pytest"), "conftest.py"),
        ({"tests/test_x.py": "import unittest\nclass T(unittest.TestCase): pass\n"}, ("-m", "unittest"), "test*.py (unittest)"),
        ({"tests/test_x.py": "def test_x():\n    pass\n"}, ("-m", "pytest"), "test*.py (plain test functions)"),
    ],
)
def test_detection(tmp_path: Path, files: dict[str, str], argv_tail: tuple[str, ...], source: str) -> None:
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    found = detect_test_command(tmp_path, python="py")
    assert found is not None and found.source == source
    assert found.argv[-len(argv_tail):] == argv_tail


def test_detection_finds_nothing_or_takes_the_configured_command(tmp_path: Path) -> None:
    (tmp_path / "package.json").write_text('{"scripts": {"test": "echo \\"Error: no test specified\\" && exit 1"}}')
    (tmp_path / "Makefile").write_text("all:\n\ttrue\n")
    assert detect_test_command(tmp_path) is None
    configured = detect_test_command(tmp_path, "tox -e 'py 3'")
    assert configured == TestCommand(("tox", "-e", "py 3"), "configured")
    assert str(configured) == "tox -e 'py 3'"
    assert detect_test_command(tmp_path, ["x"]).argv == ("x",)
    with pytest.raises(ValueError):
        detect_test_command(tmp_path, "")


@pytest.mark.anyio
async def test_a_passing_and_a_failing_run(tmp_path: Path) -> None:
    ok = await run_tests(TestCommand((sys.executable, "-c", "print('fine')"), "t"), tmp_path, timeout_s=30)
    assert ok.passed and ok.exit_status == 0 and ok.output == "fine\n" and not ok.failing_tests
    script = "import sys; print('FAILED tests/test_a.py::test_b - assert 1 == 2'); sys.exit(3)"
    bad = await run_tests(TestCommand((sys.executable, "-c", script), "t"), tmp_path, timeout_s=30)
    assert not bad.passed and bad.exit_status == 3 and bad.failing_tests == ("tests/test_a.py::test_b",)


@pytest.mark.anyio
async def test_the_environment_has_no_credentials_and_no_bytecode(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-secret-value")
    script = "import os; print(os.environ.get('ANTHROPIC_API_KEY'), os.environ.get('PYTHONDONTWRITEBYTECODE'))"
    run = await run_tests(TestCommand((sys.executable, "-c", script), "t"), tmp_path, timeout_s=30)
    assert run.output == "None 1\n"


@pytest.mark.anyio
async def test_timeout_kills_the_whole_process_group(tmp_path: Path) -> None:
    pidfile = tmp_path / "child.pid"
    command = TestCommand(("sh", "-c", f"sleep 60 & echo $! > {pidfile}; echo started; wait"), "t")
    started = time.monotonic()
    run = await run_tests(command, tmp_path, timeout_s=0.5, kill_grace_s=0.5)
    assert time.monotonic() - started < 10
    assert run.timed_out and not run.passed and "killed after 0.5 s" in run.output
    stat = Path(f"/proc/{int(pidfile.read_text())}/stat")

    def dead() -> bool:  # gone, or a zombie waiting for whoever adopted it to reap it
        try:
            return stat.read_text().rsplit(")", 1)[1].split()[0] in ("Z", "X")
        except OSError:
            return True

    # SIGKILL takes effect when the kernel next runs the process: a loaded machine delays it
    deadline = time.monotonic() + 10
    while not dead() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert dead()


@pytest.mark.anyio
async def test_output_is_capped_keeping_head_and_tail(tmp_path: Path) -> None:
    script = "print('HEAD'); print('x' * 1_000_000); print('FAIL: test_tail (t.T.test_tail)')"
    run = await run_tests(TestCommand((sys.executable, "-c", script), "t"), tmp_path, timeout_s=30,
                          max_output_bytes=1000)
    assert run.output_bytes > 1_000_000 and len(run.output) < 1200
    assert run.output.startswith("HEAD") and "bytes omitted" in run.output
    assert run.failing_tests == ("test_tail (t.T.test_tail)",)


@pytest.mark.anyio
async def test_a_missing_program_is_a_failed_run(tmp_path: Path) -> None:
    run = await run_tests(TestCommand(("/nonexistent/runner",), "t"), tmp_path, timeout_s=5)
    assert not run.passed and run.exit_status == 127 and "could not start" in run.output


def test_failing_test_names_from_each_runner() -> None:
    output = "\n".join([
        "FAIL: test_a (pkg.test_m.T.test_a)",
        "ERROR: test_b (pkg.test_m.T.test_b)",
        "FAILED tests/test_x.py::test_y[1] - AssertionError",
        "ERROR tests/test_x.py::test_z - RuntimeError",
        "--- FAIL: TestParse (0.00s)",
        "test parser::tests::roundtrip ... FAILED",
        "test parser::tests::ok ... ok",
        "FAIL: test_a (pkg.test_m.T.test_a)",
    ])
    assert failing_tests(output) == (
        "test_a (pkg.test_m.T.test_a)", "test_b (pkg.test_m.T.test_b)", "tests/test_x.py::test_y[1]",
        "tests/test_x.py::test_z", "TestParse", "parser::tests::roundtrip",
    )


# issue 13, case 10: the runner that collects the tests; "no tests ran" is never a pass --


PLAIN = "from pager import page\n\n\ndef test_first():\n    assert page([1, 2], 1, 1) == [1]\n"
UNITTEST = "import unittest\n\n\nclass T(unittest.TestCase):\n    def test_a(self):\n        self.assertTrue(True)\n"


@pytest.mark.parametrize(
    "files,runner",
    [
        ({"test_pager.py": PLAIN}, "pytest"),
        ({"tests/test_pager.py": PLAIN}, "pytest"),
        ({"tests/unit/test_deep.py": PLAIN}, "pytest"),
        ({"test_a.py": UNITTEST, "tests/test_b.py": PLAIN}, "pytest"),
        ({"test_a.py": "import pytest\n\n" + UNITTEST}, "pytest"),
        ({"test_a.py": UNITTEST, "tests/test_b.py": UNITTEST}, "unittest"),
    ],
)
def test_detection_prefers_the_runner_that_collects_the_tests(
    tmp_path: Path, files: dict[str, str], runner: str
) -> None:
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    found = detect_test_command(tmp_path, python="py")
    assert found is not None and found.argv == ("py", "-m", runner)


@pytest.mark.anyio
async def test_plain_test_functions_are_collected_and_a_failure_is_seen(tmp_path: Path) -> None:
    (tmp_path / "pager.py").write_text("def page(items, number, size):\n    return items[number * size:][:size]\n")
    (tmp_path / "test_pager.py").write_text(PLAIN)
    command = detect_test_command(tmp_path, python=sys.executable)
    run = await run_tests(command, tmp_path, timeout_s=60)
    assert not run.passed and not run.no_tests_ran
    assert run.failing_tests == ("test_pager.py::test_first",)


@pytest.mark.anyio
@pytest.mark.parametrize(
    "argv",
    [
        ("-m", "unittest"),  # Python 3.11: "Ran 0 tests" and exit status 0
        ("-m", "pytest", "-q", "-p", "no:cacheprovider"),  # exit status 5
    ],
)
async def test_no_tests_ran_is_never_a_pass(tmp_path: Path, argv: tuple[str, ...]) -> None:
    (tmp_path / "test_nothing.py").write_text("X = 1\n")
    run = await run_tests(TestCommand((sys.executable, *argv), "t"), tmp_path, timeout_s=60)
    assert run.no_tests_ran and not run.passed
    assert "no tests ran" in run.output


@pytest.mark.anyio
async def test_a_run_with_tests_is_not_taken_for_an_empty_one(tmp_path: Path) -> None:
    (tmp_path / "test_one.py").write_text(UNITTEST)
    run = await run_tests(TestCommand((sys.executable, "-m", "unittest"), "t"), tmp_path, timeout_s=60)
    assert run.passed and not run.no_tests_ran


@pytest.mark.parametrize("argv, status, output, empty", [
    (("cargo", "test"), 0, "running 0 tests\n\ntest result: ok. 0 passed\n\nrunning 0 tests\n", True),
    (("cargo", "test"), 0, "running 0 tests\n\nrunning 2 tests\ntest a ... ok\n", False),
    (("go", "test", "./..."), 0, "?   \texample.com/x\t[no test files]\n", True),
    (("go", "test", "./..."), 0, "?   \texample.com/x\t[no test files]\nok  \texample.com/y\t0.01s\n", False),
    (("npm", "test"), 1, "No tests found, exiting with code 1\n", True),
    (("make", "test"), 0, "all good\n", False),
])
def test_no_tests_ran_in_other_runners(argv: tuple[str, ...], status: int, output: str, empty: bool) -> None:
    assert no_tests_ran(argv, status, output) is empty
