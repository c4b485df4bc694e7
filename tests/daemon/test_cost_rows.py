"""``musec cost``'s rows (issue 18: the scripted session's compaction was a second row for
``main``, under the model's configured name, beside the row of the name the provider
reports): one row per agent and model that served calls, a compaction charged to the
model that made it."""

from __future__ import annotations

from musec.agents.core import events as evt
from musec.daemon.projections import CostsView


def _rows(*events: evt.AnyEvent) -> dict[tuple[str, str], tuple[int, float]]:
    view = CostsView()
    for e in events:
        view.apply(e)
    return {key: (row["calls"], round(row["usd"], 6)) for key, row in view.by_model().items()}


def _call(agent: str, provider: str, asked: str, served: str, usd: float) -> list[evt.AnyEvent]:
    return [evt.ModelRequest(agent=agent, provider=provider, model=asked),
            evt.ModelResponse(agent=agent, provider=provider, model=served, content=[], stop_reason="end_turn",
                              cost_usd=usd, usage={"input_tokens": 10})]


def _compaction(agent: str, provider: str, model: str, usd: float) -> evt.CompactionFinished:
    return evt.CompactionFinished(agent=agent, provider=provider, model=model, cost_usd=usd, usage={"input_tokens": 7})


def test_the_agents_own_model_summarising_is_one_row_with_its_calls() -> None:
    assert _rows(*_call("main", "scripted", "/s/inter.json", "scripted", 0.0),
                 _compaction("main", "scripted", "/s/inter.json", 0.0),
                 *_call("main", "scripted", "/s/inter.json", "scripted", 0.0)) == {("main", "scripted"): (3, 0.0)}
    # a provider that reports a dated snapshot: the compaction joins the snapshot's row
    assert _rows(*_call("main", "anthropic", "claude-sonnet-4-6", "claude-sonnet-4-6-20250929", 0.5),
                 _compaction("main", "anthropic", "claude-sonnet-4-6", 0.25)) == {
        ("main", "claude-sonnet-4-6-20250929"): (2, 0.75)}


def test_a_compaction_before_the_first_response_is_still_charged_to_its_model() -> None:
    assert _rows(_compaction("main", "anthropic", "claude-sonnet-4-6", 0.25),
                 *_call("main", "anthropic", "claude-sonnet-4-6", "claude-sonnet-4-6-20250929", 0.5)) == {
        ("main", "claude-sonnet-4-6-20250929"): (2, 0.75)}


def test_a_separate_compaction_model_has_its_own_row() -> None:
    assert _rows(*_call("main", "anthropic", "claude-sonnet-4-6", "claude-sonnet-4-6-20250929", 0.5),
                 _compaction("main", "anthropic", "claude-haiku-4-5", 0.01),
                 *_call("reviewer", "anthropic", "claude-haiku-4-5", "claude-haiku-4-5-20251001", 0.02)) == {
        ("main", "claude-sonnet-4-6-20250929"): (1, 0.5),
        ("main", "claude-haiku-4-5-20251001"): (1, 0.01),  # named as the provider reports that model
        ("reviewer", "claude-haiku-4-5-20251001"): (1, 0.02)}
