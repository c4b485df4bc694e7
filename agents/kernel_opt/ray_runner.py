"""Evaluations on a Ray cluster (the optional ``musec[ray]`` extra): every GPU a team has.

``RayEvaluator`` has ``evaluate_kernel``'s signature, so a ``Campaign`` takes it in place of
the local runner. Each call becomes one Ray task that asks for one GPU (``cuda`` specs) or one
CPU (``cpu`` specs) and ships what it needs with it: the candidate's source and the spec's
folder (its ``kernel-task.toml`` and helper files). On the worker the task writes them to a
temporary folder and runs the ordinary ``evaluate_kernel`` there (separate process, timeout,
forbidden imports), so a Ray evaluation gives the same result as a local one. Ray schedules
one task per GPU, so evaluations on one GPU never overlap and several GPUs run in parallel.
The local process runner stays the default.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import msgspec

from .evaluate import Evaluation, evaluate_kernel
from .spec import CampaignSpec, load_spec

_SHIPPED_SUFFIXES = (".py", ".toml", ".json", ".txt")


def _spec_files(spec: CampaignSpec) -> dict[str, str]:
    root = Path(spec.spec_dir)
    return {p.name: p.read_text() for p in sorted(root.iterdir())
            if p.is_file() and p.suffix in _SHIPPED_SUFFIXES}  # fmt: skip


def evaluate_shipped(spec_name: str, spec_files: dict[str, str], rel_path: str, source: str,
                     tool_calls: int) -> bytes:  # fmt: skip
    """The body of a Ray task: rebuild the spec folder and workspace, evaluate, return JSON bytes."""
    with tempfile.TemporaryDirectory(prefix="musec-ray-eval-") as tmp:
        spec_dir, ws = Path(tmp) / "spec", Path(tmp) / "ws"
        spec_dir.mkdir()
        for name, text in spec_files.items():
            (spec_dir / name).write_text(text)
        target = ws / rel_path
        target.parent.mkdir(parents=True)
        target.write_text(source)
        spec = load_spec(spec_dir)
        ev = evaluate_kernel(spec, ws, rel_path, tool_calls=tool_calls)
        return msgspec.json.encode(ev)


class RayEvaluator:
    """Evaluate on a Ray cluster (see the module docstring).

    Args:
        address: the cluster (``"auto"``, ``"ray://host:10001"``), or None to use the one
            ``ray.init`` finds or starts.
        init_kwargs: more arguments for ``ray.init`` (a test passes ``num_cpus``).

    Raises:
        ImportError: ray is not installed (``pip install 'musec[ray]'``).
    """

    def __init__(self, address: str | None = None, **init_kwargs: Any) -> None:
        import ray

        self._ray = ray
        if not ray.is_initialized():
            ray.init(address=address, include_dashboard=False, log_to_driver=False, **init_kwargs)
        self._task = ray.remote(evaluate_shipped)

    def __call__(self, spec: CampaignSpec, workspace: Path, path: str, *, tool_calls: int = 0, **where: Any) -> Evaluation:
        """Evaluate ``workspace / path`` on the cluster; blocks until the task is done. The
        session's sandbox (``where``) does not reach the cluster's machines: the person's own."""
        source = (Path(workspace) / path).read_text()
        resources = {"num_gpus": 1} if spec.device == "cuda" else {"num_cpus": 1}
        ref = self._task.options(**resources).remote(spec.name, _spec_files(spec), path, source, tool_calls)
        return msgspec.json.decode(self._ray.get(ref), type=Evaluation)

    def shutdown(self) -> None:
        """Disconnect from (or stop) the cluster this evaluator started."""
        self._ray.shutdown()
