"""``musec eval``: run Harbor with musec as the agent, then print the job's table.

Harbor (PyPI ``harbor``, pinned to ``HARBOR_VERSION``) needs Python >= 3.12 and about
470 MB, so it lives in a virtual environment of its own, never in musec's: ``--harbor-venv``,
else ``$MUSEC_HARBOR_VENV``, else ``harbor-venv`` under musec's state directory. When that
venv is missing it is created with the first Python >= 3.12 found (this one, ``python3.1x``
on PATH, or pyenv's), and ``musec[eval]`` of this very version is installed into it (from
this checkout when musec is an editable install); a venv musec made that an install left
incomplete is made again. Harbor then runs as a subprocess:
``harbor run --agent musec.harbor.agent:MusecAgent --env ...``; nothing of Harbor is
imported here.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from musec.daemon import protocol as p

from .errors import SetupFailed, UsageError
from .exitcodes import OK, Condition, for_condition
from .output import err, out

HARBOR_VERSION = "0.26.0"
AGENT = "musec.harbor.agent:MusecAgent"
ENVS = {"bwrap": "musec.harbor.environment:BwrapEnvironment"}
HARBOR_ENV = {"HARBOR_TELEMETRY": "0", "LITELLM_LOCAL_MODEL_COST_MAP": "True"}


def add_arguments(ev: argparse.ArgumentParser) -> None:
    """The options of ``musec eval`` (``client/args.py`` names the command)."""
    ev.description = "musec eval PATH|DATASET --model M [-k N] [-n N] [--env E]  |  musec eval report JOB"
    ev.add_argument("target", help="a task folder or task set (PATH), a Harbor dataset (NAME@VERSION), or `report`")
    ev.add_argument("job", nargs="?", default=None, help="with `report`: the job folder")
    ev.add_argument("--model", default=None, help="the model (musec model id or scripted:PATH; {task} is the task's name)")
    ev.add_argument("-k", "--attempts", type=int, default=1, help="attempts per task (default 1)")
    ev.add_argument("-n", "--concurrent", type=int, default=2, help="trials run at once (default 2)")
    ev.add_argument("--env", default="bwrap", help="bwrap (default), docker, daytona, modal, e2b, ... or module:Class")
    ev.add_argument("--jobs-dir", default="jobs", help="where Harbor writes jobs (default ./jobs)")
    ev.add_argument("--job-name", default=None, help="the job's folder name under --jobs-dir (default: musec-DATE-TIME)")
    ev.add_argument("--ak", action="append", default=[], metavar="KEY=VALUE", help="MusecAgent option (repeatable)")
    ev.add_argument("--ae", action="append", default=[], metavar="KEY=VALUE", help="agent environment variable")
    ev.add_argument("--base-url", default=None, help="the model's endpoint (Harbor's model connection)")
    ev.add_argument("--api-key-name", default=None, metavar="VAR", help="the variable holding the model's key")
    ev.add_argument("--compare", default=None, metavar="AGENT",
                    help="also run this Harbor agent (e.g. mini-swe-agent, claude-code) on the same tasks and model")
    ev.add_argument("--harbor-venv", default=None, help="Harbor's virtual environment (default: $MUSEC_HARBOR_VENV)")
    ev.add_argument("--min-pass-rate", type=float, default=None, help="exit 1 when the pass rate is lower")
    ev.add_argument("--json", action="store_true", help="print the numbers as JSON")
    ev.add_argument("--plot", default=None, metavar="PNG", help="with report: where to write the plot")


def cmd_eval(args: argparse.Namespace) -> int:
    from . import evalreport

    if args.target == "report":
        if not args.job:
            raise UsageError("usage: musec eval report JOB")
        try:
            report = evalreport.load(Path(args.job))
        except evalreport.JobNotFound as exc:
            raise UsageError(str(exc)) from None
        _print(report, args.json)
        _write_plot(report, Path(args.plot) if args.plot else Path(args.job) / "musec-eval.png")
        return OK
    if not args.model:
        raise UsageError("give the model: musec eval PATH --model PROVIDER/MODEL (or scripted:PATH)")
    check_arguments(args)
    venv = ensure_venv(harbor_venv_path(args.harbor_venv))
    jobs_dir = Path(args.jobs_dir).resolve()
    name = args.job_name or time.strftime("musec-%Y%m%d-%H%M%S")
    code = run_harbor(venv, args, AGENT, jobs_dir, name)
    try:
        report = evalreport.load(jobs_dir / name)
    except evalreport.JobNotFound as exc:
        err(f"musec: harbor exited {code} and wrote no results ({exc})")
        return for_condition(Condition.CHECKS_FAILED)
    _print(report, args.json)
    if args.compare:
        if not args.json:
            out()
        run_harbor(venv, args, args.compare, jobs_dir, name + "-" + args.compare.replace(":", "_").replace("/", "_"))
        try:
            _print(evalreport.load(jobs_dir / (name + "-" + args.compare.replace(":", "_").replace("/", "_"))), args.json)
        except evalreport.JobNotFound as exc:
            err(f"musec: the {args.compare} run wrote no results ({exc})")
    if args.min_pass_rate is not None and not report.as_dict()["pass_rate"] >= args.min_pass_rate:
        return for_condition(Condition.CHECKS_FAILED)
    return OK


def check_arguments(args: argparse.Namespace) -> None:
    """Everything about a run that can be wrong, checked before Harbor's venv is made (an
    install of minutes must not come before "no such folder").

    Raises:
        UsageError: -k/-n below 1, a target that is neither a folder nor NAME@VERSION, an
            ``--ak``/``--ae`` without KEY=, a scripted model file that does not exist.
    """
    if args.attempts < 1 or args.concurrent < 1:
        raise UsageError("-k and -n must be at least 1")
    target = Path(args.target).expanduser()
    if not target.exists() and ("@" not in args.target or os.sep in args.target):
        raise UsageError(f"{args.target}: no such task folder, and not a Harbor dataset NAME@VERSION "
                         "(e.g. terminal-bench@2.0)")
    if target.exists() and not target.is_dir():
        raise UsageError(f"{args.target} is not a folder: give a task folder (task.toml) or a folder of tasks")
    for flag, pairs in (("--ak", args.ak), ("--ae", args.ae)):
        for kv in pairs:
            if not kv.partition("=")[0].strip() or "=" not in kv:
                raise UsageError(f"{flag} takes KEY=VALUE, got {kv!r}")
    if args.model.startswith("scripted:") and "{task}" not in args.model:
        script = Path(args.model.removeprefix("scripted:")).expanduser()
        if not script.is_file():
            raise UsageError(f"{args.model}: no such script file (write scripted:PATH, or "
                             "scripted:DIR/{task}/solve.json for one script per task)")


def _print(report, as_json: bool) -> None:
    if as_json:
        out(json.dumps(report.as_dict(), allow_nan=True))
    else:
        out(str(report))


def _write_plot(report, out: Path) -> None:
    from . import evalreport

    try:
        evalreport.plot(report, out)
    except ImportError:
        err("musec: no plot: matplotlib is not installed (pip install 'musec[eval]')")
        return
    err(f"plot: {out}")


# --- the Harbor venv and run -----------------------------------------------------------


def harbor_venv_path(given: str | None) -> Path:
    path = given or os.environ.get("MUSEC_HARBOR_VENV") or str(p.state_home() / "harbor-venv")
    return Path(path).expanduser().resolve()


def find_python312() -> str | None:
    """A Python >= 3.12 that runs: this one, pyenv's, or ``python3.1x`` on PATH; else None.

    Each candidate is run, because a pyenv shim on PATH exists for versions it will refuse.
    """
    if sys.version_info >= (3, 12):
        return sys.executable
    root = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
    candidates = [str(c) for c in sorted(root.glob("3.1[2-9]*/bin/python"))]
    candidates += [found for name in ("python3.14", "python3.13", "python3.12") if (found := shutil.which(name))]
    check = "import sys; sys.exit(sys.version_info < (3, 12))"
    for candidate in candidates:
        try:
            if subprocess.run([candidate, "-c", check], capture_output=True, timeout=30).returncode == 0:
                return candidate
        except (OSError, subprocess.TimeoutExpired):
            continue
    return None


def installed_from() -> tuple[str, bool]:
    """Where this musec was installed from, by PEP 610's ``direct_url.json``: the local
    checkout, wheel or archive (``""`` for the package index), and whether it is an
    editable install of a checkout. The path may no longer exist."""
    from importlib.metadata import distribution
    from urllib.parse import unquote, urlparse

    info = json.loads(distribution("musec").read_text("direct_url.json") or "{}")
    url = urlparse(str(info.get("url", "")))
    local = unquote(url.path) if url.scheme == "file" else ""
    return local, bool((info.get("dir_info") or {}).get("editable"))


def _musec_spec() -> str:
    """What to pip-install for ``musec[eval]``: where this musec came from
    (``installed_from``): the checkout (editable when this one is), the local wheel or
    archive, else this version from the package index."""
    from importlib.metadata import version

    local, editable = installed_from()
    if local and os.path.exists(local):
        if os.path.isdir(local):
            return f"{'-e ' if editable else ''}{local}[eval]"
        return f"musec[eval] @ {Path(local).as_uri()}"
    return f"musec[eval]=={version('musec')}"


MADE_BY_MUSEC = ".made-by-musec"  # in a venv musec created: it may remove and make it again


def ensure_venv(venv: Path) -> Path:
    """Harbor's venv, created and filled when missing (minutes: Harbor is ~470 MB); each
    install says so first. A venv musec made that lacks Harbor (an install cut off, e.g. by
    Ctrl-C) is removed and made again, never filled in place; a venv the person gave is filled.

    Raises:
        UsageError: no Python >= 3.12 to create it with.
        SetupFailed: the install failed (a venv musec made is removed again).
    """
    python = venv / "bin" / "python"
    probe = [str(python), "-c", "import musec.harbor.agent, harbor"]
    if python.exists() and subprocess.run(probe, capture_output=True, env=_env()).returncode == 0:
        return venv
    ours = (venv / MADE_BY_MUSEC).exists() or venv == (p.state_home() / "harbor-venv").resolve()
    if ours and venv.exists():
        err(f"musec: Harbor's venv at {venv} is incomplete (an earlier install stopped part-way); making it again")
        shutil.rmtree(venv, ignore_errors=True)
    created = not python.exists()
    if created:
        base = find_python312()
        if base is None:
            raise UsageError(f"Harbor needs Python >= 3.12 and none was found; install one (e.g. `pyenv install 3.12`) "
                             f"or give a venv with Harbor {HARBOR_VERSION} and musec[eval] (--harbor-venv)")
        err(f"musec: creating Harbor's venv at {venv}")
        subprocess.run([base, "-m", "venv", str(venv)], check=True)
        (venv / MADE_BY_MUSEC).write_text("made by `musec eval`; removed and made again when incomplete\n")
    spec = _musec_spec()
    spec_args = ["-e", spec.removeprefix("-e ")] if spec.startswith("-e ") else [spec]
    err(f"musec: installing Harbor {HARBOR_VERSION} and {spec} into {venv} (about 470 MB; a few minutes the first time)")
    # pip's own lines ("Collecting ...", "Downloading ...") are the progress: on stderr, so a
    # script reading the table from stdout does not get them
    proc = subprocess.run([str(python), "-m", "pip", "install", "--progress-bar", "off", *spec_args,
                           f"harbor=={HARBOR_VERSION}"], env=_env(), stdout=2)
    if proc.returncode != 0 or subprocess.run(probe, capture_output=True, env=_env()).returncode != 0:
        if created or ours:
            shutil.rmtree(venv, ignore_errors=True)  # never a half-built venv taken for a good one later
        raise SetupFailed(f"could not install Harbor {HARBOR_VERSION} and {spec} into {venv}; see pip's output "
                          "above (or give a ready venv with --harbor-venv)")
    return venv


def _env() -> dict[str, str]:
    return {**os.environ, **HARBOR_ENV}


def harbor_argv(venv: Path, args: argparse.Namespace, agent: str, jobs_dir: Path, name: str) -> list[str]:
    """The ``harbor run`` command line for one job."""
    target = Path(args.target)
    model = args.model
    if model.startswith("scripted:"):
        model = "scripted:" + str(Path(model.removeprefix("scripted:")).expanduser().absolute())
    argv = [str(venv / "bin" / "harbor"), "run", "--yes", "--quiet",
            *(["--path", str(target.resolve())] if target.exists() else ["--dataset", args.target]),
            "--agent", agent, "--model", model, "--env", ENVS.get(args.env, args.env),
            "-k", str(args.attempts), "-n", str(args.concurrent), "--jobs-dir", str(jobs_dir), "--job-name", name]
    if agent == AGENT:
        for kv in args.ak:
            argv += ["--ak", kv]
        argv += ["--base-url", args.base_url] if args.base_url else []
        argv += ["--api-key-name", args.api_key_name] if args.api_key_name else []
    for kv in args.ae:
        argv += ["--ae", kv]
    return argv


def run_harbor(venv: Path, args: argparse.Namespace, agent: str, jobs_dir: Path, name: str) -> int:
    argv = harbor_argv(venv, args, agent, jobs_dir, name)
    err(f"musec: {' '.join(argv[1:3])} ... job {jobs_dir / name}")
    return subprocess.run(argv, env=_env(), stdout=sys.stderr).returncode
