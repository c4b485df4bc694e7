"""Per-turn overhead of musec against mini-swe-agent and aider on the same instant local
model server (issue 19 part 7; target: musec at most 0.5x of mini-swe-agent).

    python bench/peers_per_turn.py [--turns 20] [--rounds 5]
                                   [--peers-bin DIR ...] [--only musec,musec-nosandbox,mini,aider]
                                   [--baseline-bin DIR]

The model is ``tests/support``'s OpenAI server (Chat Completions, streamed or not, as the
client asks) with a ``respond`` that answers at once: each run gets its own model name
(``peerbench-KIND-TURNS-NONCE``), and the server counts that name's requests. The first
TURNS answers are one bash tool call running ``true`` (aider, which has no command tool,
gets one whole-file edit of ``note.txt`` instead: its turn is a person's message, a model
call and the edit); the next ends the run (musec: a text answer; mini-swe-agent: its
submit command; aider's driver simply stops sending messages). A run that did not make
exactly the model calls expected stops the bench with the agent's output: nothing that
failed is timed.

Contestants, each through its own CLI as a person runs it, in a fresh process per run:

* ``musec``: ``musec run`` (this environment's), the bwrap sandbox (``--sandbox auto``),
  no background agents, against one warm daemon in a private MUSEC_HOME;
* ``musec-nosandbox``: the same with ``--sandbox off``;
* ``baseline``, ``baseline-nosandbox``: the same with another musec install
  (``--baseline-bin DIR``, say main's venv, for a before/after in the same rounds);
* ``mini``: mini-swe-agent's ``mini -y --exit-immediately`` (its default config);
* ``aider``: aider's documented scripting API (``Coder.create``, then ``coder.run``
  once per turn, one process per run; a ``--message`` run is one turn only), whole-file
  edit format, no git commits, no repository map, no history summarising (which would
  add model calls of its own).

Per-turn time: the server notes when each model call arrives; a turn is the time from
one call to the next (reading the answer, the tool call or edit, recording it, building
the next request), averaged over a run with the first gap left out (one-time work). Process
start, imports and session set-up are outside it, so a peer's 20 s of imports under load
does not drown a 50 ms turn. Rounds interleave the contestants (the order rotates each
round); printed: each contestant's median ms a turn, then per round the ratio musec /
peer, min/median/max (``_pairs.print_ratios``).

Peers are found as executables (``mini``, ``aider``) in the ``--peers-bin`` folders, then
in ``$MUSEC_PEERS_BIN`` (folders separated by ``:``), then on PATH. Install them outside
musec's environment, never as its dependencies, each in its own venv (they pin different
versions of litellm and its kin)::

    python3.11 -m venv /tmp/peers-venv && /tmp/peers-venv/bin/pip install mini-swe-agent
    python3.11 -m venv /tmp/peers-aider && /tmp/peers-aider/bin/pip install aider-chat
    MUSEC_PEERS_BIN=/tmp/peers-venv/bin:/tmp/peers-aider/bin python bench/peers_per_turn.py \
        --baseline-bin /work/main/.venv-test/bin   # optional: a before/after in the same rounds

Measured with mini-swe-agent 2.4.6 (litellm 1.110) and aider-chat 0.86.2 (litellm 1.81), offline: both are
told not to fetch model prices or check for updates.

A peer not found is skipped with one line saying how to install it; with none found the
bench still times musec (with and without the sandbox, their ratio printed).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from _pairs import print_ratios  # noqa: E402

from tests.support.anthropic_server import Answer, RecordedRequest  # noqa: E402
from tests.support.openai_server import OpenAIServer, chat_stream  # noqa: E402

BIN = Path(sys.executable).parent
SUBMIT = "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"  # mini-swe-agent's end of a task (its mini.yaml)
PEERS = {  # name: (executable looked for, how to get it)
    "mini": ("mini", "mini-swe-agent not installed: pip install mini-swe-agent to compare"),
    "aider": ("aider", "aider not installed: pip install aider-chat to compare"),
}
MUSECS = ("musec", "musec-nosandbox")
BASELINES = ("baseline", "baseline-nosandbox")  # another musec install (--baseline-bin)

# aider's turns through its scripting API (aider.chat/docs/scripting.html), one process a run.
AIDER_DRIVER = """
import sys
from aider.coders import Coder
from aider.io import InputOutput
from aider.models import Model
turns, model = int(sys.argv[1]), Model(sys.argv[2])
model.max_chat_history_tokens = 10**9  # no summarising calls (extra model calls in a thread)
io = InputOutput(yes=True, pretty=False, fancy_input=False)
coder = Coder.create(main_model=model, fnames=["note.txt"], io=io, edit_format="whole",
                     auto_commits=False, dirty_commits=False, map_tokens=0, stream=True)
for turn in range(turns):
    coder.run(with_message=f"Write turn {turn + 1} into note.txt.")
"""


def parse_model(name: str) -> tuple[str, int]:
    """``peerbench-KIND-TURNS-NONCE`` (a provider prefix before a ``/`` dropped) -> (KIND, TURNS).

    Raises:
        ValueError: the name is not a bench model's.
    """
    parts = name.rpartition("/")[2].split("-")
    if len(parts) < 4 or parts[0] != "peerbench":
        raise ValueError(f"not a bench model name: {name!r}")
    return "-".join(parts[1:-2]), int(parts[-2])


def chat_json(text: str | None, tool_calls: Sequence[dict] = (), model: str = "local-model") -> Answer:
    """A whole (not streamed) Chat Completions answer, as an HTTP response."""
    message: dict = {"role": "assistant", "content": text}
    if tool_calls:
        message["tool_calls"] = [{"id": c["id"], "type": "function",
                                  "function": {"name": c["name"], "arguments": c["arguments"]}} for c in tool_calls]
    body = json.dumps({
        "id": "chatcmpl-peerbench", "object": "chat.completion", "created": 1758035200, "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if tool_calls else "stop"}],
        "usage": {"prompt_tokens": 50, "completion_tokens": 9, "total_tokens": 59},
    }).encode()
    head = f"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {len(body)}\r\n\r\n"
    return Answer(raw=head.encode() + body)


@dataclass
class InstantModel:
    """The server's ``respond``: answers every bench model at once, counting each name's calls."""

    seen: dict[str, list[float]] = field(default_factory=dict)  # name: time.perf_counter() of each call
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __call__(self, request: RecordedRequest, tokens: int, cached: int) -> Answer:
        body = request.body
        name = body["model"]
        kind, turns = parse_model(name)
        with self.lock:
            times = self.seen.setdefault(name, [])
            times.append(time.perf_counter())
            n = len(times)
        text, calls = self.answer(kind, turns, n)
        if body.get("stream"):
            return chat_stream(text, calls, model=name)
        return chat_json(text, calls, model=name)

    @staticmethod
    def answer(kind: str, turns: int, n: int) -> tuple[str | None, list[dict]]:
        """The ``n``-th answer (1-based) of a ``kind`` run of ``turns`` turns: (text, tool calls)."""
        if kind == "aider":
            return f"note.txt\n```\nturn {n}\n```\n", []
        if n <= turns:
            command = "true"
        elif kind == "mini":
            command = SUBMIT
        else:
            return "done", []
        return "Running it.", [{"id": f"call_{n:04d}", "name": "bash", "arguments": json.dumps({"command": command})}]

    @staticmethod
    def expected(kind: str, turns: int) -> int:
        """Model calls a complete ``kind`` run of ``turns`` turns makes."""
        return turns if kind == "aider" else turns + 1


def find_peers(dirs: Sequence[str], path: str | None = None) -> dict[str, Path]:
    """The peers' executables found in ``dirs`` (in order), then on ``path`` (a PATH value;
    ``None``: this process's)."""
    found = {}
    for name, (exe, _) in PEERS.items():
        for d in dirs:
            if (Path(d) / exe).is_file() and os.access(Path(d) / exe, os.X_OK):
                found[name] = Path(d) / exe
                break
        else:
            on_path = shutil.which(exe, path=path)
            if on_path:
                found[name] = Path(on_path)
    return found


class Bench:
    """One server, one musec daemon, and a function per contestant that times a run."""

    def __init__(self, server: OpenAIServer, model: InstantModel, root: Path, peers: dict[str, Path],
                 baseline_bin: Path | None = None) -> None:
        self.server, self.model, self.root, self.peers = server, model, root, peers
        self.nonce = itertools.count(1)
        self.home = root / "home"
        self.home.mkdir()
        self.musec_bins = {"musec": BIN, **({"baseline": baseline_bin} if baseline_bin else {})}
        drop = ("KEY", "TOKEN", "SECRET", "BASE_URL", "API_BASE", "ENDPOINT")
        base = {k: v for k, v in os.environ.items() if not any(d in k for d in drop)}
        for k in ("MUSEC_SOCKET", "XDG_RUNTIME_DIR", "VIRTUAL_ENV", "PYTHONPATH"):
            base.pop(k, None)
        base.update(OPENAI_API_KEY="sk-peerbench-local", OPENAI_BASE_URL=server.base_url,
                    OPENAI_API_BASE=server.base_url, GIT_CONFIG_GLOBAL="/dev/null", GIT_CONFIG_NOSYSTEM="1")
        self.musec_envs = {label: {**base, "MUSEC_HOME": str(root / label), "MUSEC_AGENTS": "none",
                                   "PATH": f"{bin_dir}{os.pathsep}{base.get('PATH', '')}",
                                   "PYTHON_KEYRING_BACKEND": "keyring.backends.null.Keyring"}
                           for label, bin_dir in self.musec_bins.items()}
        self.git_env = {**base, "HOME": str(self.home)}
        self.peer_env = {**base, "HOME": str(self.home), "MSWEA_CONFIGURED": "true", "MSWEA_SILENT_STARTUP": "1",
                         "MSWEA_GLOBAL_CONFIG_DIR": str(self.home / "mini"), "MSWEA_COST_TRACKING": "ignore_errors",
                         "LITELLM_LOCAL_MODEL_COST_MAP": "True", "AIDER_CHECK_UPDATE": "false",
                         "AIDER_ANALYTICS": "false", "TERM": "dumb"}

    def workspace(self) -> Path:
        ws = Path(tempfile.mkdtemp(prefix="ws", dir=self.root))
        (ws / "note.txt").write_text("turn 0\n")
        git = ["git", "-c", "user.name=bench", "-c", "user.email=bench@localhost"]
        subprocess.run([*git, "init", "-q"], cwd=ws, check=True, env=self.git_env)
        subprocess.run([*git, "add", "."], cwd=ws, check=True, env=self.git_env)
        subprocess.run([*git, "commit", "-qm", "start"], cwd=ws, check=True, env=self.git_env)
        return ws

    def start(self) -> None:
        """Start each musec install's daemon (its own MUSEC_HOME)."""
        for label, bin_dir in self.musec_bins.items():
            proc = subprocess.run([str(bin_dir / "musec"), "daemon", "start"], env=self.musec_envs[label],
                                  capture_output=True, text=True, timeout=120)
            if proc.returncode != 0:
                raise SystemExit(f"{label}: musec daemon start failed: {proc.stderr.strip()}")

    def stop(self) -> None:
        for label, bin_dir in self.musec_bins.items():
            subprocess.run([str(bin_dir / "musec"), "daemon", "stop"], env=self.musec_envs[label],
                           capture_output=True, timeout=120)

    def command(self, kind: str, name: str, turns: int, ws: Path) -> tuple[list[str], dict[str, str]]:
        """The argv and environment of one run."""
        task = f"Run `true` {turns} times, one call at a time, then stop."
        if kind in (*MUSECS, *BASELINES):
            label, _, off = kind.partition("-")
            return ([str(self.musec_bins[label] / "musec"), "run", "--model", f"openai-compat/{name}",
                     "--approval", "auto", "--sandbox", "off" if off else "auto", "--agents", "none",
                     "--max-turns", str(turns + 5), "--output-format", "json", task], self.musec_envs[label])
        if kind == "mini":
            return ([str(self.peers["mini"]), "-y", "--exit-immediately", "-m", f"openai/{name}", "-t", task,
                     "-o", str(ws.parent / f"{ws.name}.traj.json")], self.peer_env)
        if kind == "aider":
            python = self.peers["aider"].parent / "python"
            return [str(python), "-c", AIDER_DRIVER, str(turns), f"openai/{name}"], self.peer_env
        raise ValueError(kind)

    def run(self, kind: str, turns: int) -> list[float]:
        """One complete ``kind`` run of ``turns`` turns: the ``perf_counter`` time of each model call.

        Raises:
            SystemExit: the run failed or made other model calls than expected.
        """
        name = f"peerbench-{kind}-{turns}-{next(self.nonce)}"
        ws = self.workspace()
        argv, env = self.command(kind, name, turns, ws)
        proc = subprocess.run(argv, cwd=ws, env=env, capture_output=True, text=True, timeout=600,
                              stdin=subprocess.DEVNULL)
        times = self.model.seen.get(name, [])
        want = InstantModel.expected(kind, turns)
        if proc.returncode != 0 or len(times) != want:
            raise SystemExit(f"{kind} run of {turns} turns failed (exit {proc.returncode}, {len(times)} model calls, "
                             f"{want} expected):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
        shutil.rmtree(ws, ignore_errors=True)
        return times


def per_turn_ms(times: Sequence[float]) -> float:
    """The mean time from one model call to the next, in ms, the first gap left out (it
    holds one-time work: first imports, the sandbox probe)."""
    gaps = [b - a for a, b in itertools.pairwise(times)][1:]
    return statistics.fmean(gaps) * 1000


def measure(bench: Bench, kinds: Sequence[str], turns: int, rounds: int,
            say: Callable[[str], None] = print) -> dict[str, list[float]]:
    """Per-turn ms of each contestant in each round, the order rotating each round."""
    out: dict[str, list[float]] = {k: [] for k in kinds}
    for r in range(rounds):
        order = list(kinds[r % len(kinds):]) + list(kinds[: r % len(kinds)])
        for kind in order:
            out[kind].append(per_turn_ms(bench.run(kind, turns)))
        say(f"round {r + 1}/{rounds}: " + "  ".join(f"{k} {out[k][-1]:.1f} ms" for k in kinds))
        sys.stdout.flush()
    return out


def report(results: dict[str, list[float]], turns: int) -> None:
    """Each contestant's per-turn ms, then musec's paired ratios to each peer, to the
    baseline install and to itself without the sandbox."""
    rounds = len(next(iter(results.values())))
    print(f"-- ms a turn, model call to model call ({turns} turns a run, {rounds} rounds; median [min, max])")
    for kind, values in results.items():
        print(f"{kind:16s} {statistics.median(values):7.1f} ms  [{min(values):.1f}, {max(values):.1f}]")
    def ratios(candidate: str, baseline: str) -> None:
        if candidate in results and baseline in results:
            print_ratios(f"{candidate} / {baseline}, ms a turn", list(zip(results[baseline], results[candidate],
                                                                          strict=True)), " ms", ".1f")

    for mine in (*MUSECS, *BASELINES):
        for peer in PEERS:
            ratios(mine, peer)
    for mine, base in zip(MUSECS, BASELINES, strict=True):
        ratios(mine, base)
    ratios("musec", "musec-nosandbox")


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--turns", type=int, default=20, help="tool-call turns a run (default 20, at least 3)")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds (default 5)")
    parser.add_argument("--peers-bin", action="append", default=[], metavar="DIR",
                        help="a folder holding mini and/or aider (repeatable; also $MUSEC_PEERS_BIN)")
    parser.add_argument("--only", default=",".join((*MUSECS, *PEERS)),
                        help="contestants, comma-separated (default: all found)")
    parser.add_argument("--baseline-bin", type=Path, metavar="DIR",
                        help="another musec install's bin folder (say, main's venv) timed as the contestants "
                             "baseline and baseline-nosandbox, in the same rounds")
    args = parser.parse_args(argv)
    if args.turns < 3:
        parser.error("--turns must be at least 3 (the first gap between model calls is not counted)")
    args.only = [k.strip() for k in args.only.split(",") if k.strip()]
    unknown = [k for k in args.only if k not in (*MUSECS, *PEERS)]
    if unknown:
        parser.error(f"unknown contestant {', '.join(unknown)}; choose from {', '.join((*MUSECS, *PEERS))}")
    if args.baseline_bin is not None:
        if not (args.baseline_bin / "musec").is_file():
            parser.error(f"--baseline-bin {args.baseline_bin}: no musec there; give the bin folder of a venv "
                         "that has musec installed")
        args.only += [base for mine, base in zip(MUSECS, BASELINES, strict=True) if mine in args.only]
    return args


def contestants(args: argparse.Namespace, environ: dict[str, str] | os._Environ = os.environ,
                say: Callable[[str], None] = print) -> tuple[list[str], dict[str, Path]]:
    """The contestants to time and the peers' executables; one line for each peer skipped."""
    dirs = [*args.peers_bin, *[d for d in environ.get("MUSEC_PEERS_BIN", "").split(os.pathsep) if d]]
    peers = find_peers(dirs, environ.get("PATH", ""))
    kinds = []
    for kind in args.only:
        if kind in PEERS and kind not in peers:
            say(PEERS[kind][1])
            continue
        kinds.append(kind)
    return kinds, peers


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    kinds, peers = contestants(args)
    if not kinds:
        print("nothing to time")
        return
    for kind in kinds:
        if kind in peers:
            print(f"{kind}: {peers[kind]}")
    root = Path(tempfile.mkdtemp(prefix="peerbench", dir="/tmp"))
    model = InstantModel()
    try:
        with OpenAIServer(respond=model, keep_bodies=False) as server:
            bench = Bench(server, model, root, peers, args.baseline_bin)
            bench.start()
            try:
                for kind in kinds:  # warm-up: disk caches, the daemon's first imports
                    bench.run(kind, 3)
                report(measure(bench, kinds, args.turns, args.rounds), args.turns)
            finally:
                bench.stop()
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
