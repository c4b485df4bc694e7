"""``BwrapEnvironment`` under real Harbor with its ``oracle`` agent (no musec install).

Checks what the environment promises: a task's hidden tests see the agent's work, nothing
the agent started outlives its command, a timeout kills the sandbox, no-network means no
interface but loopback, and tasks it cannot honour are refused with a message saying why.
"""

from __future__ import annotations

import json
import os
import subprocess
import uuid
from pathlib import Path

import pytest

from tests.eval.test_eval_harbor import _harbor_venv

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]
ENV = "musec.harbor.environment:BwrapEnvironment"


def _task(root: Path, *, solve: str, test: str = "echo 1 > /logs/verifier/reward.txt", dockerfile: str = "",
          toml_extra: str = "", agent_timeout: float = 60.0) -> Path:
    (root / "environment").mkdir(parents=True)
    (root / "tests").mkdir()
    (root / "solution").mkdir()
    (root / "task.toml").write_text(f'schema_version = "1.4"\n\n[agent]\ntimeout_sec = {agent_timeout}\n\n'
                                    f'[verifier]\ntimeout_sec = 60.0\n\n[environment]\nworkdir = "/app"\n{toml_extra}')
    (root / "instruction.md").write_text("Do the thing.\n")
    (root / "environment" / "Dockerfile").write_text(dockerfile or "FROM python:3.12-slim\nWORKDIR /app\n")
    for rel, text in (("tests/test.sh", "#!/bin/bash\n" + test + "\n"), ("solution/solve.sh", "#!/bin/bash\n" + solve + "\n")):
        (root / rel).write_text(text)
        (root / rel).chmod(0o755)
    return root


def _oracle(venv: Path, task: Path, jobs: Path) -> dict:
    """The trial's result.json, or ``{"refused": harbor's output}`` when no trial ran."""
    env = {**os.environ, "HARBOR_TELEMETRY": "0", "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    proc = subprocess.run([str(venv / "bin" / "harbor"), "run", "--yes", "--quiet", "--path", str(task), "--agent", "oracle",
                           "--env", ENV, "--jobs-dir", str(jobs), "--job-name", "j"], env=env, capture_output=True,
                          text=True, timeout=300)
    results = list((jobs / "j").glob("*/result.json"))
    if not results:
        return {"refused": " ".join((proc.stdout + proc.stderr).split())}
    return json.loads(results[0].read_text())


def _alive(marker: str) -> bool:
    return subprocess.run(["pgrep", "-f", marker], capture_output=True).returncode == 0


def test_leftover_processes_die_and_tests_see_the_work(tmp_path: Path) -> None:
    venv = _harbor_venv()
    marker = f"musec-leftover-{uuid.uuid4().hex}"
    task = _task(tmp_path / "t", solve=f"echo done > /app/out.txt\nsetsid bash -c 'exec -a {marker} sleep 600' &\n"
                                       "nohup sleep 600 >/dev/null 2>&1 &\necho started",
                 test='if [ "$(cat /app/out.txt)" = done ] && ! pgrep sleep; then echo 1; else echo 0; fi '
                      '> /logs/verifier/reward.txt')
    result = _oracle(venv, task, tmp_path / "jobs")
    assert result["verifier_result"]["rewards"]["reward"] == 1.0, result.get("exception_info")
    assert not _alive(marker)


def test_agent_timeout_kills_the_sandbox(tmp_path: Path) -> None:
    venv = _harbor_venv()
    marker = f"musec-timeout-{uuid.uuid4().hex}"
    task = _task(tmp_path / "t", solve=f"bash -c 'exec -a {marker} sleep 600' & sleep 1; pgrep -f {marker} > /app/seen; wait", agent_timeout=3.0)
    result = _oracle(venv, task, tmp_path / "jobs")
    assert result["exception_info"]["exception_type"] == "AgentTimeoutError"
    assert (task.parent / "jobs").exists() and not _alive(marker)


def test_no_network_task_has_only_loopback(tmp_path: Path) -> None:
    venv = _harbor_venv()
    probe = "python3 -c 'import socket; print([n for _, n in socket.if_nameindex()])' > /app/ifaces.txt"
    task = _task(tmp_path / "t", solve=probe, toml_extra='network_mode = "no-network"\n',
                 test="grep -qx \"\\['lo'\\]\" /app/ifaces.txt && echo 1 > /logs/verifier/reward.txt || echo 0 > /logs/verifier/reward.txt")
    result = _oracle(venv, task, tmp_path / "jobs")
    assert result["verifier_result"]["rewards"]["reward"] == 1.0


@pytest.mark.parametrize(("dockerfile", "agent_user", "needle"), [
    ("FROM python:3.12-slim\nRUN pip install requests\n", "", "RUN needs an image build"),
    ("FROM python:3.12-slim\nUSER nobody\n", "", "USER needs an image build"),
    ("FROM python:3.12-slim\nCOPY --from=builder /x /x\n", "", "COPY --from needs another image"),
    ("FROM python:3.12-slim\n", "agent", "runs everything as the user running Harbor"),
])
def test_tasks_it_cannot_honour_are_refused(tmp_path: Path, dockerfile: str, agent_user: str, needle: str) -> None:
    task = _task(tmp_path / "t", solve="true", dockerfile=dockerfile)
    if agent_user:
        text = (task / "task.toml").read_text().replace("[agent]\n", f'[agent]\nuser = "{agent_user}"\n')
        (task / "task.toml").write_text(text)
    result = _oracle(_harbor_venv(), task, tmp_path / "jobs")
    # Refused before any trial starts (Dockerfile), or the trial fails saying why (user).
    said = result.get("refused") or (result.get("exception_info") or {}).get("exception_message", "")
    assert needle in " ".join(said.split()), said[-1500:]
