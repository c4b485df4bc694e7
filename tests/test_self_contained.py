"""The suite reads nothing outside the repository, so a clone in any directory passes it."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from tests.support.anthropic_server import FIXTURES
from tests.support.outside import OutsideRepository, forbidden_roots

REPO_ROOT = Path(__file__).resolve().parents[1]
TESTS = REPO_ROOT / "tests"
#: A path that climbs out of the repository into the docs folder beside it, or names it.
_REACHES_OUT = re.compile(r"\.\.\W{0,8}shared\b|/work/shared\b")
_GUARD_FILES = {TESTS / "support" / "outside.py", Path(__file__).resolve()}


def test_provider_fixtures_live_inside_the_repository() -> None:
    assert FIXTURES.resolve().is_relative_to(REPO_ROOT)
    for folder in ("anthropic", "openai_responses", "openai_chat", "edge"):
        assert any((FIXTURES / folder).glob("*.sse")) or any((FIXTURES / folder).glob("*.json"))
    assert (FIXTURES / "anthropic" / "http_429.txt").read_bytes().startswith(b"HTTP/1.1 429")


def test_crlf_fixtures_keep_their_bytes() -> None:
    # A checkout that rewrote line endings would make the CRLF edge cases test nothing.
    data = (FIXTURES / "edge" / "crlf_keepalive.sse").read_bytes()
    assert data.count(b"\r\n") > 10 and b"\n" not in data.replace(b"\r\n", b"")
    assert b"\r" not in (FIXTURES / "anthropic" / "tool_use.sse").read_bytes()


@pytest.mark.parametrize(
    "reach",
    [
        lambda p: open(p / "fixtures" / "providers" / "anthropic" / "tool_use.sse", "rb"),
        lambda p: (p / "STYLE.md").read_text(),
        lambda p: os.listdir(p),
        lambda p: list(os.scandir(p / "fixtures")),
        lambda p: open(REPO_ROOT / "tests" / ".." / ".." / p.name / "PRODUCT.md"),
    ],
    ids=["open", "read_text", "listdir", "scandir", "dotdot"],
)
def test_reading_beside_the_repository_fails_the_test(reach) -> None:
    # Fires before the operating system is asked, so it holds whether or not ../shared exists.
    with pytest.raises(OutsideRepository, match="outside the repository"):
        reach(REPO_ROOT.parent / "shared")


def test_the_guard_leaves_the_repository_and_temp_dirs_alone(tmp_path: Path) -> None:
    (tmp_path / "shared").mkdir()
    (tmp_path / "shared" / "x").write_text("ok")
    assert (tmp_path / "shared" / "x").read_text() == "ok"
    assert (REPO_ROOT / "pyproject.toml").read_text()
    assert all(root.endswith(os.sep) for root in forbidden_roots(REPO_ROOT))


def test_no_test_source_names_a_path_outside_the_repository() -> None:
    # Catches what the runtime guard cannot: tests that are skipped here (GPU, platform).
    offenders = [
        f"{path.relative_to(REPO_ROOT)}:{number}: {line.strip()}"
        for path in sorted(TESTS.rglob("*"))
        if path.suffix in {".py", ".json", ".toml", ".txt", ".cfg"} and path not in _GUARD_FILES
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1)
        if _REACHES_OUT.search(line)
    ]
    assert not offenders, "tests must read only inside the repository:\n" + "\n".join(offenders)


def _pytest_runs(text: str) -> list[str]:
    """The pytest invocations in ``text``, without the flags that only change output."""
    runs = re.findall(r"\.venv-test/bin/python -m pytest[^\n&]*", text)
    return [" ".join(run.replace("-p no:cacheprovider", "").split()) for run in runs]


def test_ci_runs_exactly_the_readme_test_command() -> None:
    readme = _pytest_runs((REPO_ROOT / "README.md").read_text())
    ci = _pytest_runs((REPO_ROOT / ".ci" / "run").read_text())
    assert readme and "-n auto" in readme[0] and "slow" not in readme[0], "the README's command runs every test"
    assert ci == [readme[0]]
