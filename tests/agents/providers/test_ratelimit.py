"""The daemon-wide rate limiter: one budget per credential, shared by every provider on it.

Real local servers send the rate-limit headers; several providers (as several agents or
sessions would hold) call them concurrently. Waits are the limiter's own, measured on
anyio's clock; the servers' arrival times are ``time.monotonic``.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import anyio
import httpx
import pytest
from musec.agents.core.conversation import Message, ModelRequest, TextBlock
from musec.agents.providers import RateLimitRegistry, RateLimitWait, RetryPolicy, make_provider
from musec.agents.providers.catalog import load_catalog
from musec.agents.providers.ratelimit import (
    credential_id,
    parse_duration_s,
    rate_limit_headers,
)

from tests.support.anthropic_server import AnthropicServer, error_response, message
from tests.support.openai_server import OpenAIServer, chat_stream, openai_error, responses_stream

pytestmark = pytest.mark.anyio

KEY = "sk-ant-" + "ratelimit-test-0123456789-SECRET"
OTHER_KEY = "sk-ant-" + "ratelimit-test-other-9876-SECRET"


def _request(text: str = "hello") -> ModelRequest:
    return ModelRequest(model="", system="s", messages=[Message("user", [TextBlock(text)])], tools=[])


async def _ignore(_: object) -> None:
    pass


class Waits:
    """An ``on_rate_limited`` that keeps what it was told, with anyio's clock."""

    def __init__(self) -> None:
        self.items: list[tuple[float, RateLimitWait]] = []

    def __call__(self, wait: RateLimitWait) -> None:
        self.items.append((anyio.current_time(), wait))

    @property
    def reasons(self) -> set[str]:
        return {w.reason for _, w in self.items}


def _anthropic(server: AnthropicServer, registry: RateLimitRegistry, client: httpx.AsyncClient,
               waits: Waits, key: str = KEY, **kwargs: object):
    return make_provider(
        "anthropic/claude-test", {"ANTHROPIC_API_KEY": key, "ANTHROPIC_BASE_URL": server.base_url},
        http_client=client, limiter=registry, on_rate_limited=waits, **kwargs,
    )


def _rfc3339_in(seconds: float) -> str:
    return (datetime.now(UTC) + timedelta(seconds=seconds)).isoformat().replace("+00:00", "Z")


# --- headers and keys ---------------------------------------------------------------------


def test_openai_durations() -> None:
    assert parse_duration_s("1s") == 1.0
    assert parse_duration_s("6m0s") == 360.0
    assert parse_duration_s("20ms") == pytest.approx(0.02)
    assert parse_duration_s("1h2m3.5s") == pytest.approx(3723.5)
    assert parse_duration_s("0.25") == 0.25
    assert parse_duration_s("soon") is None and parse_duration_s("5sx") is None


def test_headers_of_both_families() -> None:
    now = 1_760_000_000.0
    reset = datetime.fromtimestamp(now + 30, UTC).isoformat().replace("+00:00", "Z")
    found = rate_limit_headers(
        {
            "anthropic-ratelimit-requests-limit": "50",
            "anthropic-ratelimit-requests-remaining": "49",
            "anthropic-ratelimit-requests-reset": reset,
            "anthropic-ratelimit-input-tokens-remaining": "29000",
            "x-ratelimit-remaining-tokens": "1000",
            "x-ratelimit-reset-tokens": "6m0s",
            "anthropic-ratelimit-output-tokens-reset": "not a time",
        },
        now_s=now,
    )
    assert found["requests"] == (50.0, 49.0, pytest.approx(30.0))
    assert found["input_tokens"] == (None, 29000.0, None)
    assert found["tokens"] == (None, 1000.0, 360.0)
    assert "output_tokens" not in found


def test_limiters_are_keyed_by_a_digest_never_the_key() -> None:
    registry = RateLimitRegistry()
    a = registry.limiter_for("anthropic", "https://api.anthropic.com", KEY)
    assert registry.limiter_for("anthropic", "https://api.anthropic.com/", KEY) is a
    assert registry.limiter_for("anthropic", "https://api.anthropic.com", OTHER_KEY) is not a
    assert registry.limiter_for("openai", "https://api.anthropic.com", KEY) is not a
    assert len(registry) == 3
    assert KEY not in a.credential and KEY not in repr(a) and "SECRET" not in repr(vars(registry))
    assert a.credential == credential_id("anthropic", "https://api.anthropic.com/v1", KEY)
    assert a.credential.startswith("anthropic:api.anthropic.com:")


# --- shared budgets, through real servers -------------------------------------------------


async def test_concurrent_calls_share_the_request_budget_from_headers(http_client: httpx.AsyncClient) -> None:
    """The server allows one request per 0.3 s; four providers on one key take turns."""
    registry, waits = RateLimitRegistry(), Waits()
    with AnthropicServer() as server:
        server.headers_for = lambda number: {  # type: ignore[method-assign]
            "anthropic-ratelimit-requests-limit": "1",
            "anthropic-ratelimit-requests-remaining": "0",
            "anthropic-ratelimit-requests-reset": _rfc3339_in(0.3),
        }
        server.enqueue(*[message([{"type": "text", "text": f"answer {n}"}]) for n in range(5)])
        providers = [_anthropic(server, registry, http_client, waits) for _ in range(4)]
        other = _anthropic(server, registry, http_client, Waits(), key=OTHER_KEY)
        await providers[0].complete(_request(), _ignore)  # the limiter learns the budget
        assert waits.items == []
        finished: dict[str, float] = {}
        start = anyio.current_time()

        async def call(name: str, provider: object) -> None:
            await provider.complete(_request(name), _ignore)  # type: ignore[attr-defined]
            finished[name] = anyio.current_time() - start

        async with anyio.create_task_group() as tg:
            for n, provider in enumerate(providers[1:]):
                tg.start_soon(call, f"agent{n}", provider)
            tg.start_soon(call, "other-key", other)
        arrivals = list(server.received_at)
    assert len(registry) == 2
    assert finished["other-key"] < 0.25  # another credential's budget is its own
    same_key = sorted(v for k, v in finished.items() if k != "other-key")
    # The first wait counts from the reset the server stated before ``start`` (a loaded
    # machine spends part of it before the calls begin); the next two are whole windows.
    assert same_key[-1] >= 2 * 0.3 * 0.8, same_key
    assert len(waits.items) >= 3 and waits.reasons == {"requests"}
    assert all(0 < w.wait_s <= 0.31 for _, w in waits.items)
    ours = [t for t, r in zip(arrivals, server.requests, strict=True) if r.headers["x-api-key"] == KEY]
    gaps = [b - a for a, b in zip(ours, ours[1:], strict=False)]
    assert len(gaps) == 3 and min(gaps) >= 0.3 * 0.8, gaps


async def test_429_retry_after_pauses_every_caller_on_the_key(http_client: httpx.AsyncClient) -> None:
    registry, waits_a, waits_b = RateLimitRegistry(), Waits(), Waits()
    policy = RetryPolicy(max_attempts=2, max_retry_after_s=2.0)
    limited = anyio.Event()
    with AnthropicServer() as server:
        server.enqueue(
            error_response(429, "rate_limit_error", "Number of requests exceeded", headers={"retry-after": "0.5"}),
            message([{"type": "text", "text": "a"}]),
            message([{"type": "text", "text": "b"}]),
        )
        a = _anthropic(server, registry, http_client, waits_a, retry_policy=policy,
                       on_retry=lambda notice: limited.set())
        b = _anthropic(server, registry, http_client, waits_b)
        elapsed_b = 0.0

        async def call_b() -> None:
            nonlocal elapsed_b
            await limited.wait()
            started = anyio.current_time()
            await b.complete(_request("b"), _ignore)
            elapsed_b = anyio.current_time() - started

        async with anyio.create_task_group() as tg:
            tg.start_soon(call_b)
            tg.start_soon(a.complete, _request("a"), _ignore)
        arrivals = list(server.received_at)
    assert [w.reason for _, w in waits_b.items] == ["retry_after"]
    assert 0.3 < waits_b.items[0][1].wait_s <= 0.5
    assert elapsed_b >= 0.4  # b never saw a 429, yet it waited out a's retry-after
    assert len(arrivals) == 3 and min(arrivals[1:]) - arrivals[0] >= 0.4


async def test_reported_usage_drains_the_catalog_budget_for_everyone(
    http_client: httpx.AsyncClient, tmp_path: Path
) -> None:
    (tmp_path / "models.toml").write_text(
        '[models."anthropic/tiny-tier"]\ninput_tokens_per_minute = 60_000\n'  # 1000 a second
    )
    catalog = load_catalog(tmp_path)
    registry, waits_a, waits_b = RateLimitRegistry(), Waits(), Waits()
    with AnthropicServer() as server:
        server.enqueue(
            message([{"type": "text", "text": "big"}], input_tokens=60_600),
            message([{"type": "text", "text": "small"}]),
        )
        credentials = {"ANTHROPIC_API_KEY": KEY, "ANTHROPIC_BASE_URL": server.base_url}
        a, b = (make_provider("anthropic/tiny-tier", credentials, http_client=http_client, catalog=catalog,
                              limiter=registry, on_rate_limited=w) for w in (waits_a, waits_b))
        await a.complete(_request("a"), _ignore)
        started = anyio.current_time()
        await b.complete(_request("b"), _ignore)
        elapsed = anyio.current_time() - started
    assert waits_a.items == []
    # b waits for a's usage; a loaded machine may wake it a hair early, so the limiter can
    # report a second, short wait for what is left: every wait is for input tokens.
    assert waits_b.items and {w.reason for _, w in waits_b.items} == {"input_tokens"}
    # 600 tokens of debt at 1000 a second, plus b's own estimate.
    assert 0.55 <= waits_b.items[0][1].wait_s < 1.5
    assert elapsed >= 0.5


async def test_openai_reset_duration_without_a_limit_holds_the_next_call(
    http_client: httpx.AsyncClient,
) -> None:
    registry, waits = RateLimitRegistry(), Waits()
    with OpenAIServer() as server:
        server.headers_for = lambda number: {  # type: ignore[method-assign]
            "x-ratelimit-remaining-requests": "0",
            "x-ratelimit-reset-requests": "400ms",
        }
        server.enqueue(chat_stream("one"), chat_stream("two"))
        credentials = {"OPENAI_API_KEY": KEY, "OPENAI_BASE_URL": server.base_url}
        first, second = (make_provider("openai-compat/local-model", credentials, http_client=http_client,
                                       limiter=registry, on_rate_limited=waits) for _ in range(2))
        await first.complete(_request(), _ignore)
        started = anyio.current_time()
        await second.complete(_request(), _ignore)
        elapsed = anyio.current_time() - started
        gap = server.received_at[1] - server.received_at[0]
    assert [w.reason for _, w in waits.items] == ["requests"]
    assert elapsed >= 0.3 and gap >= 0.35


async def test_a_cancelled_waiter_leaves_the_queue_and_the_budget(http_client: httpx.AsyncClient) -> None:
    registry = RateLimitRegistry()
    limiter = registry.limiter_for("anthropic", "http://127.0.0.1:1", KEY, {"requests": 1})
    assert await limiter.acquire() == 0.0
    with anyio.move_on_after(0.05):
        await limiter.acquire()  # the one request a minute is taken: this would wait 60 s
        pytest.fail("the second acquire did not wait")
    limiter.observe({"anthropic-ratelimit-requests-remaining": "1",
                     "anthropic-ratelimit-requests-reset": _rfc3339_in(0)})
    t0 = time.monotonic()
    with anyio.fail_after(1):
        assert await limiter.acquire() < 0.05  # the lock was released and nothing was taken
    assert time.monotonic() - t0 < 0.5


async def test_an_endpoint_without_headers_is_not_held_to_the_shipped_tier(
    http_client: httpx.AsyncClient, tmp_path: Path
) -> None:
    # Issue 20 case 5: the shipped catalog has Tier 1 limits for this model (30k input tokens
    # a minute); a gateway that sends no rate-limit headers must not make the session wait
    # them out. The same numbers bind once the person configures them as their tier.
    shipped = load_catalog(None).resolve("anthropic/claude-sonnet-4-6")
    assert shipped.rate_limits.input_tokens_per_minute == 30_000 and not shipped.rate_limits.configured
    (tmp_path / "models.toml").write_text('[models."anthropic/claude-sonnet-4-6"]\ninput_tokens_per_minute = 30_000\n')
    waited = {}
    for config in (None, tmp_path):
        registry, waits = RateLimitRegistry(), Waits()
        with AnthropicServer() as server:
            server.enqueue(message([{"type": "text", "text": "big"}], input_tokens=60_000),
                           message([{"type": "text", "text": "next"}]))
            credentials = {"ANTHROPIC_API_KEY": KEY, "ANTHROPIC_BASE_URL": server.base_url}
            provider = make_provider("anthropic/claude-sonnet-4-6", credentials, http_client=http_client,
                                     catalog=load_catalog(config), limiter=registry, on_rate_limited=waits)
            await provider.complete(_request("a"), _ignore)
            with anyio.move_on_after(0.5):  # the configured tier would hold it for a minute
                await provider.complete(_request("b"), _ignore)
        waited[config is not None] = waits.reasons
    assert waited == {False: set(), True: {"input_tokens"}}


# A 429 in each family's shape, and a success to retry it with (fresh-user s8 J1).
_FAMILIES = {
    "anthropic": ("anthropic/claude-test", AnthropicServer,
                  lambda headers: error_response(429, "rate_limit_error", "too many requests", headers=headers),
                  lambda n: message([{"type": "text", "text": f"ok {n}"}])),
    "openai-responses": ("openai/gpt-test", OpenAIServer,
                         lambda headers: openai_error(429, "rate_limit_exceeded", "slow down", headers=headers),
                         lambda n: responses_stream([{"type": "message", "text": f"ok {n}"}])),
    "openai-compat": ("openai-compat/local-model", OpenAIServer,  # vLLM, llama.cpp, LiteLLM
                      lambda headers: openai_error(429, None, "too many requests", headers=headers),
                      lambda n: chat_stream(f"ok {n}")),
}


def _family_provider(family: str, server: AnthropicServer, registry: RateLimitRegistry,
                     client: httpx.AsyncClient, waits: Waits, **kwargs: object):
    model = _FAMILIES[family][0]
    env = "ANTHROPIC" if family == "anthropic" else "OPENAI"
    return make_provider(model, {f"{env}_API_KEY": KEY, f"{env}_BASE_URL": server.base_url},
                         http_client=client, limiter=registry, on_rate_limited=waits, **kwargs)


@pytest.mark.parametrize("headers", [{}, {"retry-after": "0"}, {"retry-after-ms": "0"}],
                         ids=["no-headers", "retry-after-0", "retry-after-ms-0"])
@pytest.mark.parametrize("family", list(_FAMILIES))
async def test_a_429_that_names_no_wait_slows_only_its_own_retry(
    http_client: httpx.AsyncClient, family: str, headers: dict[str, str]
) -> None:
    # Fresh-user s8 J1: one 429 with no wait named (what vLLM, llama.cpp and LiteLLM send)
    # made the limiter guess a limit (the requests of the last minute less one) that held
    # every later request of every session to one per ~15 s while all of them succeeded.
    # Now the refused call retries after its own backoff and nothing else waits.
    _, server_class, refusal, success = _FAMILIES[family]
    registry, waits, notices = RateLimitRegistry(), Waits(), []
    policy = RetryPolicy(max_attempts=3, base_delay_s=0.05, max_delay_s=0.1)
    with server_class() as server:
        server.enqueue(*[success(n) for n in range(5)], refusal(headers),
                       *[success(n) for n in range(5, 13)])
        provider = _family_provider(family, server, registry, http_client, waits,
                                    retry_policy=policy, on_retry=notices.append)
        other = _family_provider(family, server, registry, http_client, waits)  # another session
        with anyio.fail_after(5):  # the guessed limit made the retry alone wait ~12 s
            for n in range(5):
                await provider.complete(_request(str(n)), _ignore)
            await provider.complete(_request("refused, then retried"), _ignore)
            started = anyio.current_time()
            for n in range(7):
                await (provider if n % 2 else other).complete(_request(f"after {n}"), _ignore)
            after = anyio.current_time() - started
    assert [n.error.status for n in notices] == [429] and notices[0].delay_s <= 0.1
    assert waits.items == []  # nobody was held by the limiter, before or after
    assert after < 2.0


@pytest.mark.parametrize("headers", [
    {"retry-after": "0.4"},
    {"retry-after-ms": "400"},
    {"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "400ms"},
], ids=["retry-after", "retry-after-ms", "x-ratelimit-reset"])
@pytest.mark.parametrize("family", ["anthropic", "openai-compat"])
async def test_a_429_that_names_its_wait_holds_everyone_that_long_and_no_longer(
    http_client: httpx.AsyncClient, family: str, headers: dict[str, str]
) -> None:
    _, server_class, refusal, success = _FAMILIES[family]
    registry, waits = RateLimitRegistry(), Waits()
    policy = RetryPolicy(max_attempts=3, base_delay_s=0.05, max_delay_s=0.1)
    with server_class() as server:
        server.enqueue(success(0), refusal(headers), *[success(n) for n in range(1, 9)])
        provider = _family_provider(family, server, registry, http_client, waits, retry_policy=policy)
        with anyio.fail_after(5):
            await provider.complete(_request("0"), _ignore)
            started = anyio.current_time()
            await provider.complete(_request("refused, then retried"), _ignore)
            held = anyio.current_time() - started
            count_before = len(waits.items)
            started = anyio.current_time()
            for n in range(6):
                await provider.complete(_request(f"after {n}"), _ignore)
            after = anyio.current_time() - started
    assert held >= 0.3  # the server's wait was kept
    assert len(waits.items) == count_before and after < 1.5  # and then full speed again
