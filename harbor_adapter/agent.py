"""``MusecAgent``: musec as a Harbor installed agent.

Setup installs musec into the task environment from the wheel of the version Harbor is
running (built once per Harbor process from an editable checkout, or ``musec==VERSION``
from the package index otherwise; ``--ak wheel=PATH`` gives a wheel, ``--ak
wheelhouse=DIR`` a folder of wheels for environments without a package index). It needs a
Python >= 3.11 in the environment, or ``uv`` (or the network to fetch it) to get one. In
the bwrap environment, whose trials all run the host's Python, it is installed with pip in
the first trial and that install copied into the later ones (``musec-install.txt`` in the
trial's agent logs says which).

The run is ``musec run --model M --approval auto --output-format stream-json`` with the
instruction on stdin, in the task's working directory, with musec's whole state
(``MUSEC_HOME``) under ``/logs/agent/musec-home``, so Harbor brings the session's event log
back with the agent's logs. Afterwards the log becomes ``trajectory.json`` (ATIF) and the
trial's tokens and cost are musec's own accounting, the ``musec cost --json`` of the
session (saved as ``musec-cost.json``).

Models: any musec model id (``anthropic/...``, ``openai/...``, ``openai-compat/...``,
catalog aliases) or ``scripted:PATH``; in a scripted path ``{task}`` becomes the task's
name, and the file is uploaded into the environment. Provider credentials and endpoints
come through Harbor's model-connection mechanism (the provider's key variable, or the one
``--api-key-name`` names; ``--base-url``), then musec's standard variables
(``ANTHROPIC_API_KEY``, ``ANTHROPIC_BASE_URL``, ``OPENAI_*``, ``AZURE_OPENAI_*``) from
Harbor's process environment, and ``--ae KEY=VALUE``.

Agent kwargs (``--ak``): ``sandbox`` (musec's command sandbox inside the environment,
``off`` by default because the task environment is the sandbox; ``bwrap`` also isolates
musec's commands, with their network off), ``agents`` (background roles, default musec's),
``max_turns``, ``budget_usd``, ``wheel``, ``wheelhouse``, ``snapshot`` (commit a workspace that is
not a git repository first, as fan-out needs a base commit; default on) and ``apply`` (run
``musec apply`` when a fan-out's integration passed, so that its result is in the
workspace the tests grade; default on).
"""

from __future__ import annotations

import asyncio
import atexit
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, ClassVar

from harbor.agents.agent_auth_resolution import ModelConnectionSpec
from harbor.agents.capabilities import AgentCapabilities
from harbor.agents.installed.base import (
    BaseInstalledAgent,
    NonZeroAgentExitCodeError,
    UnknownApiError,
)
from harbor.agents.options import InstalledAgentOptions
from harbor.environments.base import BaseEnvironment
from harbor.models.agent.context import AgentContext, ModelUsage
from harbor.models.model_api_format import ModelApiFormat
from harbor.models.task.config import NetworkMode
from pydantic import Field

from .atif import read_events, trajectory_from_events, usage_totals

AGENT_ROOT = "/installed-agent/musec"
MUSEC_HOME = "/logs/agent/musec-home"
CREDENTIAL_VARS = ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "OPENAI_API_KEY", "OPENAI_BASE_URL",
                   "AZURE_OPENAI_API_KEY", "AZURE_OPENAI_ENDPOINT", "AZURE_OPENAI_API_VERSION")
# musec run's exit codes (DESIGN §3) that mean the agent ran to an end Harbor should grade.
GRADABLE_EXITS = {0: "finished", 1: "goal unmet or error reported", 4: "budget or turn limit"}
PROVIDER_EXIT = 5


class MusecOptions(InstalledAgentOptions):
    """``--ak`` options of ``MusecAgent``."""

    sandbox: str = Field(default="off", description="musec's command sandbox inside the environment: off, bwrap or auto.")
    agents: str | None = Field(default=None, description="background roles (comma-separated, or none); default musec's.")
    max_turns: int = Field(default=100, description="model turns for the task.")
    budget_usd: float | None = Field(default=None, description="stop when the session has cost this much.")
    wheel: str | None = Field(default=None, description="the musec wheel to install (default: built from this musec).")
    wheelhouse: str | None = Field(default=None, description="a folder of wheels: install offline from it.")
    snapshot: bool = Field(default=True, description="commit the workspace first when it is not a git repository "
                           "(musec's fan-out needs a base commit).")
    apply: bool = Field(default=True, description="bring a fan-out's passing integration into the workspace "
                        "(musec apply) when the run ends.")


_FORMATS = (ModelApiFormat.ANTHROPIC_MESSAGES, ModelApiFormat.OPENAI_RESPONSES, ModelApiFormat.OPENAI_CHAT_COMPLETIONS)
_KEY_VAR = {"anthropic": "ANTHROPIC_API_KEY", "openai": "OPENAI_API_KEY", ModelApiFormat.ANTHROPIC_MESSAGES: "ANTHROPIC_API_KEY",
            ModelApiFormat.OPENAI_RESPONSES: "OPENAI_API_KEY", ModelApiFormat.OPENAI_CHAT_COMPLETIONS: "OPENAI_API_KEY"}
_URL_VAR = {k: v.replace("_API_KEY", "_BASE_URL") for k, v in _KEY_VAR.items()}
# Where a --base-url goes for providers Harbor does not know by name (musec's own ids).
_URL_VAR_BY_PREFIX = {"openai-compat": "OPENAI_BASE_URL", "azure": "AZURE_OPENAI_ENDPOINT"}


class MusecAgent(BaseInstalledAgent):
    """musec, installed into the task environment and run headless (``musec run``).

    Provider access goes through Harbor's model-connection resolution: the key of the
    model's provider (``--api-key-name NAME`` picks another variable) and ``--base-url``
    reach musec as its standard variables (``ANTHROPIC_API_KEY``, ``OPENAI_BASE_URL``, ...).
    """

    capabilities = AgentCapabilities(atif=True, base_url=True)
    MODEL_CONNECTION = ModelConnectionSpec(supported_api_formats=list(_FORMATS), api_key_destination_names=dict(_KEY_VAR),
                                           base_url_destination_names=dict(_URL_VAR))
    options_model = MusecOptions
    _wheel_cache: ClassVar[dict[str, Path]] = {}
    _install_cache: ClassVar[dict[str, Path]] = {}  # install script -> a bwrap trial's AGENT_ROOT, copied
    _install_locks: ClassVar[dict[str, asyncio.Lock]] = {}
    _wheel_lock: ClassVar[asyncio.Lock | None] = None

    @staticmethod
    def name() -> str:
        return "musec"

    def version(self) -> str | None:
        return self._version or _musec_version()

    def get_version_command(self) -> str | None:
        return f"{AGENT_ROOT}/bin/musec --version"

    def parse_version(self, stdout: str) -> str:
        return stdout.strip().removeprefix("musec").strip()

    @property
    def _opts(self) -> MusecOptions:
        assert isinstance(self.options, MusecOptions)
        return self.options

    # --- install ----------------------------------------------------------------------

    async def install(self, environment: BaseEnvironment) -> None:
        opts = self._opts
        await self.exec_as_root(environment, f"mkdir -p {AGENT_ROOT}")
        if opts.wheelhouse:
            await environment.upload_dir(opts.wheelhouse, "/installed-agent/wheelhouse")
        wheel = Path(opts.wheel) if opts.wheel else await self._local_wheel()
        if wheel is not None:
            await environment.upload_file(wheel, f"/installed-agent/{wheel.name}")
            spec = f"/installed-agent/{wheel.name}"
        else:
            spec = f"musec=={_musec_version()}"
        offline = bool(opts.wheelhouse) or environment.network_policy.network_mode == NetworkMode.NO_NETWORK
        if offline and not opts.wheelhouse:
            # No network in the environment: bring musec and its dependencies as wheels
            # for the environment's Python, downloaded here (once per process and Python).
            house = await self._wheelhouse(environment, wheel or spec)
            await environment.upload_dir(house, "/installed-agent/wheelhouse")
        index = "--no-index --find-links /installed-agent/wheelhouse" if offline else ""
        script = _install_script(spec, index)
        if _host_root(environment) is None:
            await self.exec_as_root(environment, script, timeout_sec=900)
        else:
            await self._install_once(environment, script)

    async def _install_once(self, environment: BaseEnvironment, script: str) -> None:
        """Install into the first trial of the bwrap environment, then copy that install into
        the next ones: every bwrap trial runs the host's own Python and system folders, so
        the venv at ``AGENT_ROOT`` built for one is the one pip would build for each (a
        pip install of musec and its dependencies: 20-30 s a trial on 2 cores). A copy, not
        links: what a trial's agent changes there stays in its trial."""
        lock = MusecAgent._install_locks.setdefault(script, asyncio.Lock())  # one install per script at a time
        async with lock:
            cached = MusecAgent._install_cache.get(script)
            target = _host_root(environment)
            assert target is not None
            if cached is None:
                await self.exec_as_root(environment, script, timeout_sec=900)
                cached = _scratch_dir("musec-installed-") / "musec"
                await asyncio.to_thread(shutil.copytree, target, cached, symlinks=True)
                MusecAgent._install_cache[script] = cached
                self._note_install("installed with pip")
                return
        await asyncio.to_thread(shutil.copytree, cached, target, symlinks=True, dirs_exist_ok=True)
        await self.exec_as_root(environment, f"{AGENT_ROOT}/bin/musec --version")
        self._note_install("copied from an earlier trial's install (same host Python)")

    def _note_install(self, how: str) -> None:
        """Say in the trial's agent logs (``musec-install.txt``) how musec came to be installed."""
        self.logs_dir.mkdir(parents=True, exist_ok=True)
        (self.logs_dir / "musec-install.txt").write_text(f"musec {how}\n", encoding="utf-8")

    async def _wheelhouse(self, environment: BaseEnvironment, what: Path | str) -> Path:
        probe = await environment.exec(_FIND_PYTHON + '"$py" -c "' + _TAGS_PY + '"')
        tags = (probe.stdout or "").strip().splitlines()[-1:] or [""]
        if probe.return_code != 0 or len(tags[0].split()) != 3:
            raise RuntimeError(f"no Python >= 3.11 in the environment to install musec with: {probe.stderr}")
        if MusecAgent._wheel_lock is None:
            MusecAgent._wheel_lock = asyncio.Lock()
        key = f"{tags[0]} {what}"
        async with MusecAgent._wheel_lock:
            if key not in MusecAgent._wheel_cache:
                MusecAgent._wheel_cache[key] = await asyncio.to_thread(_download_wheelhouse, str(what), *tags[0].split())
        return MusecAgent._wheel_cache[key]

    async def _local_wheel(self) -> Path | None:
        """The wheel of the running musec: the local wheel it was installed from, else one
        built once per process from the checkout or archive it was installed from, editable
        or not (``None`` when musec came from the package index: the index has that version).

        Raises:
            RuntimeError: the checkout or file musec was installed from is gone.
        """
        source = _local_source()
        if source is None:
            return None
        if source.suffix == ".whl":
            return source
        if MusecAgent._wheel_lock is None:
            MusecAgent._wheel_lock = asyncio.Lock()
        async with MusecAgent._wheel_lock:
            if str(source) not in MusecAgent._wheel_cache:
                MusecAgent._wheel_cache[str(source)] = await asyncio.to_thread(_build_wheel, source)
        return MusecAgent._wheel_cache[str(source)]

    # --- run --------------------------------------------------------------------------

    def _model_for(self, environment: BaseEnvironment) -> tuple[str, Path | None]:
        model = self.model_name or os.environ.get("MUSEC_MODEL") or ""
        if not model:
            raise ValueError("give the model: harbor run --model PROVIDER/MODEL (or scripted:PATH)")
        if not model.startswith("scripted:"):
            return model, None
        path = Path(model.removeprefix("scripted:").replace("{task}", environment.environment_name)).expanduser()
        if not path.is_file():
            raise FileNotFoundError(f"scripted model file {path} does not exist")
        return "scripted:/installed-agent/model.json", path

    async def run(self, instruction: str, environment: BaseEnvironment, context: AgentContext) -> None:
        opts = self._opts
        model, script = self._model_for(environment)
        with tempfile.TemporaryDirectory(prefix="musec-harbor-") as tmp:
            (Path(tmp) / "instruction.md").write_text(self.render_instruction(instruction), encoding="utf-8")
            await environment.upload_file(Path(tmp) / "instruction.md", "/installed-agent/instruction.md")
        if script is not None:
            await environment.upload_file(script, "/installed-agent/model.json")
        env = {k: v for k in CREDENTIAL_VARS if (v := os.environ.get(k))}
        env.update(self._connection_env())
        env.update(MUSEC_HOME=MUSEC_HOME, MUSEC_SOCKET="/tmp/musec-harbor/musecd.sock", NO_COLOR="1")
        if opts.agents is not None:
            env["MUSEC_AGENTS"] = opts.agents
        flags = [f"--model {shlex.quote(model)}", "--approval auto", "--output-format stream-json",
                 f"--sandbox {shlex.quote(opts.sandbox)}", f"--max-turns {int(opts.max_turns)}",
                 "--allow-home-workspace"]  # a throwaway task container: its working directory may be / or /root
        if opts.budget_usd:
            flags.append(f"--budget-usd {float(opts.budget_usd)}")
        result = await environment.exec(_run_script(" ".join(flags), snapshot=opts.snapshot, apply=opts.apply), env=env)
        code = result.return_code
        if code in GRADABLE_EXITS:
            return
        detail = (f"musec run exited {code}: "
                  f"{self._truncate_output(_tail(self.logs_dir / 'musec-stderr.txt') or result.stderr or result.stdout)}")
        if code == PROVIDER_EXIT:
            raise UnknownApiError(detail)
        raise NonZeroAgentExitCodeError(detail)

    def _connection_env(self) -> dict[str, str]:
        """musec's provider variables from Harbor's resolved model connection."""
        if not self.model_name or self.model_name.startswith("scripted:"):
            return {}
        connection = self.model_connection
        env = dict(connection.env)
        url = connection.execution_base_url
        if url and not any(k.endswith(("_BASE_URL", "_ENDPOINT")) for k in env):
            prefix = self.model_name.split("/", 1)[0]
            env[_URL_VAR_BY_PREFIX.get(prefix, "OPENAI_BASE_URL")] = url
        return env

    # --- after the run ----------------------------------------------------------------

    def populate_context_post_run(self, context: AgentContext) -> None:
        """Fill the trial's tokens and cost from ``musec cost`` and write ``trajectory.json``."""
        summary = _last_json_line(self.logs_dir / "musec-stream.jsonl")
        session_id = str(summary.get("session_id") or "")
        log = self.logs_dir / "musec-home" / "state" / "sessions" / f"{session_id}.jsonl"
        if not session_id or not log.is_file():
            self.logger.warning(f"no musec session log under {self.logs_dir}; no trajectory")
            return
        events = read_events(log)
        totals = usage_totals(events)
        cost = _read_json(self.logs_dir / "musec-cost.json")
        if cost.get("rows") is not None:  # musec's own report wins over our sum (they agree)
            rows = cost["rows"]
            context.n_input_tokens = sum(r["input_tokens"] + r["cache_read_tokens"] + r["cache_write_tokens"] for r in rows)
            context.n_cache_tokens = sum(r["cache_read_tokens"] for r in rows)
            context.n_output_tokens = sum(r["output_tokens"] for r in rows)
            context.cost_usd = float(cost.get("total_usd", 0.0))
        else:
            context.n_input_tokens, context.n_cache_tokens = totals["n_input_tokens"], totals["n_cache_tokens"]
            context.n_output_tokens, context.cost_usd = totals["n_output_tokens"], totals["cost_usd"]
        context.model_usage = {m: ModelUsage(**u) for m, u in totals["by_model"].items()}
        context.metadata = {"musec_session_id": session_id, "exit_reason": summary.get("exit_reason"),
                            "exit_code": summary.get("exit_code"), "turns": summary.get("turns"),
                            "model_calls": totals["calls"]}
        try:
            trajectory = trajectory_from_events(events, agent_version=self.version() or "unknown",
                                                model_name=self.model_name)
        except ValueError as exc:
            self.logger.warning(f"no trajectory: {exc}")
            return
        (self.logs_dir / "trajectory.json").write_text(json.dumps(trajectory.to_json_dict(), indent=2,
                                                                  ensure_ascii=False))


# --- helpers (module level: they need no agent) ------------------------------------------


def _musec_version() -> str:
    from importlib.metadata import version

    return version("musec")


def _local_source() -> Path | None:
    """Where this musec was installed from when that is a local checkout, wheel or archive
    (PEP 610's ``direct_url.json``: ``pip install -e .``, ``pip install .``, ``pip install
    FILE``); ``None`` when it came from the package index (no ``file:`` URL).

    Raises:
        RuntimeError: that checkout or file is gone (the index is not asked instead: a
            package of that name and version there need not be this musec).
    """
    from musec.client.evaluate import installed_from

    local, _ = installed_from()
    if not local:
        return None
    path = Path(local)
    if not path.exists():
        raise RuntimeError(f"musec was installed from {path}, which is gone: install musec again, or give "
                           "the wheel to install in each trial with --ak wheel=PATH")
    return path


def _scratch_dir(prefix: str) -> Path:
    """A temporary folder removed when Harbor's process exits (wheels live for its trials)."""
    out = Path(tempfile.mkdtemp(prefix=prefix))
    atexit.register(shutil.rmtree, out, True)
    return out


def _host_root(environment: BaseEnvironment) -> Path | None:
    """Where ``AGENT_ROOT`` of a bwrap trial lies on the host; ``None`` for other environments
    (a container's Python may differ from trial to trial: each installs its own)."""
    from .environment import BwrapEnvironment

    return environment.host_path(AGENT_ROOT) if isinstance(environment, BwrapEnvironment) else None


def _build_wheel(source: Path) -> Path:
    out = _scratch_dir("musec-wheel-")
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(source)],
                          capture_output=True, text=True, timeout=600)
    wheels = sorted(out.glob("musec-*.whl"))
    if proc.returncode != 0 or not wheels:
        raise RuntimeError(f"could not build the musec wheel from {source}: {proc.stderr.strip()[-500:]}")
    return wheels[0]


_FIND_PYTHON = """
py=""
for c in python3.13 python3.12 python3.11 python3; do
  if command -v "$c" >/dev/null 2>&1 && "$c" -c 'import sys, venv; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
    py="$c"; break
  fi
done
"""
# Prints "MAJOR.MINOR MACHINE GLIBC" of the environment's Python, for pip download's tags.
_TAGS_PY = "import platform, sys; print(f'{sys.version_info[0]}.{sys.version_info[1]}', platform.machine(), platform.libc_ver()[1] or '2.17')"


def _download_wheelhouse(what: str, version: str, machine: str, glibc: str) -> Path:
    """musec and its dependencies as wheels for CPython ``version`` on ``machine`` with ``glibc``.

    Raises:
        RuntimeError: pip could not find wheels for some dependency.
    """
    out = _scratch_dir("musec-wheelhouse-")
    major, minor = (int(x) for x in glibc.split(".")[:2])
    platforms = [f"manylinux_{major}_{m}_{machine}" for m in range(minor, 16, -1)]
    platforms += [f"manylinux2014_{machine}", f"linux_{machine}"]
    abi = "cp" + version.replace(".", "")
    argv = [sys.executable, "-m", "pip", "download", "-q", "--only-binary=:all:", "--python-version", version,
            "--implementation", "cp", "--abi", abi, "--abi", "abi3", "--abi", "none", "-d", str(out), what]
    for plat in platforms:
        argv += ["--platform", plat]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=900)
    if proc.returncode != 0:
        raise RuntimeError(f"could not download musec's wheels for Python {version} ({machine}, glibc {glibc}): "
                           f"{proc.stderr.strip()[-800:]}; give --ak wheelhouse=DIR")
    return out


def _install_script(spec: str, index: str) -> str:
    """Shell: a Python >= 3.11 (or uv's), a venv at AGENT_ROOT, musec installed into it."""
    return "set -e\n" + _FIND_PYTHON + f"""
pipflags="-q --no-compile --disable-pip-version-check {index} {shlex.quote(spec)}"
if [ -n "$py" ] && "$py" -m venv --without-pip {AGENT_ROOT} && "$py" -m pip --python {AGENT_ROOT}/bin/python install $pipflags; then
  :  # the fast way: the system's pip installs into a venv made without its own pip
elif [ -n "$py" ]; then
  rm -rf {AGENT_ROOT} && "$py" -m venv {AGENT_ROOT}
  {AGENT_ROOT}/bin/python -m pip install $pipflags
else
  if ! command -v uv >/dev/null 2>&1; then
    curl -LsSf https://astral.sh/uv/install.sh | env UV_INSTALL_DIR=/installed-agent/uv sh
    export PATH="/installed-agent/uv:$PATH"
  fi
  uv venv -q --python 3.12 {AGENT_ROOT}
  uv pip install -q --python {AGENT_ROOT}/bin/python {index} {shlex.quote(spec)}
fi
{AGENT_ROOT}/bin/musec --version
"""


def _run_script(flags: str, *, snapshot: bool, apply: bool) -> str:
    """Shell: the workspace snapshot, musec run, a fan-out's integration applied, the cost
    report, the daemon stopped; exit as musec run did."""
    logs = "/logs/agent"
    py = f"{AGENT_ROOT}/bin/python"
    snap = """
if command -v git >/dev/null 2>&1 && ! git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  { git init -q && timeout 120 git add -A && git -c user.name=musec -c user.email=musec@localhost \\
      commit -q --no-verify --allow-empty -m "task files before the agent run"; } \\
    || echo "musec-harbor: could not snapshot the workspace in git" >&2
fi""" if snapshot else ""
    fanout = f"""
  "$M" workers "$sid" --json > {logs}/musec-workers.json 2>> {logs}/musec-stderr.txt
  if {py} -c 'import json, sys; sys.exit(not json.load(open(sys.argv[1]))["workers"])' {logs}/musec-workers.json 2>/dev/null; then
    "$M" apply "$sid" > {logs}/musec-apply.txt 2>&1
  fi""" if apply else ""
    return f"""
M={AGENT_ROOT}/bin/musec
mkdir -p "$MUSEC_HOME" /tmp/musec-harbor{snap}
"$M" run {flags} - < /installed-agent/instruction.md > {logs}/musec-stream.jsonl 2> {logs}/musec-stderr.txt
rc=$?
sid=$(tail -n 1 {logs}/musec-stream.jsonl 2>/dev/null | {py} -c 'import json, sys; print(json.load(sys.stdin).get("session_id", ""))' 2>/dev/null)
if [ -n "$sid" ]; then{fanout}
  "$M" cost "$sid" --json > {logs}/musec-cost.json 2>> {logs}/musec-stderr.txt
fi
"$M" daemon stop > /dev/null 2>&1
echo "$rc" > {logs}/musec-exit-code.txt
exit $rc
"""


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _last_json_line(path: Path) -> dict[str, Any]:
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").strip().splitlines()
    except OSError:
        return {}
    for line in reversed(lines):
        try:
            data = json.loads(line)
        except ValueError:
            continue
        if isinstance(data, dict) and data.get("type") == "result":
            return data
    return {}


def _tail(path: Path, lines: int = 5) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").strip().splitlines()[-lines:])
    except OSError:
        return ""
