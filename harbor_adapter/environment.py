"""``BwrapEnvironment``: a Harbor environment on bubblewrap, with no container daemon.

Each trial gets a root directory of its own on the host (``rootfs``), bound at ``/`` in a
bubblewrap sandbox, with the host's system directories (``/usr``, ``/bin``, ``/lib*``,
``/sbin``, ``/etc``, ``/opt``) bound read-only on top. Everything else (``/app``, ``/logs``,
``/tests``, ``/tmp``, ``/root``, ``/installed-agent``) lies in the trial's root and persists
between the trial's commands, as in a container. Every ``exec`` is a fresh bubblewrap
process in new user, PID and IPC namespaces (and a new network namespace for
``no-network`` tasks): when the command ends, the PID namespace ends and every process it
left behind (a daemon, a background job) dies with it, so nothing the agent started is
still running when the verifier's tests run. A timeout kills the whole sandbox.

What it does not do, said plainly (and refused where a task needs it):

- Dockerfiles are not built. A task's ``environment/Dockerfile`` may use only ``FROM``
  (ignored: the host's toolchain is used instead of the image), ``WORKDIR``, ``COPY``/``ADD``
  of local files, ``ENV``, ``LABEL``, ``EXPOSE``, ``CMD`` and ``ENTRYPOINT`` (ignored);
  any other instruction (``RUN``, ``USER``, ...) is refused, as are prebuilt images and
  docker-compose files.
- Users are not enforced: every command runs as the user who runs Harbor. A task whose
  agent or verifier must run as another user is refused.
- CPU, memory and storage limits are not enforced, GPUs are not offered, and
  allow-listed networks are not supported (Harbor refuses those tasks through
  ``capabilities``); the network is either the host's or none.

The trick that lets a sandboxed agent run its own bubblewrap sandbox inside this one
(musec does): the host's ``/proc`` is bound and a fresh ``proc`` is mounted over it as the
first thing in the new PID namespace; bubblewrap's own ``--proc`` would leave locked
sub-mounts that make a nested ``--proc`` fail.

Harbor's contract, learnt from its source (harbor 0.26.0, ``environments/base.py``): the
end of ``start()`` must create the writable mount targets (``ensure_dirs``), and ``exec()``
must merge the task's and trial's environment (``_merge_env``); neither is documented.
"""

from __future__ import annotations

import asyncio
import os
import shlex
import shutil
import signal
import stat
import tempfile
from pathlib import Path, PurePosixPath
from typing import Any

from harbor.environments.base import BaseEnvironment, ExecResult
from harbor.environments.capabilities import EnvironmentCapabilities
from harbor.environments.definition import COMPOSE_FILE_NAME, DOCKERFILE_NAME

SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt")
DEFAULT_WORKDIR = "/app"
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
KILL_GRACE_S = 2.0
_ALLOWED = {"FROM", "WORKDIR", "COPY", "ADD", "ENV", "LABEL", "EXPOSE", "CMD", "ENTRYPOINT", "ARG"}
# The first thing each sandbox runs: a fresh /proc for its PID namespace, then the command.
_PROC_THEN_EXEC = 'mount -t proc proc /proc 2>/dev/null; exec /bin/bash -c "$1"'


class BwrapUnsupported(ValueError):
    """The task needs something this environment does not do (the message says what)."""


def dockerfile_plan(environment_dir: Path) -> list[tuple[str, str]]:
    """The instructions of a task's Dockerfile that this environment can honour.

    Args:
        environment_dir: the task's ``environment/`` folder.

    Returns:
        ``(INSTRUCTION, value)`` pairs in order, without ``FROM``, ``LABEL`` and the like;
        empty when there is no Dockerfile.

    Raises:
        BwrapUnsupported: a docker-compose file, or an instruction that needs a build
            (``RUN``), a user (``USER``) or another image (``COPY --from``).
    """
    if (environment_dir / COMPOSE_FILE_NAME).exists():
        raise BwrapUnsupported(f"{environment_dir / COMPOSE_FILE_NAME}: the bwrap environment runs no "
                               "docker-compose services; use --env docker")
    path = environment_dir / DOCKERFILE_NAME
    if not path.exists():
        return []
    plan: list[tuple[str, str]] = []
    for line_no, kind, value in _instructions(path.read_text(encoding="utf-8")):
        if kind not in _ALLOWED:
            raise BwrapUnsupported(
                f"{path}:{line_no}: {kind} needs an image build, which the bwrap environment "
                "does not do (it runs on the host's toolchain); use --env docker")
        if kind in ("COPY", "ADD") and any(w.startswith("--from") for w in value.split()):
            raise BwrapUnsupported(f"{path}:{line_no}: COPY --from needs another image; use --env docker")
        if kind in ("WORKDIR", "COPY", "ADD", "ENV"):
            plan.append((kind, value))
    return plan


def _instructions(text: str) -> list[tuple[int, str, str]]:
    """``(line number, INSTRUCTION, value)`` of a Dockerfile: comments dropped, ``\\``
    continuations joined (the Dockerfile reference's syntax, without parser directives)."""
    out: list[tuple[int, str, str]] = []
    pending, start = "", 0
    for n, line in enumerate(text.splitlines(), 1):
        if not pending and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if not pending:
            start = n
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        full = (pending + line).strip()
        pending = ""
        kind, _, value = full.partition(" ")
        out.append((start, kind.upper(), value.strip()))
    return out


def _parse_env(value: str) -> dict[str, str]:
    words = shlex.split(value)
    if len(words) >= 2 and "=" not in words[0]:  # ENV KEY value with spaces
        return {words[0]: value.split(None, 1)[1].strip()}
    return dict(w.split("=", 1) for w in words if "=" in w)


def _ignore_special(directory: str, names: list[str]) -> set[str]:
    """copytree's ignore: sockets, FIFOs and devices carry no content (and break copies)."""
    skip = set()
    for name in names:
        try:
            mode = os.lstat(os.path.join(directory, name)).st_mode
        except OSError:
            continue
        if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode) or stat.S_ISLNK(mode)):
            skip.add(name)
    return skip


class BwrapEnvironment(BaseEnvironment):
    """A trial's sandbox: a root directory of its own, host system directories read-only.

    Environment kwargs (``--ek KEY=VALUE``): ``root_parent`` (where trial roots are made;
    default the system temporary directory), ``bwrap`` (the executable).

    Raises (at construction, so Harbor reports it before running anything):
        BwrapUnsupported: the task needs a build, a prebuilt image, compose or another user.
    """

    def __init__(self, *args: Any, root_parent: str | None = None, bwrap: str = "bwrap", **kwargs: Any) -> None:
        self._root_parent = root_parent
        self._bwrap = bwrap
        self._root: Path | None = None
        self._workdir = DEFAULT_WORKDIR
        super().__init__(*args, **kwargs)

    @staticmethod
    def type() -> str:
        return "bwrap"

    @property
    def capabilities(self) -> EnvironmentCapabilities:
        return EnvironmentCapabilities(disable_internet=True)

    def _validate_definition(self) -> None:
        if self.task_env_config.docker_image and not (self.environment_dir / DOCKERFILE_NAME).exists():
            raise BwrapUnsupported(f"the task runs in the prebuilt image {self.task_env_config.docker_image}; "
                                   "the bwrap environment has no container runtime; use --env docker")
        self._plan = dockerfile_plan(self.environment_dir)

    # --- paths ------------------------------------------------------------------------

    @property
    def rootfs(self) -> Path:
        if self._root is None:
            raise RuntimeError("the bwrap environment has not been started")
        return self._root / "rootfs"

    def host_path(self, env_path: str | PurePosixPath, cwd: str | None = None) -> Path:
        """The host path behind an environment path (relative ones from ``cwd``).

        Raises:
            PermissionError: the path is in a read-only system directory, or it leaves
                the trial's root through a symbolic link.
        """
        path = PurePosixPath(cwd or self._workdir) / PurePosixPath(env_path)
        parts = [p for p in path.parts[1:] if p not in ("", ".")]
        if ".." in parts:
            raise PermissionError(f"{env_path}: '..' is not allowed in environment paths")
        if parts and "/" + parts[0] in SYSTEM_DIRS:
            raise PermissionError(f"{path} is in a read-only host system directory of the bwrap environment")
        host = self.rootfs.joinpath(*parts)
        real_root = os.path.realpath(self.rootfs)
        resolved = os.path.realpath(host)
        if resolved != real_root and not resolved.startswith(real_root + os.sep):
            raise PermissionError(f"{path} leads out of the trial's root through a symbolic link")
        return host

    # --- lifecycle --------------------------------------------------------------------

    async def start(self, force_build: bool) -> None:
        if shutil.which(self._bwrap) is None:
            raise RuntimeError(f"{self._bwrap} not found: install bubblewrap (`apt-get install bubblewrap`)")
        parent = self._root_parent or tempfile.gettempdir()
        self._root = Path(tempfile.mkdtemp(prefix=f"hb-{self.environment_name[:40]}-", dir=parent))
        for name in ("app", "tmp", "root", "logs", "tests", "installed-agent"):
            (self.rootfs / name).mkdir(parents=True, exist_ok=True)
        os.chmod(self.rootfs / "tmp", 0o1777)
        self._workdir = self.task_env_config.workdir or DEFAULT_WORKDIR
        env: dict[str, str] = {}
        for kind, value in self._plan:
            if kind == "WORKDIR":
                self._workdir = str(PurePosixPath(self._workdir) / value)
                self.host_path(self._workdir).mkdir(parents=True, exist_ok=True)
            elif kind == "ENV":
                env.update(_parse_env(value))
            else:
                self._copy_from_context(value)
        if self.task_env_config.workdir:
            self._workdir = self.task_env_config.workdir
        self.host_path(self._workdir).mkdir(parents=True, exist_ok=True)
        self._persistent_env = {**env, **self._persistent_env}
        result = await self.ensure_dirs(self._mount_targets(writable_only=True) or ["/logs/agent", "/logs/verifier"])
        if result is not None and result.return_code != 0:
            raise RuntimeError(f"the bubblewrap sandbox did not start: {(result.stderr or result.stdout or '').strip()[:500]}")
        await self._upload_environment_dir_after_start()

    def _copy_from_context(self, value: str) -> None:
        words = [w for w in shlex.split(value) if not w.startswith("--")]
        if value.lstrip().startswith("["):
            import json

            words = json.loads(value)
        *sources, dest = words
        dest_path = PurePosixPath(self._workdir) / dest
        for source in sources:
            src = (self.environment_dir / source).resolve()
            if not src.is_relative_to(self.environment_dir.resolve()) or not src.exists():
                raise BwrapUnsupported(f"COPY {source}: not a file of the task's environment/ folder")
            if src.is_dir():
                shutil.copytree(src, self.host_path(dest_path), symlinks=True, dirs_exist_ok=True)
            else:
                target = self.host_path(dest_path / src.name if dest.endswith("/") or len(sources) > 1 else dest_path)
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(src, target)

    async def stop(self, delete: bool) -> None:
        if self._root is None:
            return
        if delete:
            await asyncio.to_thread(shutil.rmtree, self._root, True)
        else:
            self.logger.info(f"bwrap trial root kept at {self._root}")

    # --- commands ---------------------------------------------------------------------

    def _argv(self, command: str, cwd: str) -> list[str]:
        """The bwrap argv. The environment goes through the process environment, not the
        argv (``--setenv``), so that no credential shows in ``/proc/*/cmdline``."""
        argv = [self._bwrap, "--die-with-parent", "--new-session", "--unshare-user", "--unshare-pid",
                "--unshare-ipc", "--uid", "0", "--gid", "0"]
        if self._network_disabled:
            argv.append("--unshare-net")
        argv += ["--bind", str(self.rootfs), "/"]
        for d in SYSTEM_DIRS:
            argv += ["--ro-bind-try", d, d]
        argv += ["--dev", "/dev", "--bind", "/proc", "/proc"]
        argv += ["--chdir", cwd, "--", "/bin/sh", "-c", _PROC_THEN_EXEC, "sh", command]
        return argv

    async def exec(
        self,
        command: str,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        timeout_sec: int | None = None,
        user: str | int | None = None,
    ) -> ExecResult:
        """Run ``command`` with bash in a fresh sandbox of this trial.

        Raises:
            BwrapUnsupported: ``user`` (or the default user) is not root or the host user.
            RuntimeError: the command ran past ``timeout_sec`` (the sandbox is killed).
        """
        user = self._resolve_user(user)
        if user not in (None, "root", 0, os.getuid()):
            raise BwrapUnsupported(f"the task asks to run commands as user {user!r}; the bwrap environment "
                                   "runs everything as the user running Harbor; use --env docker")
        merged = self._merge_env(env) or {}
        cwd = cwd or self._workdir
        self.host_path(cwd).mkdir(parents=True, exist_ok=True)
        proc = await asyncio.create_subprocess_exec(
            *self._argv(command, cwd), stdin=asyncio.subprocess.DEVNULL,
            env={"PATH": DEFAULT_PATH, "HOME": "/root", "LANG": "C.UTF-8", "TERM": "dumb", **merged},
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, start_new_session=True)
        try:
            out, err = await asyncio.wait_for(proc.communicate(), timeout=timeout_sec)
        except TimeoutError:
            await _kill(proc)
            raise RuntimeError(f"Command timed out after {timeout_sec} seconds") from None
        except BaseException:
            await asyncio.shield(_kill(proc))
            raise
        return ExecResult(stdout=out.decode(errors="replace"), stderr=err.decode(errors="replace"),
                          return_code=proc.returncode if proc.returncode is not None else -1)

    # --- files (plain copies on the host: the sandbox's root is a host directory) ------

    async def upload_file(self, source_path: Path | str, target_path: str) -> None:
        target = self.host_path(target_path)
        target.parent.mkdir(parents=True, exist_ok=True)
        await asyncio.to_thread(shutil.copy2, source_path, target)

    async def upload_dir(self, source_dir: Path | str, target_dir: str) -> None:
        await asyncio.to_thread(shutil.copytree, source_dir, self.host_path(target_dir), symlinks=True,
                                dirs_exist_ok=True, ignore=_ignore_special)

    async def download_file(self, source_path: str, target_path: Path | str) -> None:
        Path(target_path).parent.mkdir(parents=True, exist_ok=True)
        await asyncio.to_thread(shutil.copyfile, self.host_path(source_path), target_path)

    async def download_dir(self, source_dir: str, target_dir: Path | str) -> None:
        source = self.host_path(source_dir)
        if not source.is_dir():
            raise FileNotFoundError(f"{source_dir} is not a directory in the environment")
        await asyncio.to_thread(shutil.copytree, source, target_dir, symlinks=True, dirs_exist_ok=True,
                                ignore=_ignore_special)


async def _kill(proc: asyncio.subprocess.Process) -> None:
    """SIGTERM the sandbox's process group, a grace period, then SIGKILL; bwrap's
    ``--die-with-parent`` and the PID namespace take every process inside with it."""
    if proc.returncode is not None:
        return
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            break
        try:
            await asyncio.wait_for(proc.wait(), timeout=KILL_GRACE_S)
            break
        except TimeoutError:
            continue
    await proc.wait()
