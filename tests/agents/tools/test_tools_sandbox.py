"""The bubblewrap argv, the Seatbelt profile (as text) and credential scrubbing."""

from __future__ import annotations

from pathlib import Path

import pytest
from musec.agents.tools import SandboxPolicy
from musec.agents.tools.sandbox import (
    DEFAULT_PATH,
    bwrap_argv,
    bwrap_failure,
    musec_runtime_under_tmp,
    scrub_env,
    seatbelt_argv,
    seatbelt_profile,
)

WS = "/tmp/some/ws"


def argv(policy: SandboxPolicy, env: dict[str, str] | None = None) -> list[str]:
    return bwrap_argv(
        policy, WS, env or {"PATH": "/usr/bin"}, ["bash", "-c", "make"], bwrap="/usr/bin/bwrap"
    )


def pairs(args: list[str], flag: str, arity: int) -> list[tuple[str, ...]]:
    return [tuple(args[i + 1 : i + 1 + arity]) for i, a in enumerate(args) if a == flag]


def test_bwrap_argv_shape() -> None:
    args = argv(SandboxPolicy())
    assert args[0] == "/usr/bin/bwrap"
    for flag in (
        "--die-with-parent",
        "--new-session",
        "--unshare-pid",
        "--unshare-net",
        "--clearenv",
    ):
        assert flag in args
    # musec's own Python and code show through the private /tmp when they lie there (a CI clone)
    assert pairs(args, "--ro-bind", 2) == [("/", "/"), *((p, p) for p in musec_runtime_under_tmp())]
    assert pairs(args, "--bind", 2) == [(WS, WS)]
    assert pairs(args, "--chdir", 1) == [(WS,)]
    assert args[-4:] == ["--", "bash", "-c", "make"]
    # the private /tmp comes before the workspace bind, or a workspace under /tmp vanishes
    assert args.index("--tmpfs") < args.index("--bind")
    assert args.index("--ro-bind") < args.index("--tmpfs")
    # environment: cleared, then set; the command comes last
    assert args.index("--clearenv") < args.index("--setenv") < args.index("--")


def test_bwrap_network_and_read_only_profile() -> None:
    assert "--unshare-net" not in argv(SandboxPolicy(network=True))
    args = argv(SandboxPolicy(profile="read-only", writable_roots=("/var/cache/x",)))
    assert (WS, WS) in pairs(args, "--ro-bind", 2)
    assert "--bind" not in args and "--bind-try" not in args


def test_bwrap_writable_roots(tmp_path: Path) -> None:
    real = tmp_path / "cache"
    real.mkdir()
    link = tmp_path / "link"
    link.symlink_to(real)
    args = argv(SandboxPolicy(writable_roots=(str(link), str(real), WS)))
    assert pairs(args, "--bind-try", 2) == [
        (str(real), str(real))
    ]  # resolved, once, not the workspace
    assert args.index("--tmpfs") < args.index("--bind-try")


def test_bwrap_env_is_scrubbed() -> None:
    args = argv(SandboxPolicy(), {"PATH": "/bin", "OPENAI_API_KEY": "sk", "KEEP": "1"})
    assert pairs(args, "--setenv", 2) == [("KEEP", "1"), ("PATH", "/bin")]


@pytest.mark.parametrize(
    "name",
    [
        "OPENAI_API_KEY",
        "OPENAI_BASE_URL",
        "ANTHROPIC_API_KEY",
        "ANTHROPIC_BASE_URL",
        "AZURE_OPENAI_API_KEY",
        "AZURE_OPENAI_ENDPOINT",
        "GITHUB_TOKEN",
        "SOME_SECRET",
        "AWS_SECRET_ACCESS_KEY",
        "PGPASSWORD",
        "my_password_file",
        "STRIPE_KEY",
    ],
)
def test_scrub_env_removes_credentials(name: str) -> None:
    assert name not in scrub_env({name: "x", "PATH": "/bin"})


@pytest.mark.parametrize(
    "name", ["PATH", "HOME", "LANG", "KEYBOARD", "TOKENIZERS_PARALLELISM", "AZURE_REGION"]
)
def test_scrub_env_keeps_the_rest(name: str) -> None:
    assert scrub_env({name: "x"})[name] == "x"


def test_scrub_env_sets_a_path() -> None:
    assert scrub_env({})["PATH"] == DEFAULT_PATH


def test_bwrap_failure_messages() -> None:
    userns = bwrap_failure(
        "bwrap: No permissions to creating new namespace, likely because the kernel does not allow non-privileged user namespaces.\n",
        bwrap="bwrap",
    )
    assert "user namespaces are refused" in str(userns) and "--sandbox off" in str(userns)
    other = bwrap_failure("bwrap: execvp true: No such file\n", bwrap="bwrap")
    assert "apt-get install bubblewrap" in str(other)


def test_seatbelt_profile_workspace_write() -> None:
    profile = seatbelt_profile(SandboxPolicy(mode="seatbelt"), WS, ["/private/tmp"])
    assert profile.startswith("(version 1)\n(deny default)\n")
    assert "(allow file-read*)" in profile
    assert f'(allow file-write* (subpath "{WS}") (subpath "/private/tmp"))' in profile
    assert "network" not in profile
    assert profile.count("(") == profile.count(")")


def test_seatbelt_profile_network_and_read_only() -> None:
    profile = seatbelt_profile(
        SandboxPolicy(mode="seatbelt", profile="read-only", network=True), WS
    )
    assert "(allow network*)" in profile
    assert "(allow file-write* (subpath" not in profile


def test_seatbelt_quotes_paths() -> None:
    odd = '/tmp/we"ird\\dir'
    profile = seatbelt_profile(SandboxPolicy(mode="seatbelt"), WS, [odd])
    assert '(subpath "/tmp/we\\"ird\\\\dir")' in profile


def test_seatbelt_argv() -> None:
    args = seatbelt_argv(SandboxPolicy(mode="seatbelt"), WS, ["bash", "-c", "ls"])
    assert args[:2] == ["/usr/bin/sandbox-exec", "-p"]
    assert args[2].startswith("(version 1)")
    assert args[3:] == ["--", "bash", "-c", "ls"]
