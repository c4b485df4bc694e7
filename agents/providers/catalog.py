"""The model catalog: aliases, limits, prices and data-use terms of each model.

A shipped default (``catalog_default.toml``, package data) merged with the user's
``models.toml`` from the config directory (DESIGN §2). The file format is described at
the top of ``catalog_default.toml``::

    [aliases]
    sonnet = "anthropic/claude-sonnet-4-6"

    [models."openai-compat/qwen3-coder"]
    base_url = "http://127.0.0.1:8000/v1"
    context_window_tokens = 262_144

A user table for an id already in the default replaces only the fields it names.
Nothing is read at import time; ``load_catalog`` reads the files.
"""

from __future__ import annotations

import importlib.resources
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from musec.agents.core.conversation import Usage
from musec.agents.core.errors import CatalogError

__all__ = [
    "USER_CATALOG_NAME",
    "Catalog",
    "CatalogEntry",
    "Prices",
    "RateLimits",
    "load_catalog",
]

#: The user's catalog file, inside the config directory.
USER_CATALOG_NAME = "models.toml"

_PRICE_KEYS = {
    "input_usd_per_mtok": "input",
    "cached_input_usd_per_mtok": "cached_input",
    "cache_write_usd_per_mtok": "cache_write",
    "output_usd_per_mtok": "output",
}
_LIMIT_KEYS = (
    "requests_per_minute",
    "input_tokens_per_minute",
    "output_tokens_per_minute",
    "tokens_per_minute",
)
_DEFAULT_SOURCE = "catalog_default.toml"
_INT_KEYS = ("context_window_tokens", "max_output_tokens", *_LIMIT_KEYS)
_STR_KEYS = ("provider", "model", "base_url", "compact_model")
_KNOWN_KEYS = frozenset({*_PRICE_KEYS, *_INT_KEYS, *_STR_KEYS, "trains_on_data", "compact_at"})


@dataclass(frozen=True)
class Prices:
    """List prices in US dollars per million tokens.

    ``cached_input`` is a cache read; ``cache_write`` is writing the prompt cache
    (Anthropic charges 1.25 x input for a 5-minute write; OpenAI nothing).
    """

    input: float
    output: float
    cached_input: float | None = None
    cache_write: float | None = None


@dataclass(frozen=True)
class RateLimits:
    """Per-minute limits of one credential for this model; ``None`` means unknown.

    ``configured`` says the person set at least one of them (their ``models.toml``): only
    then do they bind the limiter up front. The shipped numbers are one tier's (the lowest);
    held to them, an account of a higher tier, or an endpoint that sends no rate-limit
    headers (a proxy, a gateway), would wait for nothing, so without ``configured`` the
    limiter learns the limits from the response headers and 429s alone.
    """

    requests_per_minute: int | None = None
    input_tokens_per_minute: int | None = None
    output_tokens_per_minute: int | None = None
    tokens_per_minute: int | None = None
    configured: bool = False


@dataclass(frozen=True)
class CatalogEntry:
    """One model.

    Attributes:
        id: the catalog id, normally ``PROVIDER/MODEL`` (what ``--model`` takes).
        provider: ``anthropic``, ``openai``, ``azure``, ``openai-compat`` or ``scripted``
            (empty when the id names none).
        model: the provider's model id (for ``azure`` the deployment name).
        base_url: the API root to use instead of the provider's default, if any.
        context_window_tokens, max_output_tokens: ``None`` when unknown.
        prices: ``None`` when unknown (an id the catalog does not list).
        trains_on_data: the tier may use prompts for training.
        rate_limits: per-minute limits, fields ``None`` when unknown.
        aliases: the aliases that name this entry.
        compact_at: compact a history once a request would fill this share of
            ``context_window_tokens`` (0 < x <= 1); ``None``: musec's default (0.85).
        compact_model: the model id that writes this model's compaction summaries
            (a cheaper one); ``None``: the model itself.
    """

    id: str
    provider: str
    model: str
    base_url: str | None = None
    context_window_tokens: int | None = None
    max_output_tokens: int | None = None
    prices: Prices | None = None
    trains_on_data: bool = False
    rate_limits: RateLimits = field(default_factory=RateLimits)
    aliases: tuple[str, ...] = ()
    compact_at: float | None = None
    compact_model: str | None = None

    def cost_usd(self, usage: Usage) -> float:
        """The dollar cost of one call's ``usage`` at list price; 0.0 without prices.

        ``usage.input_tokens`` is the uncached input (musec's convention for every
        provider); cache reads are charged at ``cached_input`` and cache writes at
        ``cache_write``, each falling back to the input price when not listed.
        """
        p = self.prices
        if p is None:
            return 0.0
        cached = p.input if p.cached_input is None else p.cached_input
        write = p.input if p.cache_write is None else p.cache_write
        total = (
            usage.input_tokens * p.input
            + usage.cache_read_tokens * cached
            + usage.cache_write_tokens * write
            + usage.output_tokens * p.output
        )
        return total / 1_000_000


def _split_id(model_id: str) -> tuple[str, str]:
    if model_id.startswith("scripted:"):
        return "scripted", model_id.removeprefix("scripted:")
    provider, slash, model = model_id.partition("/")
    return (provider, model) if slash else ("", model_id)


class Catalog:
    """Resolved model entries and aliases; build it with ``load_catalog``."""

    def __init__(self, entries: Mapping[str, CatalogEntry], aliases: Mapping[str, str]):
        self._entries = dict(entries)
        self._aliases = dict(aliases)

    def entries(self) -> list[CatalogEntry]:
        """Every listed model, sorted by id."""
        return [self._entries[k] for k in sorted(self._entries)]

    @property
    def aliases(self) -> dict[str, str]:
        """Alias -> catalog id."""
        return dict(self._aliases)

    def resolve(self, model_or_alias: str) -> CatalogEntry:
        """The entry for an id or alias.

        An alias may name another alias (followed up to 8 steps). An id the catalog does
        not list passes through as an entry with its provider and model split from the
        id (``PROVIDER/MODEL``, or ``scripted:PATH``) and no prices or limits.

        Raises:
            CatalogError: an alias loop.
        """
        name = model_or_alias
        for _ in range(8):
            if name not in self._aliases:
                break
            name = self._aliases[name]
        else:
            raise CatalogError(f"model alias {model_or_alias!r} loops")
        entry = self._entries.get(name)
        if entry is not None:
            return entry
        provider, model = _split_id(name)
        return CatalogEntry(id=name, provider=provider, model=model)


def _read_toml(text: str, source: str) -> dict[str, Any]:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise CatalogError(f"{source}: not valid TOML: {exc}") from exc


def _merge(into: dict[str, Any], data: dict[str, Any], source: str) -> None:
    unknown = set(data) - {"aliases", "models"}
    if unknown:
        raise CatalogError(f"{source}: unknown top-level keys {sorted(unknown)}")
    aliases = data.get("aliases", {})
    if not isinstance(aliases, dict) or not all(isinstance(v, str) for v in aliases.values()):
        raise CatalogError(f"{source}: [aliases] must map names to model ids (strings)")
    into["aliases"].update(aliases)
    models = data.get("models", {})
    if not isinstance(models, dict):
        raise CatalogError(f"{source}: [models] must be a table of tables")
    for model_id, table in models.items():
        if not isinstance(table, dict):
            raise CatalogError(f"{source}: models.{model_id!r} must be a table")
        bad = set(table) - _KNOWN_KEYS
        if bad:
            raise CatalogError(f"{source}: models.{model_id!r}: unknown keys {sorted(bad)}")
        into["models"].setdefault(model_id, {}).update((k, (source, v)) for k, v in table.items())


def _value(model_id: str, table: dict[str, tuple[str, Any]], key: str, kind: type) -> Any:
    if key not in table:
        return None
    source, value = table[key]
    ok = isinstance(value, kind) and not (kind is not bool and isinstance(value, bool))
    if kind is float:
        ok = isinstance(value, int | float) and not isinstance(value, bool)
    if not ok or (kind in (int, float) and value < 0):
        what = f"non-negative {kind.__name__}" if kind in (int, float) else kind.__name__
        raise CatalogError(f"{source}: models.{model_id!r}.{key} must be a {what}, got {value!r}")
    return float(value) if kind is float else value


def _entry(
    model_id: str, table: dict[str, tuple[str, Any]], aliases: tuple[str, ...]
) -> CatalogEntry:
    provider, model = _split_id(model_id)
    price = {name: _value(model_id, table, key, float) for key, name in _PRICE_KEYS.items()}
    prices = None
    if price["input"] is not None and price["output"] is not None:
        prices = Prices(**price)
    elif any(v is not None for v in price.values()):
        source = next(table[k][0] for k in _PRICE_KEYS if k in table)
        raise CatalogError(
            f"{source}: models.{model_id!r} needs both input_usd_per_mtok and output_usd_per_mtok"
        )
    ints = {key: _value(model_id, table, key, int) for key in _INT_KEYS}
    compact_at = _value(model_id, table, "compact_at", float)
    if compact_at is not None and not 0 < compact_at <= 1:
        raise CatalogError(f"{table['compact_at'][0]}: models.{model_id!r}.compact_at must be a share of the window "
                           f"above 0 and at most 1 (0.85 is 85%), got {compact_at!r}")
    strs = {key: _value(model_id, table, key, str) for key in _STR_KEYS}
    return CatalogEntry(
        id=model_id,
        provider=strs["provider"] or provider,
        model=strs["model"] or model,
        base_url=strs["base_url"],
        context_window_tokens=ints["context_window_tokens"],
        max_output_tokens=ints["max_output_tokens"],
        prices=prices,
        trains_on_data=bool(_value(model_id, table, "trains_on_data", bool)),
        rate_limits=RateLimits(**{key: ints[key] for key in _LIMIT_KEYS},
                               configured=any(table[k][0] != _DEFAULT_SOURCE for k in _LIMIT_KEYS if k in table)),
        aliases=aliases,
        compact_at=compact_at,
        compact_model=strs["compact_model"],
    )


def load_catalog(config_dir: Path | None) -> Catalog:
    """The shipped default catalog merged with ``config_dir/models.toml``, if present.

    Args:
        config_dir: the musec config directory (DESIGN §2), or ``None`` for the
            default catalog alone.

    Raises:
        CatalogError: a file is not valid TOML or has unknown keys or wrong types; the
            message names the file and the key.
    """
    merged: dict[str, Any] = {"aliases": {}, "models": {}}
    default = importlib.resources.files("musec.agents.providers").joinpath("catalog_default.toml")
    _merge(
        merged,
        _read_toml(default.read_text(encoding="utf-8"), "catalog_default.toml"),
        "catalog_default.toml",
    )
    if config_dir is not None:
        path = Path(config_dir) / USER_CATALOG_NAME
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            text = None
        except OSError as exc:
            raise CatalogError(f"{path}: cannot read: {exc}") from exc
        if text is not None:
            _merge(merged, _read_toml(text, str(path)), str(path))
    aliases: dict[str, str] = merged["aliases"]
    names: dict[str, list[str]] = {}
    for alias, target in aliases.items():
        names.setdefault(target, []).append(alias)
    entries = {
        model_id: _entry(model_id, table, tuple(sorted(names.get(model_id, ()))))
        for model_id, table in merged["models"].items()
    }
    return Catalog(entries, aliases)
