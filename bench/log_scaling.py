"""How log, verify, replay and resume scale with a session's length (1k, 10k, 100k events).

    python bench/log_scaling.py [--sizes 1000,10000,100000] [--rounds 3] [--old-max 10000]

Each size gets one synthetic session written by the real ``EventLog`` (turns of a user
message, a model request whose digest is the one the live agent would have logged, a
model response with a tool call, and the call's start and finish). Measured, in process,
with the daemon's own functions, each against a baseline in the same round (A B, B A...):

- log: ``read_lines`` (what ``musec log`` is sent) vs reading the file's bytes;
- verify: ``eventlog.verify`` vs one SHA-256 over the file's bytes (the hashing floor);
- replay: ``resume.replay`` (incremental digests) vs the same replay with the full
  ``request_digest`` per request (the old, quadratic way; only up to ``--old-max``
  events, it took over 750 s at 100k);
- resume: ``EventLog.open`` (lock, torn tail, chain) plus the fold into a ``History`` vs
  decoding every line (``iter_events``), the floor of any fold.

Printed: per size, the median seconds of each side and the per-round ratios.
"""

from __future__ import annotations

import argparse
import hashlib
import tempfile
import time
from pathlib import Path
from typing import Any

from _pairs import paired, print_ratios
from musec.agents.core import events as ev
from musec.agents.core.conversation import TextBlock, ToolCallBlock, request_digest
from musec.agents.history import History
from musec.agents.loop import Agent
from musec.agents.tools.base import ToolContext
from musec.daemon import resume
from musec.daemon.eventlog import EventLog, iter_events, read_lines, verify
from musec.daemon.index import SessionIndex


def write_session(directory: Path, sid: str, events: int) -> Path:
    """A session of about ``events`` events whose every logged digest is the live one."""
    path = directory / f"{sid}.jsonl"
    log = EventLog.create(path)
    ws = directory / "ws"
    ws.mkdir(exist_ok=True)
    started = ev.SessionStarted(workspace=str(ws), model="scripted", tools=["bash", "read_file"], system_prompt="be brief")
    log.append(started)
    agent = Agent(agent_id="main", provider=resume._ReplayModel("scripted", "scripted"),
                  tools=resume._tools_for(started.tools, started, worker=False), ctx=ToolContext(workspace=ws, env={}),
                  record=resume._no_record, ask=resume._no_ask, on_delta=resume._no_delta, approval_mode="auto",
                  max_turns=1, system_prompt="be brief", store_blob=resume._no_blob, session_id=sid)
    digest = resume.PrefixDigest()

    def add(event: ev.AnyEvent) -> None:
        agent.history.apply(ev.decode_event(log.append(event)[1]))  # as replay reads it back

    n = 0
    while log.next_seq < events:
        if n % 20 == 0:
            add(ev.UserMessage(text=f"task {n}: go on"))
        log.append(ev.ModelRequest(provider="scripted", model="scripted", digest=digest.digest(agent),
                                   messages=len(agent.history.messages)))
        call = [TextBlock(f"step {n}"), ToolCallBlock(f"call{n}", "bash", {"command": f"echo {n}"})]
        add(ev.ModelResponse(content=call, usage={"input_tokens": 10, "output_tokens": 5}, cost_usd=0.0))
        add(ev.ToolStarted(call_id=f"call{n}", tool="bash", input={"command": f"echo {n}"}))
        add(ev.ToolFinished(call_id=f"call{n}", tool="bash", content=f"{n}\n" * 20, exit_status=0))
        n += 1
    log.close()
    return path


class _FullDigest:
    """The old way: the whole request encoded and hashed per request."""

    def digest(self, agent: Any) -> str:
        return request_digest(agent.build_request())


def timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def replay_with(index: SessionIndex, sid: str, digest_cls: type) -> None:
    kept = resume.PrefixDigest
    resume.PrefixDigest = digest_cls  # type: ignore[misc]
    try:
        result = resume.replay(index, sid, 1)
    finally:
        resume.PrefixDigest = kept  # type: ignore[misc]
    assert result.ok, result.problems[:3]


def resume_fold(path: Path) -> None:
    log, _ = EventLog.open(path)
    try:
        history = History("main")
        resume.fold_for_resume(iter_events(path), [history.apply])
    finally:
        log.close()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--old-max", type=int, default=10_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as d:
        directory = Path(d)
        index = SessionIndex(directory, {})
        for size in (int(s) for s in args.sizes.split(",")):
            sid = f"s{size}"
            t_write = timed(lambda: write_session(directory, sid, size))  # noqa: B023
            path = index.log_path(sid)
            print(f"-- {size} events, {path.stat().st_size / 2**20:.1f} MiB (written in {t_write:.1f} s), "
                  f"{args.rounds} rounds, seconds")
            pairs = paired(args.rounds, lambda: timed(path.read_bytes), lambda: timed(lambda: read_lines(path)))  # noqa: B023
            print_ratios("log: read_lines vs read_bytes", pairs, fmt=".4f")
            pairs = paired(args.rounds, lambda: timed(lambda: hashlib.sha256(path.read_bytes())),  # noqa: B023
                           lambda: timed(lambda: verify(path)))  # noqa: B023
            print_ratios("verify vs one sha256 of the file", pairs, fmt=".4f")
            new = lambda: timed(lambda: replay_with(index, sid, resume.PrefixDigest))  # noqa: B023, E731
            if size <= args.old_max:
                old = lambda: timed(lambda: replay_with(index, sid, _FullDigest))  # noqa: B023, E731
                print_ratios("replay: incremental vs full digests", paired(args.rounds, old, new), fmt=".3f")
            else:
                print(f"replay: incremental {new():.3f} s (full digests skipped above {args.old_max} events)")
            pairs = paired(args.rounds, lambda: timed(lambda: sum(1 for _ in iter_events(path))),  # noqa: B023
                           lambda: timed(lambda: resume_fold(path)))  # noqa: B023
            print_ratios("resume: open + fold vs decoding every line", pairs, fmt=".3f")


if __name__ == "__main__":
    main()
