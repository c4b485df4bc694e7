"""The client <-> daemon wire protocol (DESIGN §4).

Frames on a Unix stream socket: a 4-byte big-endian unsigned length, then a msgpack body
encoded by msgspec. A length over ``MAX_FRAME_BYTES`` is a protocol error, answered with
an ``Error`` frame and a close. Messages are frozen msgspec Structs in one tagged union
per direction (``tag_field="type"``). The first frame each way is ``Hello``. Every
request carries an ``id``; every reply and every event caused by it carries it back.

The wire only grows: new fields get defaults, no field changes type, and a peer ignores
fields it does not know (msgspec does by default).

Strings of a closed set are ``Literal`` types that msgspec checks on decode (a value
outside the set is a ``FrameError``); adding a value is a change of the protocol: bump
``PROTOCOL_VERSION``. Every default is the safe choice, so a client that omits a field
gets the careful behaviour (``approval="ask"``, a sandbox, no trust, no background agents).

The protocol is this package, one name space (``protocol.Hello``, ``protocol.encode``,
``protocol.socket_path``), in two modules: ``base`` (framing, limits, the socket's place,
secrets; the standard library only) and ``messages`` (every message as a Struct and the
msgspec codec), which is imported on the first use of one of its names. So importing the
package costs no msgspec: a client command that needs no Struct (``musec sessions``,
``client/quick.py``) frames its plain requests with ``base`` and ``plain`` (a small msgpack
codec whose bytes a test compares with msgspec's).

This package imports nothing else of musec: the client's import path is this package, the
client package and the standard library. The package's version is not here: each side
fills ``Hello.version`` with its own (the client from ``musec.client.__version__``, the
daemon from the installed distribution).
"""

from __future__ import annotations

from .base import (
    CREDENTIAL_VARS,
    EVENT_PIECE_BYTES,
    MAX_EVENT_BYTES,
    MAX_FRAME_BYTES,
    MAX_SOCKET_PATH_BYTES,
    MIN_SECRET_CHARS,
    PROTOCOL_VERSION,
    FrameBuffer,
    FrameError,
    InvalidMessage,
    config_home,
    frame,
    is_secret_name,
    named_secrets,
    private_dir,
    secret_names,
    secret_values,
    socket_file,
    socket_path,
    socket_path_problem,
    state_home,
)

TYPE_CHECKING = False  # not typing's: importing typing costs a quick client command's start
if TYPE_CHECKING:
    from typing import Any

    from .messages import *  # noqa: F403 - what __getattr__ hands out, for type checkers

__all__ = [
    "CREDENTIAL_VARS", "EVENT_PIECE_BYTES", "MAX_EVENT_BYTES", "MAX_FRAME_BYTES", "MAX_SOCKET_PATH_BYTES",
    "MIN_SECRET_CHARS", "PROTOCOL_VERSION", "FrameBuffer", "FrameError", "InvalidMessage", "config_home", "frame",
    "is_secret_name", "named_secrets", "private_dir", "secret_names", "secret_values", "socket_file", "socket_path",
    "socket_path_problem", "state_home",
]


_SUBMODULES = frozenset({"base", "messages", "plain"})


def __getattr__(name: str) -> Any:
    """A name of ``messages`` (``Hello``, ``encode``, ``REPLY``...), importing it on first use
    and keeping it here, so later uses are plain attribute reads."""
    if name.startswith("__") or name in _SUBMODULES:  # a submodule is imported, not looked up here
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import musec.daemon.protocol.messages as messages  # not `from . import`: that asks this hook first

    try:
        value = getattr(messages, name)
    except AttributeError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    globals()[name] = value
    return value
