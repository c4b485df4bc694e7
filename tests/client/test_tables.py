"""Tables the client prints (issue 18: ``/agents``' reviewer state broke the columns): every
cell stays inside its column, cut or wrapped at its width, so the next column starts at
one place on every line."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from musec.client.output import Column, cut, table
from musec.client.views import agents_table, cost_table, workers_table
from musec.daemon import protocol as p


def test_the_reviewer_state_wraps_inside_its_column() -> None:
    agents = [
        p.AgentInfo(agent="main", role="main", state="idle", input_tokens=1200, output_tokens=30),
        p.AgentInfo(agent="reviewer", role="reviewer", state="reviewed 0 edits, 0 findings in a sentence this long"),
        p.AgentInfo(agent="verifier", role="verifier", state="watching", cost_usd=0.25,
                    context_tokens=41200, context_window_tokens=200000, context_percent=20.6),
    ]
    lines = agents_table(agents, indent="  ")
    header = lines[0]
    assert header.split() == ["agent", "role", "state", "active", "tokens", "cost", "context"]
    cost_end = header.index("cost") + len("cost")
    rows = [ln for ln in lines[1:] if ln[2:3].strip()]  # a row's first line (a wrapped one starts with spaces)
    assert [r.split()[0] for r in rows] == ["main", "reviewer", "verifier"]
    for row in rows:  # the right-aligned cost ends under its header on every row
        assert row[cost_end - 1] != " " and (len(row) == cost_end or row[cost_end] == " "), lines
        assert row.index("$") < cost_end
    state_at, active_at = header.index("state"), header.index("active")
    first = lines.index(rows[1])
    reviewer = lines[first:lines.index(rows[2])]
    assert len(reviewer) > 1 and all(not ln[:state_at].strip() for ln in reviewer[1:]), lines
    said = " ".join(ln[state_at:active_at].strip() for ln in reviewer)
    assert said == "reviewed 0 edits, 0 findings in a sentence this long"
    assert "41.2k (21% of 200k)" in rows[2]


def test_a_long_model_is_cut_and_the_numbers_stay_in_line() -> None:
    rows = [p.CostRow(agent="main", model="scripted:/a/very/long/path/to/a/script/that/goes/on/and/on.json", calls=1,
                      input_tokens=10, output_tokens=2, cost_usd=0.0),
            p.CostRow(agent="reviewer", model="scripted", calls=12, input_tokens=123456, output_tokens=0, cost_usd=1.5)]
    lines = cost_table(rows)
    assert "…" in lines[1] and len({len(ln) for ln in lines}) == 1, lines  # every line ends with the cost column
    workers = [p.WorkerInfo(name="docs", branch="musec/s/docs", state="finished", commits=1, path="/w")]
    assert "1 commit " in workers_table(workers)[1]


@given(st.lists(st.lists(st.text(alphabet="ab c", max_size=40), min_size=3, max_size=3), min_size=1, max_size=6))
def test_each_column_starts_at_one_place(rows: list[list[str]]) -> None:
    columns = [Column("one", width=8, wrap=True), Column("two", width=6), Column("three")]
    lines = table(rows, columns)
    second = lines[0].index("two")
    third = lines[0].index("three")
    for line in lines:
        assert line[second - 2:second] in ("  ", " ", "") or len(line) <= second - 2
        assert len(line[:second].rstrip()) <= second - 2  # the first column never runs into the second
        if len(line) > third:
            assert len(line[:third].rstrip()) <= third - 2


@given(st.lists(st.lists(st.text(alphabet="ab c\t\u00e9", max_size=30), min_size=4, max_size=4), max_size=8),
       st.lists(st.tuples(st.sampled_from("<>"), st.integers(0, 12), st.sampled_from(["", "h"])), min_size=4, max_size=4),
       st.sampled_from(["", "  "]))
def test_rows_of_one_line_read_as_aligned_columns(rows: list[list[str]], specs: list[tuple[str, int, str]],
                                                  indent: str) -> None:
    """``table``'s fast path (no column wraps) against the layout written out: each cell
    cut to its width, padded to it (the last only when right-aligned), two spaces apart."""
    columns = [Column(header, width=width, align=align) for align, width, header in specs]
    cells = ([[c.header for c in columns]] if any(c.header for c in columns) else []) + [
        [" ".join(cell.split()) for cell in row] for row in rows]
    widths = [min(max((len(r[i]) for r in cells), default=0), c.width) if c.width else
              max((len(r[i]) for r in cells), default=0) for i, c in enumerate(columns)]
    expected = []
    for row in cells:
        shown = [cut(cell, w) if w else cell for cell, w in zip(row, widths)]
        padded = [f"{cell:{c.align}{w}}" if i < 3 or c.align == ">" else cell
                  for i, (cell, c, w) in enumerate(zip(shown, columns, widths))]
        expected.append((indent + "  ".join(padded)).rstrip())
    assert table(rows, columns, indent=indent) == expected
