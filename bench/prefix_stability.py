"""Prompt-prefix stability over a 30-turn session, Anthropic Messages and OpenAI Responses.

    python bench/prefix_stability.py [--turns 30] [--output-bytes 2000]

Runs the real providers against the local test servers (``tests/support``): each turn
the model calls ``bash``, the result (``--output-bytes`` of text) is appended to the
history as the agent loop does, and the next request is sent. From the requests the
server received it reports, per turn from the third on:

* kept: the share of the previous request's bytes that this request repeats as its
  prefix (100 % means nothing earlier in the prompt changed: the cache-stability figure);
* prefix share: the bytes of the request's content (tools, system, then each message's
  blocks, or the Responses ``instructions``, ``tools`` and ``input`` items, each
  serialised, Anthropic's ``cache_control`` markers left out since they are not part of
  the cached content) that repeat the previous request's leading blocks, over its bytes;
* cached share: the share of the prompt a provider's prefix cache would serve.
  Anthropic: the longest prefix ending at a block boundary within 20 blocks before one
  of this request's ``cache_control`` breakpoints that an earlier request wrote at one of
  its breakpoints (https://docs.claude.com/en/docs/build-with-claude/prompt-caching).
  OpenAI: the prefix shared with any earlier request, rounded down to 128 tokens, for
  prompts of at least 1024 tokens (https://platform.openai.com/docs/guides/prompt-caching);
  4 bytes a token.

Target (issue 3): at least 95 % after the second turn.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import statistics
import sys
from pathlib import Path
from typing import Any

import anyio
import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from musec.agents.core.conversation import (  # noqa: E402
    Message,
    ModelRequest,
    TextBlock,
    ToolResultBlock,
    ToolSpec,
)
from musec.agents.providers import make_provider  # noqa: E402

from tests.support.anthropic_server import AnthropicServer, message  # noqa: E402
from tests.support.openai_server import OpenAIServer, responses_stream  # noqa: E402

TOOLS = [
    ToolSpec("bash", "Run a shell command in the workspace.", {"type": "object", "properties": {
        "command": {"type": "string"}, "timeout_s": {"type": "number"}}, "required": ["command"]}),
    ToolSpec("read_file", "Read a file with numbered lines.", {"type": "object", "properties": {
        "path": {"type": "string"}, "offset": {"type": "integer"}, "limit": {"type": "integer"}},
        "required": ["path"]}),
]
SYSTEM = "You are musec, a coding agent. " * 40


def _dump(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":")).encode()


def _strip_cache(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _strip_cache(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [_strip_cache(v) for v in value]
    return value


def anthropic_blocks(body: dict) -> list[tuple[bytes, bool]]:
    """(serialised block, is a breakpoint) in cache order: tools, system, messages."""
    out = [(_dump(_strip_cache(t)), "cache_control" in t) for t in body.get("tools", [])]
    out += [(_dump(_strip_cache(s)), "cache_control" in s) for s in body.get("system", [])]
    for m in body["messages"]:
        for b in m["content"]:
            out.append((_dump({"role": m["role"], **_strip_cache(b)}), "cache_control" in b))
    return out


def responses_blocks(body: dict) -> list[tuple[bytes, bool]]:
    out = [(_dump(body.get("instructions", "")), False)]
    out += [(_dump(t), False) for t in body.get("tools", [])]
    return out + [(_dump(item), False) for item in body["input"]]


def _prefix_hashes(blocks: list[tuple[bytes, bool]]) -> list[tuple[bytes, int]]:
    """(hash, bytes) of every prefix ending at a block boundary (index i = first i blocks)."""
    h, size, out = hashlib.sha256(), 0, [(hashlib.sha256().digest(), 0)]
    for data, _ in blocks:
        h.update(hashlib.sha256(data).digest())
        size += len(data)
        out.append((h.copy().digest(), size))
    return out


def measure(bodies: list[dict], kind: str) -> list[tuple[float, float, float]]:
    """(kept, prefix share, cached share) of each request after the first."""
    to_blocks = anthropic_blocks if kind == "anthropic" else responses_blocks
    written: set[bytes] = set()
    seen: set[bytes] = set()
    previous: list[tuple[bytes, bool]] | None = None
    previous_total = 0
    results = []
    for body in bodies:
        blocks = to_blocks(body)
        prefixes = _prefix_hashes(blocks)
        total = prefixes[-1][1]
        if previous is not None:
            common = 0
            while common < min(len(blocks), len(previous)) and blocks[common][0] == previous[common][0]:
                common += 1
            prefix_share = prefixes[common][1] / total
            if kind == "anthropic":
                cached = 0
                for i, (_, breakpoint) in enumerate(blocks, start=1):
                    if breakpoint:
                        for j in range(i, max(i - 20, 0) - 1, -1):
                            if prefixes[j][0] in written:
                                cached = max(cached, prefixes[j][1])
                                break
            else:
                hit = max((size for digest, size in prefixes if digest in seen), default=0)
                tokens = total / 4
                cached = (int(hit / 4) // 128) * 128 * 4 if tokens >= 1024 else 0
            results.append((prefixes[common][1] / previous_total, prefix_share, cached / total))
        if kind == "anthropic":
            written |= {prefixes[i][0] for i, (_, bp) in enumerate(blocks, start=1) if bp}
        seen |= {digest for digest, _ in prefixes}
        previous, previous_total = blocks, total
    return results


async def session(kind: str, turns: int, output_bytes: int) -> list[dict]:
    """Run ``turns`` model calls through the real provider; return the bodies sent."""
    server = AnthropicServer() if kind == "anthropic" else OpenAIServer()
    with server:
        for n in range(turns):
            call_id = f"call_{n:03d}"
            if kind == "anthropic":
                server.enqueue(message([{"type": "text", "text": f"Step {n}."},
                                        {"type": "tool_use", "id": call_id, "name": "bash",
                                         "input": {"command": f"pytest -k case{n}"}}]))
            else:
                server.enqueue(responses_stream([{"type": "function_call", "call_id": call_id, "name": "bash",
                                                  "arguments": json.dumps({"command": f"pytest -k case{n}"})}]))
        credentials = {"ANTHROPIC_API_KEY": "bench", "ANTHROPIC_BASE_URL": server.base_url,
                       "OPENAI_API_KEY": "bench", "OPENAI_BASE_URL": server.base_url}
        async with httpx.AsyncClient() as client:
            model = "anthropic/claude-sonnet-4-6" if kind == "anthropic" else "openai/gpt-5"
            provider = make_provider(model, credentials, http_client=client)
            messages = [Message("user", [TextBlock("Make the tests pass.")])]

            async def ignore(_: object) -> None:
                pass

            for n in range(turns):
                request = ModelRequest(model=provider.model, system=SYSTEM, messages=list(messages),
                                       tools=TOOLS, session_id="bench-session")
                response = await provider.complete(request, ignore)
                messages.append(Message("assistant", response.content))
                output = (f"case{n} " + "x" * 70 + "\n") * (output_bytes // 78 + 1)
                results = [ToolResultBlock(c.id, output[:output_bytes]) for c in response.tool_calls]
                messages.append(Message("user", results))
        return [r.body for r in server.requests]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=30)
    parser.add_argument("--output-bytes", type=int, default=2000)
    args = parser.parse_args()
    print(f"{args.turns}-turn session, {args.output_bytes}-byte tool results")
    for kind in ("anthropic", "openai"):
        bodies = anyio.run(session, kind, args.turns, args.output_bytes)
        shares = measure(bodies, kind)
        after = shares[1:]  # requests 3.. (turn 2 is the first with a previous request)
        kept, prefix, cached = ([row[i] for row in after] for i in range(3))
        print(f"{kind:10s} kept  min {min(kept):6.1%}   prefix share  min {min(prefix):6.1%}"
              f" median {statistics.median(prefix):6.1%}   cached share  min {min(cached):6.1%}"
              f" median {statistics.median(cached):6.1%}   (requests 3..{len(bodies)}; target >= 95%)")
        print(f"{'':10s} cached share per request: " + " ".join(f"{c:.0%}" for *_, c in shares))


if __name__ == "__main__":
    main()
