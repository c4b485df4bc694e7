"""The evaluation process runs in the session's sandbox, like ``bash``.

A candidate is code the model wrote: its module level runs when the evaluation imports it,
so before this it could write anywhere, read ``~/.ssh`` and use the network, one tool call
under ``--approval auto`` (fresh-user trial s5, F11). The child now gets the bash tool's
sandbox (``agents.tools.sandbox``: the root read-only, the workspace writable, a private
``/tmp``, no network, musec's state read-only, what read deny rules name hidden), plus what
an evaluation needs and nothing more:

- its request/result folder writable (a temporary folder, re-mounted over the private /tmp),
  with the compilers' caches (``TRITON_CACHE_DIR``, ``XDG_CACHE_HOME``) inside it;
- the NVIDIA device files (``/dev/nvidia*``), which bubblewrap's minimal ``/dev`` lacks;
- read-only, the spec's folder when the private ``/tmp`` would hide it (musec's own Python
  and code are shown by ``sandbox.bwrap_argv`` itself).

``--sandbox off`` runs it as before. A Ray cluster's evaluations (``ray_runner``) run on the
cluster's machines, outside any session's sandbox: that is a cluster the person set up.
"""

from __future__ import annotations

import glob
import os
from collections.abc import Mapping, Sequence
from pathlib import Path

import msgspec

from ..tools.base import SandboxPolicy
from ..tools.errors import SandboxUnavailable

__all__ = ["confine", "gpu_device_files"]


def gpu_device_files() -> list[str]:
    """The NVIDIA device files of this machine (``/dev/nvidia0``, ``/dev/nvidiactl``,
    ``/dev/nvidia-uvm``...), sorted; ``[]`` without a GPU."""
    return sorted(glob.glob("/dev/nvidia*"))


def _under_tmp(path: str) -> bool:
    real = os.path.realpath(path)
    return real == "/tmp" or real.startswith("/tmp/")


def confine(command: Sequence[str], policy: SandboxPolicy | None, workspace: Path, scratch: str,
            env: Mapping[str, str], reads: Sequence[str] = ()) -> tuple[list[str], dict[str, str]]:
    """The argv and environment that run ``command`` (the evaluation child) under ``policy``.

    Args:
        command: the child's argv.
        policy: the session's sandbox policy (``ToolContext.sandbox``); ``None`` or mode
            ``off``: unconfined (a direct call, a test, ``--sandbox off``).
        workspace: the campaign's workspace (writable, the working directory).
        scratch: the evaluation's own temporary folder (request, result, caches): writable.
        env: the environment (credentials are scrubbed again by the sandbox).
        reads: folders the child reads (the spec's folder); shown read-only when the
            private ``/tmp`` would hide them.

    Returns:
        ``(argv, env)`` for ``subprocess.Popen``.

    Raises:
        SandboxUnavailable: the sandbox is missing on this machine (the message says how
            to install it, or to run with ``--sandbox off``).
    """
    env = {**env, "TRITON_CACHE_DIR": os.path.join(scratch, "triton"), "XDG_CACHE_HOME": os.path.join(scratch, "cache")}
    if policy is None or policy.mode == "off":
        return list(command), env
    policy = msgspec.structs.replace(policy, writable_roots=(*policy.writable_roots, scratch))
    if policy.mode == "seatbelt":  # pragma: no cover - macOS
        from ..tools.sandbox import seatbelt_argv

        return seatbelt_argv(policy, workspace, command, tmp_dirs=("/private/tmp", scratch)), env
    from ..tools.sandbox import BWRAP_INSTALL_HINT, bwrap_argv, find_bwrap

    bwrap = find_bwrap()
    if bwrap is None:
        raise SandboxUnavailable(f"bubblewrap (bwrap) was not found; {BWRAP_INSTALL_HINT}")
    argv = bwrap_argv(policy, workspace, env, command, bwrap=bwrap)
    shown = [p for p in dict.fromkeys(reads) if p and _under_tmp(p) and os.path.isdir(p)]
    extra = [a for p in shown for a in ("--ro-bind", os.path.realpath(p), os.path.realpath(p))]
    extra += [a for dev in gpu_device_files() for a in ("--dev-bind", dev, dev)]
    at = _after(argv, "--tmpfs", "/tmp")  # over the private /tmp and the minimal /dev, before the rest
    return [*argv[:at], *extra, *argv[at:]], env


def _after(argv: list[str], *pair: str) -> int:
    for i in range(len(argv) - 1):
        if (argv[i], argv[i + 1]) == pair:
            return i + 2
    raise SandboxUnavailable("the sandbox's command line has no private /tmp; report this as a musec fault")
