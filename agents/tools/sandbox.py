"""Command sandboxes: the bubblewrap argv (Linux) and the Seatbelt profile (macOS).

Both follow DESIGN section 11: the root filesystem read-only, the workspace writable
(read-only under the ``read-only`` profile), plus ``writable_roots``, a private /tmp,
no network unless the policy allows it, a new session, death with the parent, and an
environment with credentials removed.

Sources: bwrap(1) (bubblewrap 0.8); Apple's sandbox-exec(1) and the SBPL profiles used
by OpenAI Codex (``codex-rs/core/src/seatbelt_base_policy.sbpl``) for the Seatbelt side.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path

from .base import SandboxPolicy
from .errors import SandboxUnavailable
from .gitmounts import bwrap_git_args, bwrap_top_args, seatbelt_git_rules, worktree_top
from .masks import hidden_paths
from .paths import is_within

__all__ = [
    "BWRAP_INSTALL_HINT",
    "DEFAULT_PATH",
    "bwrap_argv",
    "bwrap_failure",
    "find_bwrap",
    "hidden_paths",
    "project_trust_paths",
    "protected_folders",
    "scrub_env",
    "seatbelt_argv",
    "seatbelt_profile",
]

DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

BWRAP_INSTALL_HINT = (
    "install bubblewrap (`apt-get install bubblewrap`), or run musec with `--sandbox off` "
    "to run commands without a sandbox"
)

_CREDENTIAL_NAME = re.compile(
    r"""(_KEY|_TOKEN|_SECRET)$        # API_KEY, GITHUB_TOKEN, CLIENT_SECRET
      | PASSWORD | PASSWD             # anywhere in the name
      | ^(ANTHROPIC|OPENAI|AZURE_OPENAI)_   # provider settings, keys included
      | ^(AWS_SECRET_ACCESS_KEY|AWS_SESSION_TOKEN|GH_TOKEN|GITHUB_TOKEN|NPM_TOKEN)$""",
    re.IGNORECASE | re.VERBOSE,
)


def scrub_env(env: Mapping[str, str]) -> dict[str, str]:
    """``env`` without credentials.

    Removed: names ending in ``_KEY``, ``_TOKEN`` or ``_SECRET``, names containing
    ``PASSWORD``/``PASSWD``, and every ``ANTHROPIC_*``, ``OPENAI_*`` and ``AZURE_OPENAI_*``
    variable (case-insensitive). ``PATH`` is set to ``DEFAULT_PATH`` when missing.
    """
    clean = {k: v for k, v in env.items() if not _CREDENTIAL_NAME.search(k)}
    clean.setdefault("PATH", DEFAULT_PATH)
    return clean


def find_bwrap() -> str | None:
    """The path of ``bwrap`` on ``PATH`` (or in /usr/bin), or ``None``."""
    return shutil.which("bwrap") or shutil.which("bwrap", path="/usr/bin:/bin")


def _writable_roots(policy: SandboxPolicy, workspace: str) -> list[str]:
    if policy.profile == "read-only":
        return []
    roots = []
    for root in policy.writable_roots:
        real = os.path.realpath(os.path.expanduser(root))
        if real != workspace and real not in roots:
            roots.append(real)
    return roots


def bwrap_argv(
    policy: SandboxPolicy,
    workspace: Path | str,
    env: Mapping[str, str],
    command: Sequence[str],
    *,
    bwrap: str = "bwrap",
) -> list[str]:
    """The argv that runs ``command`` inside bubblewrap under ``policy``.

    Mount order matters: the private tmpfs /tmp comes before the workspace bind, so a
    workspace under /tmp stays visible; what ``policy.read_deny`` covers is hidden last
    (an empty tmpfs over a folder, /dev/null over a file), so no spelling of it
    (``sub/../secret``, a symlink, a hard link) can be read. Writable roots that do not exist are skipped
    (``--bind-try``). A new user namespace with every capability dropped keeps even
    root from remounting the read-only root filesystem.

    Args:
        policy: the sandbox policy (``profile``, ``network``, ``writable_roots``).
        workspace: the workspace root (absolute); the command's working directory.
        env: the command's environment; it is scrubbed again with ``scrub_env``.
        command: the program and its arguments, e.g. ``["bash", "-c", "make"]``.
        bwrap: the bubblewrap executable.

    Returns:
        The full argv, starting with ``bwrap``.

    Raises:
        SandboxUnavailable: the read deny rules cannot be applied (``hidden_paths``).
    """
    ws = os.path.realpath(workspace)
    argv = [
        bwrap,
        "--die-with-parent",
        "--new-session",
        "--unshare-user",
        "--unshare-pid",
        "--unshare-ipc",
    ]
    if not policy.network:
        argv.append("--unshare-net")
    argv += ["--cap-drop", "ALL"]
    argv += ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]
    for own in musec_runtime_under_tmp():
        argv += ["--ro-bind", own, own]
    argv += bwrap_top_args(ws)
    argv += ["--ro-bind" if policy.profile == "read-only" else "--bind", ws, ws]
    writable = [] if policy.profile == "read-only" else [ws]
    for root in _writable_roots(policy, ws):
        argv += ["--bind-try", root, root]
        writable.append(root)
    for folder in protected_folders(policy, writable) + project_trust_paths(ws, writable):
        argv += ["--ro-bind-try", folder, folder]
    argv += _git_args(ws, writable, policy.profile != "read-only")
    for path, is_dir in _hidden(policy, ws, writable):
        argv += ["--tmpfs", path] if is_dir else ["--ro-bind", "/dev/null", path]
    if policy.proxy_socket and not policy.network:
        folder = os.path.dirname(policy.proxy_socket)
        argv += ["--bind", folder, folder]
        command = [_system_python(), "-I", "-c", _bridge_source(), policy.proxy_socket, *command]
    argv.append("--clearenv")
    for key, value in sorted(scrub_env(env).items()):
        argv += ["--setenv", key, value]
    argv += ["--chdir", ws, "--", *command]
    return argv


def _hidden(policy: SandboxPolicy, ws: str, writable: list[str]) -> list[tuple[str, bool]]:
    """``masks.hidden_paths`` for ``policy``, keeping the writable roots and the top of the
    linked worktree ``ws`` lies in (a worker started from ``pkg/`` in a worktree in the
    state folder: git needs the top's ``.git`` file)."""
    if not policy.read_deny and not policy.hide:
        return []
    top = worktree_top(ws)
    return hidden_paths(policy.read_deny, ws, policy.hide, writable if top is None else [*writable, top])


def _git_args(workspace: str, writable: list[str], write: bool) -> list[str]:
    """``gitmounts.bwrap_git_args``; a gitdir musec cannot prepare is left as it was (git
    then fails in the sandbox with its own message) rather than failing the command."""
    try:
        return bwrap_git_args(workspace, writable, write=write)
    except OSError:
        return []


def musec_runtime_under_tmp() -> list[str]:
    """musec's own Python and code where they lie under ``/tmp`` (a checkout or venv there,
    as a CI clone may be), which the sandbox's private ``/tmp`` would hide: shown read-only,
    so what musec runs in the sandbox with its own interpreter (a kernel evaluation, an MCP
    server of the same venv, ``musec`` itself) starts. Nothing else under ``/tmp`` is."""
    import sys

    code = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # holds agents/
    out: list[str] = []
    for path in (sys.prefix, sys.base_prefix, code):
        real = os.path.realpath(path)
        if real.startswith("/tmp/") and os.path.isdir(real) and real not in out:
            out.append(real)
    return out


def protected_folders(policy: SandboxPolicy, writable: Sequence[str]) -> list[str]:
    """The folders of ``policy.read_only`` (resolved) that lie inside a writable root and do
    not hold it: those a sandbox must make read-only again. Others are read-only (or not
    mounted) already, and one that holds the workspace protects nothing inside it."""
    out = []
    for folder in policy.read_only:
        real = os.path.realpath(folder)
        if any(is_within(real, root) and real != root for root in writable) and real not in out:
            out.append(real)
    return out


PROJECT_TRUST = (".musec", ".mcp.json", ".agents/skills")
"""What project trust covers (``agents.trust``: the project config, hooks, skills, commands
and MCP servers), by the folders and files holding it: read-only to commands, as a
command's change would run, or be trusted next time, as the person's (fresh-user s6 G20)."""


def project_trust_paths(workspace: str, writable: Sequence[str]) -> list[str]:
    """``PROJECT_TRUST`` in ``workspace`` (resolved), symlinks resolved, when the workspace
    is writable (a target outside the writable roots is read-only already). bwrap binds
    those that exist; Seatbelt denies writing the others too."""
    if workspace not in writable:
        return []
    out = [os.path.realpath(os.path.join(workspace, rel)) for rel in PROJECT_TRUST]
    return [p for p in dict.fromkeys(out) if any(is_within(p, root) and p != root for root in writable)]


def _system_python() -> str:
    """A ``python3`` the sandbox sees (the system's: a venv under /tmp is hidden there)."""
    return shutil.which("python3", path=DEFAULT_PATH) or "python3"


def _bridge_source() -> str:
    """The source of ``netbridge`` (run with ``-c``: nothing of musec need be importable)."""
    return (Path(__file__).with_name("netbridge.py")).read_text(encoding="utf-8")


def bwrap_failure(output: str, *, bwrap: str) -> SandboxUnavailable:
    """The error for a bwrap that could not set up the sandbox (its own ``bwrap:`` message)."""
    reason = next((ln for ln in output.splitlines() if ln.startswith("bwrap:")), output.strip())[
        :300
    ]
    hint = (
        "user namespaces are refused here; allow them (e.g. `sysctl kernel.unprivileged_userns_clone=1`, "
        "or the AppArmor userns setting), or run musec with `--sandbox off`"
        if re.search(
            r"namespace|uid map|setting up|Operation not permitted|Permission denied", reason
        )
        else BWRAP_INSTALL_HINT
    )
    return SandboxUnavailable(f"the bubblewrap sandbox failed to start ({reason}); {hint}")


def _sbpl_string(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


_SEATBELT_BASE = """\
(version 1)
(deny default)
(allow process-exec)
(allow process-fork)
(allow signal (target same-sandbox))
(allow process-info* (target same-sandbox))
(allow sysctl-read)
(allow mach-lookup)
(allow ipc-posix-shm)
(allow pseudo-tty)
(allow file-ioctl (literal "/dev/tty") (literal "/dev/null") (literal "/dev/zero"))
(allow file-read*)
(allow file-write-data
  (literal "/dev/null") (literal "/dev/zero") (literal "/dev/tty")
  (literal "/dev/stdout") (literal "/dev/stderr") (regex #"^/dev/fd/[0-9]+$"))
"""


def seatbelt_profile(
    policy: SandboxPolicy, workspace: Path | str, tmp_dirs: Sequence[str] = ()
) -> str:
    """A Seatbelt (SBPL) profile for ``sandbox-exec -p`` implementing ``policy``.

    Reads are allowed everywhere; writes only under the workspace (not under the
    ``read-only`` profile), the writable roots and ``tmp_dirs`` (e.g. ``$TMPDIR``,
    ``/private/tmp``); the network only when ``policy.network``.

    Args:
        policy: the sandbox policy.
        workspace: the workspace root (absolute, symlinks resolved: ``/private/var``,
            not ``/var``, on macOS).
        tmp_dirs: private temporary directories to make writable.

    Returns:
        The profile text.
    """
    ws = os.path.realpath(workspace)
    writable = [] if policy.profile == "read-only" else [ws]
    writable += _writable_roots(policy, ws) + [os.path.realpath(d) for d in tmp_dirs]
    lines = [_SEATBELT_BASE.rstrip("\n")]
    if writable:
        subpaths = " ".join(f"(subpath {_sbpl_string(p)})" for p in dict.fromkeys(writable))
        lines.append(f"(allow file-write* {subpaths})")
        for folder in protected_folders(policy, writable) + project_trust_paths(ws, writable):  # a later rule wins
            lines.append(f"(deny file-write* (subpath {_sbpl_string(folder)}))")
        if policy.profile != "read-only":
            lines += seatbelt_git_rules(ws, writable, _sbpl_string)
    for path, is_dir in _hidden(policy, ws, writable):
        kind = "subpath" if is_dir else "literal"
        lines.append(f"(deny file-read* ({kind} {_sbpl_string(path)}))")
    if policy.network:
        lines.append("(allow network*)")
        lines.append("(allow system-socket)")
    return "\n".join(lines) + "\n"


def seatbelt_argv(
    policy: SandboxPolicy,
    workspace: Path | str,
    command: Sequence[str],
    *,
    tmp_dirs: Sequence[str] = ("/private/tmp",),
) -> list[str]:
    """The argv running ``command`` under ``sandbox-exec`` with ``seatbelt_profile``.

    The environment is not part of the argv: pass ``scrub_env(env)`` to the process.
    """
    profile = seatbelt_profile(policy, workspace, tmp_dirs)
    return ["/usr/bin/sandbox-exec", "-p", profile, "--", *command]
