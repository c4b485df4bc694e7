"""Streaming a long answer into the interactive client's renderer, against printing the
same text plainly, interleaved.

    python bench/stream_render.py [--sizes 100000,400000,2400000] [--shapes paragraphs,list,code,line]
                                  [--piece 40] [--pairs 3]

For each shape of answer (many short markdown blocks with code; one long list; one long
code block; one long line) and size, feeds the text in ``--piece``-character deltas to
``render.Renderer`` with rich on a terminal (the interactive client: markdown, the live
area, the spinner) and, in the same pairs, to the renderer writing the deltas plainly (what
a headless run to a terminal does). Prints the median milliseconds of each and the ratio
per pair. The candidate's cost must grow like the baseline's (linear): a ratio that grows
with the size is the quadratic streaming of fresh-user s8 H5 (a 2.4 MB answer took tens of
seconds; rich renders markdown at about 30 KB a second, so a message is rendered only up to
``streaming.PLAIN_AFTER_CHARS`` and goes on plain).
"""

from __future__ import annotations

import argparse
import io
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _pairs import paired, print_ratios  # noqa: E402
from musec.client.render import Renderer  # noqa: E402

UNITS = {
    "paragraphs": ("Some *text* with `code` and more words here to fill the line nicely.\n\n"
                   "```python\ndef f(x):\n    return x + 1\n```\n\n- item one\n- item two\n\n"),
    "list": "- an item of a long list with some words in it\n",
    "code": "    x = compute(value, other) + 1  # a comment\n",
    "line": "word ",
}


class Terminal(io.StringIO):
    """What the renderer writes to: a terminal to it (so rich and its live area run)."""

    def isatty(self) -> bool:
        return True


def answer(shape: str, size: int) -> str:
    unit = UNITS[shape]
    body = unit * max(1, size // len(unit))
    return f"```python\n{body}```\n" if shape == "code" else body


def stream(text: str, piece: int, *, rich: bool) -> float:
    """Seconds to stream ``text`` in ``piece``-character deltas and end the message."""
    out = Terminal()
    renderer = Renderer(out=out, color=True, rich=rich)
    t0 = time.perf_counter()
    renderer.start_wait()
    for i in range(0, len(text), piece):
        renderer.delta(text[i:i + piece])
    renderer.event({"type": "model_response", "agent": "main", "content": [{"type": "text", "text": text}]})
    renderer.stop_wait(turn_over=True)
    elapsed = time.perf_counter() - t0
    assert len(out.getvalue()) >= len(text.strip()) // 2, "the answer was not written"
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="100000,400000,2400000", help="characters of the answer, comma-separated")
    parser.add_argument("--shapes", default=",".join(UNITS))
    parser.add_argument("--piece", type=int, default=40, help="characters per streamed delta")
    parser.add_argument("--pairs", type=int, default=3)
    args = parser.parse_args()
    print(f"pieces of {args.piece} characters; baseline: the deltas written plainly; candidate: the interactive "
          "client's rendering")
    for shape in args.shapes.split(","):
        for size in (int(s) for s in args.sizes.split(",")):
            text = answer(shape, size)
            pairs = paired(args.pairs, baseline=lambda t=text: stream(t, args.piece, rich=False),
                           candidate=lambda t=text: stream(t, args.piece, rich=True))
            print_ratios(f"{shape} {len(text):,} chars, ms", [(a * 1000, b * 1000) for a, b in pairs], fmt=".1f")


if __name__ == "__main__":
    main()
