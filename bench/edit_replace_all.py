"""edit_file's replace_all against a bare ``bytes.replace`` of the same file, interleaved.

    python bench/edit_replace_all.py [--rounds 5]

For a 1 MB file with 13,107 matches and a 7 MB file with 91,750, runs the real
``edit_file`` tool (read, decode, replace, line numbers, diff, atomic write) and, in
the same rounds, the baseline: read the file, ``bytes.replace``, write it back. Prints
the median seconds of each and their ratio (issue 13, case 11: the tool was quadratic).
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

import anyio
from musec.agents.tools import EditFileTool, SandboxPolicy, ToolContext


def lines(count: int) -> bytes:
    return b"".join(b"%06d " % i + b"a" * 65 + b" target\n" for i in range(count))


async def one_round(ctx: ToolContext, data: bytes, path: Path) -> tuple[float, float]:
    path.write_bytes(data)
    t0 = time.perf_counter()
    result = await EditFileTool().run(
        {"path": path.name, "old_string": "target", "new_string": "T", "replace_all": True}, ctx
    )
    tool_s = time.perf_counter() - t0
    assert not result.is_error, result.content
    path.write_bytes(data)
    t0 = time.perf_counter()
    path.write_bytes(path.read_bytes().replace(b"target", b"T"))
    return tool_s, time.perf_counter() - t0


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        ws = Path(tmp).resolve()
        ctx = ToolContext(workspace=ws, env={"PATH": os.environ["PATH"]}, sandbox=SandboxPolicy())
        for count in (13_107, 91_750):
            data = lines(count)
            runs = [await one_round(ctx, data, ws / "f.txt") for _ in range(args.rounds)]
            tool = statistics.median(r[0] for r in runs)
            base = statistics.median(r[1] for r in runs)
            print(
                f"{len(data) / 1e6:4.1f} MB, {count:6d} matches: edit_file {tool:7.3f} s, "
                f"bytes.replace {base:7.4f} s, ratio {tool / base:6.1f}x"
            )


if __name__ == "__main__":
    anyio.run(main)
