"""A sandboxed ``bash true`` tool call against musec's bwrap command run alone, at a small
and a large daemon size (issue 19 part 5: the spawn cost must not grow with memory).

    python bench/spawn_cost.py [--calls 30] [--rounds 5] [--large-mib 300] [--sandbox bwrap|off]

Runs under uvloop, as the daemon does. In each round, for each size, three things are
timed per call, interleaved (the order rotates): the baseline, the bwrap argv that
``BashTool`` builds run alone with ``subprocess.run`` (CPython's vfork path); the
candidate, ``BashTool`` itself (``run_process_group``, through ``agents.tools.spawn``);
and, for reference, the same argv through ``anyio.open_process`` (uvloop's fork(), the
path musec used before). With ``--sandbox bwrap`` the candidate runs in a warm sandbox
(``agents/tools/warm.py``) and a fourth row times ``BashTool`` with warm sandboxes off
(``MUSEC_SANDBOX_WARM=0``, one bwrap a call): warm call vs one-shot call. "large" touches ``--large-mib`` MiB of memory first, as a
daemon after a large resume would hold. Printed: per size, the median ms of each and the
per-round ratios candidate / baseline (and fork path / baseline), min/median/max.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import anyio
from _pairs import print_ratios
from musec.agents.tools import BashTool, SandboxPolicy, ToolContext
from musec.agents.tools.sandbox import bwrap_argv, find_bwrap, scrub_env


async def _median_ms(n: int, call) -> float:
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        await call()
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times)


async def bench(args: argparse.Namespace) -> None:
    ws = Path(tempfile.mkdtemp(prefix="spawnbench"))
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(ws), "LANG": "C.UTF-8"}
    policy = SandboxPolicy(mode=args.sandbox)
    ctx = ToolContext(workspace=ws, env=env, sandbox=policy)
    tool = BashTool()
    bwrap = find_bwrap()
    argv = (bwrap_argv(policy, ws, env, ["bash", "-c", "true"], bwrap=bwrap) if args.sandbox == "bwrap"
            else ["bash", "-c", "true"])
    clean = scrub_env(env)

    async def alone() -> None:
        subprocess.run(argv, cwd=ws, env=clean, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, check=True)

    async def musec_call() -> None:
        out = await tool.run({"command": "true"}, ctx)
        assert not out.is_error, out

    async def fork_path() -> None:
        proc = await anyio.open_process(argv, cwd=ws, env=clean, start_new_session=True,
                                        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        async with proc:
            assert proc.stdout is not None
            async for _ in proc.stdout:
                pass
            await proc.wait()

    async def one_shot_call() -> None:
        os.environ["MUSEC_SANDBOX_WARM"] = "0"
        try:
            await musec_call()
        finally:
            os.environ.pop("MUSEC_SANDBOX_WARM", None)

    await musec_call()  # the one-time bwrap probe, and the warm sandbox's start
    ballast = b""
    for size in ("small", "large"):
        if size == "large":
            ballast = bytearray(args.large_mib << 20)
            for i in range(0, len(ballast), 4096):
                ballast[i] = 1  # touched: the pages are really mapped
        rows = []
        for r in range(args.rounds):
            order = [alone, musec_call, fork_path, one_shot_call]
            order = order[r % 4:] + order[: r % 4]
            got = {fn: await _median_ms(args.calls, fn) for fn in order}
            rows.append((got[alone], got[musec_call], got[fork_path], got[one_shot_call]))
        print(f"-- {size} daemon ({len(ballast) >> 20} MiB ballast), {args.sandbox} sandbox, "
              f"{args.calls} calls a round, {args.rounds} rounds")
        print_ratios("bash true: musec call vs argv alone, ms", [(a, b) for a, b, _, _ in rows])
        print_ratios("bash true: old fork path vs argv alone, ms", [(a, c) for a, _, c, _ in rows])
        if args.sandbox == "bwrap":
            print_ratios("bash true: warm call vs one-shot call, ms", [(d, b) for _, b, _, d in rows])
            print_ratios("bash true: one-shot call vs argv alone, ms", [(a, d) for a, _, _, d in rows])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--large-mib", type=int, default=300)
    parser.add_argument("--sandbox", choices=("bwrap", "off"), default="bwrap")
    args = parser.parse_args()
    anyio.run(bench, args, backend="asyncio", backend_options={"use_uvloop": True})


if __name__ == "__main__":
    main()
