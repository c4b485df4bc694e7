"""One instance of every event type, for the tests that check each fold handles each type."""

from __future__ import annotations

from typing import Any, Union, get_args, get_origin

import msgspec
from musec.agents.core import events as ev

_PLAIN = {"str": "x", "int": 0, "float": 0.0, "bool": False}


def sample(cls: type[ev.Event], **given: Any) -> ev.Event:
    """An instance of ``cls`` with a plain value in each required field (``given`` wins)."""
    kwargs: dict[str, Any] = {}
    for field in msgspec.structs.fields(cls):
        if field.required and field.name not in given:
            kind = field.type
            if get_origin(kind) in (Union, type(int | None)):
                kind = next(a for a in get_args(kind) if a is not type(None))
            origin = get_origin(kind) or kind
            kwargs[field.name] = [] if origin is list else {} if origin is dict else _PLAIN[kind.__name__]
    return cls(**kwargs, **given)


def samples(**given: Any) -> list[ev.Event]:
    """One instance of every type of ``AnyEvent``, in its order."""
    return [sample(cls, **given) for cls in ev.EVENT_TYPES]
