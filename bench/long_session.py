"""The 1,000-call session of issue 12: cost per call, daemon memory, tokens per request,
prefix-cache share and compaction cost, each against a 100-call session in the same run.

    python bench/long_session.py [--calls 1000] [--baseline-calls 100] [--window 200000]
                                 [--pairs 1] [--provider anthropic] [--plot PATH]

Each side is the real ``musec`` CLI and a fresh daemon (private MUSEC_HOME, the daemon
started by the first command) against the local provider server with a window
(``tests/support``): the model behind it (``long_session.Script``) answers at once with one
``read_file`` of 8 KiB after another (the tool is instant too), over four person's
messages, and summarises when asked. Candidate: ``--calls`` calls; baseline:
``--baseline-calls`` calls, run interleaved (A B, B A...). A per-call figure that does not
grow from baseline to candidate is what "flat" means here.

Printed per side: wall seconds per tool call in musec's code (the run's wall time less the
time the server spent answering, divided by the calls), the daemon's peak RSS (VmHWM),
requests over the window (must be 0), compactions, the share of input tokens a prefix
cache would serve (each request's common prefix with the one before, as the server counts
it), and the compaction cost share (tokens of the summarising calls over all tokens sent
and received). The candidate's tokens per request are plotted to ``--plot`` (PNG).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from _pairs import paired, print_ratios  # noqa: E402

from tests.support.long_session import events, run_long_session  # noqa: E402

BIN = Path(sys.executable).parent


class Runner:
    """The ``musec`` CLI against one private MUSEC_HOME (as the tests' ``Musec``)."""

    def __init__(self, home: Path) -> None:
        self.home = home
        drop = ("KEY", "TOKEN", "SECRET", "BASE_URL", "ENDPOINT")
        self.env = {k: v for k, v in os.environ.items() if not any(d in k for d in drop)}
        self.env.update(MUSEC_HOME=str(home), PATH=f"{BIN}{os.pathsep}{self.env.get('PATH', '')}",
                        GIT_CONFIG_GLOBAL="/dev/null", GIT_CONFIG_NOSYSTEM="1", MUSEC_AGENTS="none",
                        PYTHON_KEYRING_BACKEND="keyring.backends.null.Keyring")
        self.env.pop("MUSEC_SOCKET", None)
        self.env.pop("XDG_RUNTIME_DIR", None)

    def __call__(self, *args: str, env: dict[str, str] | None = None, cwd: Path | None = None,
                 timeout: float = 900, input: str | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(BIN / "musec"), *args], env={**self.env, **(env or {})}, cwd=cwd, capture_output=True,
                              text=True, timeout=timeout, input=input or "")

    def daemon_pid(self) -> int | None:
        proc = self("daemon", "status", "--json")
        return json.loads(proc.stdout)["pid"] if proc.returncode == 0 else None


@dataclass
class Figures:
    calls: int
    wall_s: float
    server_s: float
    peak_rss_mib: float
    refused: int
    compactions: int
    tokens: list[int]
    cache_share: float
    compaction_share: float

    @property
    def per_call_ms(self) -> float:
        return (self.wall_s - self.server_s) / self.calls * 1000


def _vm_hwm_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def one_session(calls: int, window: int, provider: str) -> Figures:
    home = Path(tempfile.mkdtemp(prefix="mhb", dir="/tmp"))
    work = Path(tempfile.mkdtemp(prefix="lsb"))
    run = Runner(home)
    try:
        started = time.perf_counter()
        script, server, sid = run_long_session(run, work, provider, calls=calls, window=window)
        wall = time.perf_counter() - started
        pid = run.daemon_pid()
        rss = _vm_hwm_mib(pid) if pid else float("nan")
        log = events(run, sid)
        done = [e for e in log if e["type"] == "compaction_finished"]
        sent = sum(server.tokens)
        received = sum(int(e.get("usage", {}).get("output_tokens", 0)) for e in log if e["type"] == "model_response")
        summarising = sum(sum(int(v) for v in e.get("usage", {}).values()) for e in done)
        return Figures(calls, wall, server.busy_s, rss, server.refused, len(done), list(server.tokens),
                       sum(server.cached) / max(sent, 1), summarising / max(sent + received, 1))
    finally:
        run("daemon", "stop", timeout=60)
        shutil.rmtree(home, ignore_errors=True)
        shutil.rmtree(work, ignore_errors=True)


def plot(figures: Figures, window: int, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 4))
    ax.plot(range(1, len(figures.tokens) + 1), figures.tokens, lw=0.8, label="tokens sent per request")
    ax.axhline(window, color="red", ls="--", lw=0.8, label=f"window ({window:,})")
    ax.axhline(window * 0.85, color="orange", ls=":", lw=0.8, label="compaction threshold (85%)")
    ax.set_xlabel("request")
    ax.set_ylabel("tokens (server's count)")
    ax.set_title(f"{figures.calls} tool calls of 8 KiB: {figures.compactions} compactions, "
                 f"{figures.cache_share:.1%} of input prefix-cached")
    ax.legend(loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--baseline-calls", type=int, default=100)
    parser.add_argument("--window", type=int, default=200_000)
    parser.add_argument("--pairs", type=int, default=1)
    parser.add_argument("--provider", choices=("anthropic", "openai"), default="anthropic")
    parser.add_argument("--plot", type=Path, default=Path("bench/long_session_tokens.png"))
    args = parser.parse_args()
    pairs = paired(args.pairs, baseline=lambda: one_session(args.baseline_calls, args.window, args.provider),
                   candidate=lambda: one_session(args.calls, args.window, args.provider))
    for label, side in (("baseline", pairs[-1][0]), ("candidate", pairs[-1][1])):
        print(f"{label}: {side.calls} calls, wall {side.wall_s:.1f} s (server {side.server_s:.1f} s), "
              f"{side.per_call_ms:.1f} ms per call in musec, daemon peak RSS {side.peak_rss_mib:.0f} MiB, "
              f"{side.refused} over the window, {side.compactions} compactions, max {max(side.tokens):,} tokens, "
              f"prefix-cache share {side.cache_share:.1%}, compaction cost share {side.compaction_share:.1%}")
    print_ratios("ms per call in musec (candidate / baseline)", [(a.per_call_ms, b.per_call_ms) for a, b in pairs])
    print_ratios("daemon peak RSS MiB (candidate / baseline)", [(a.peak_rss_mib, b.peak_rss_mib) for a, b in pairs])
    plot(pairs[-1][1], args.window, args.plot)
    print(f"plot: {args.plot}")


if __name__ == "__main__":
    main()
