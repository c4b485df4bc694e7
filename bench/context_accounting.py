"""What the context accounting (agents/context.py) costs the loop per request.

    python bench/context_accounting.py [--calls 1000] [--result-bytes 8192] [--pairs 5]

A history grows by one tool call and its result (``--result-bytes`` of text) per request,
as in issue 12's 1,000-call session. Per request the loop already builds the request and
hashes it (``request_digest``, for the log and replay); the accounting adds
``ContextMeter.measure`` (its size in characters, counted incrementally, and the estimate).
Baseline: build + digest; candidate: build + digest + measure; paired runs, a ratio per
pair (bench/_pairs.py). A third line shows what counting the whole request again each
time would cost instead of the incremental count.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _pairs import paired, print_ratios  # noqa: E402
from musec.agents.context import ContextMeter, request_chars  # noqa: E402
from musec.agents.core.conversation import (  # noqa: E402
    Message,
    ModelRequest,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
    ToolSpec,
    Usage,
    request_digest,
)

TOOLS = [ToolSpec(f"tool_{i}", "A tool of the bench. " * 10, {"type": "object", "properties": {"path": {"type": "string"}}})
         for i in range(9)]
SYSTEM = "You are a coding agent. " * 200


def session(calls: int, result_bytes: int, *, measure: bool, full: bool = False) -> float:
    """Seconds of per-request work over a session of ``calls`` requests."""
    messages = [Message("user", [TextBlock("fix the failing test")])]
    meter = ContextMeter(200_000)
    spent = 0.0
    for i in range(calls):
        messages.append(Message("assistant", [ToolCallBlock(f"toolu_{i:04}", "tool_0", {"path": f"src/f{i}.py"})]))
        messages.append(Message("user", [ToolResultBlock(f"toolu_{i:04}", "x" * result_bytes)]))
        started = time.perf_counter()
        request = ModelRequest("claude", SYSTEM, list(messages), TOOLS)
        request_digest(request)
        if measure:
            _, chars = meter.measure(SYSTEM, TOOLS, messages)
        elif full:
            chars = request_chars(request)
        spent += time.perf_counter() - started
        if measure:
            meter.on_request("anthropic", chars)
            meter.on_response(Usage(input_tokens=chars // 3), 0)
    return spent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--result-bytes", type=int, default=8192)
    parser.add_argument("--pairs", type=int, default=5)
    args = parser.parse_args()
    pairs = paired(args.pairs, lambda: session(args.calls, args.result_bytes, measure=False),
                   lambda: session(args.calls, args.result_bytes, measure=True))
    print(f"{args.calls} requests, {args.result_bytes}-byte results, {args.pairs} pairs")
    print_ratios("ms per request: build+digest vs +accounting", [(a * 1e3 / args.calls, b * 1e3 / args.calls) for a, b in pairs],
                 unit=" ms", fmt=".3f")
    full = paired(args.pairs, lambda: session(args.calls, args.result_bytes, measure=True),
                  lambda: session(args.calls, args.result_bytes, measure=False, full=True))
    print_ratios("ms per request: incremental count vs a full recount (each with build+digest)",
                 [(a * 1e3 / args.calls, b * 1e3 / args.calls) for a, b in full], unit=" ms", fmt=".3f")


if __name__ == "__main__":
    main()
