"""Messages as plain values: a small msgpack codec in pure Python, for the client commands
that start without msgspec (``client/quick.py``: ``musec sessions``, ``musec daemon status``).

A message is a ``dict`` as msgspec encodes its Struct: the tag first (``"type"``), then the
fields in the order the Struct defines them, defaults left out (``omit_defaults``). ``pack``
writes the same bytes msgspec writes for the same values (the smallest msgpack form of each
integer, string, map and array; every float as float64); ``unpack`` reads any msgpack body
without extension types. tests/daemon/test_plain.py compares both with msgspec, message by
message, for every request and reply the quick commands use. The format is the msgpack
specification (github.com/msgpack/msgpack/blob/master/spec.md).
"""

from __future__ import annotations

import struct

TYPE_CHECKING = False  # not typing's: importing typing costs a quick client command's start
if TYPE_CHECKING:
    from typing import Any

__all__ = ["pack", "unpack"]

_U8, _U16, _U32, _U64 = (struct.Struct(f">{c}") for c in "BHIQ")
_I8, _I16, _I32, _I64 = (struct.Struct(f">{c}") for c in "bhiq")
_F32, _F64 = struct.Struct(">f"), struct.Struct(">d")


def pack(value: Any) -> bytes:
    """``value`` (``None``, ``bool``, ``int``, ``float``, ``str``, ``bytes``, ``list``,
    ``tuple``, ``dict``, nested) as msgpack.

    Raises:
        TypeError: a value of another type.
        OverflowError: an integer outside -2**63 .. 2**64 - 1.
    """
    out = bytearray()
    _pack(value, out)
    return bytes(out)


def _header(out: bytearray, n: int, fix: int, fix_max: int, codes: tuple[int, int, int]) -> None:
    """The header of a str, bin, array or map of ``n`` items (``codes``: its 8-, 16- and
    32-bit length forms; 0 where the type has none)."""
    if n <= fix_max:
        out.append(fix | n)
    elif n <= 0xFF and codes[0]:
        out.append(codes[0])
        out.append(n)
    elif n <= 0xFFFF:
        out.append(codes[1])
        out += _U16.pack(n)
    else:
        out.append(codes[2])
        out += _U32.pack(n)


def _pack(v: Any, out: bytearray) -> None:
    t = type(v)
    if t is str:
        data = v.encode("utf-8")
        _header(out, len(data), 0xA0, 31, (0xD9, 0xDA, 0xDB))
        out += data
    elif t is int:
        _pack_int(v, out)
    elif v is None:
        out.append(0xC0)
    elif t is bool:
        out.append(0xC3 if v else 0xC2)
    elif t is float:
        out.append(0xCB)
        out += _F64.pack(v)
    elif t is dict:
        _header(out, len(v), 0x80, 15, (0, 0xDE, 0xDF))
        for key, item in v.items():
            _pack(key, out)
            _pack(item, out)
    elif t is list or t is tuple:
        _header(out, len(v), 0x90, 15, (0, 0xDC, 0xDD))
        for item in v:
            _pack(item, out)
    elif t is bytes or t is bytearray:
        _header(out, len(v), 0xC4, -1, (0xC4, 0xC5, 0xC6))  # no fix form: 0xC4 + 8-bit length
        out += v
    else:
        raise TypeError(f"cannot pack a {t.__name__}")


def _pack_int(v: int, out: bytearray) -> None:
    if 0 <= v <= 0x7F or -32 <= v < 0:
        out.append(v & 0xFF)
    elif v > 0:
        for code, form, top in ((0xCC, _U8, 0xFF), (0xCD, _U16, 0xFFFF), (0xCE, _U32, 0xFFFFFFFF),
                                (0xCF, _U64, 0xFFFFFFFFFFFFFFFF)):
            if v <= top:
                out.append(code)
                out += form.pack(v)
                return
        raise OverflowError(f"{v} is too large for msgpack")
    else:
        for code, form, bottom in ((0xD0, _I8, -0x80), (0xD1, _I16, -0x8000), (0xD2, _I32, -0x80000000),
                                   (0xD3, _I64, -0x8000000000000000)):
            if v >= bottom:
                out.append(code)
                out += form.pack(v)
                return
        raise OverflowError(f"{v} is too small for msgpack")


def unpack(data: bytes) -> Any:
    """The value of one whole msgpack body.

    Raises:
        ValueError: ``data`` is not exactly one msgpack value (truncated, trailing bytes, an
            extension type, a string that is not UTF-8, a map key that cannot be a key).
    """
    try:
        value, end = _unpack(data, 0)
    except (IndexError, struct.error, UnicodeDecodeError, TypeError, RecursionError) as exc:
        raise ValueError(f"not a msgpack body: {exc}") from None
    if end != len(data):
        raise ValueError(f"not a msgpack body: {len(data) - end} bytes after its end")
    return value


# code -> (struct form of the length or value, what it is)
_SIZED = {
    0xCC: (_U8, "value"), 0xCD: (_U16, "value"), 0xCE: (_U32, "value"), 0xCF: (_U64, "value"),
    0xD0: (_I8, "value"), 0xD1: (_I16, "value"), 0xD2: (_I32, "value"), 0xD3: (_I64, "value"),
    0xCA: (_F32, "value"), 0xCB: (_F64, "value"),
    0xD9: (_U8, "str"), 0xDA: (_U16, "str"), 0xDB: (_U32, "str"),
    0xC4: (_U8, "bin"), 0xC5: (_U16, "bin"), 0xC6: (_U32, "bin"),
    0xDC: (_U16, "array"), 0xDD: (_U32, "array"),
    0xDE: (_U16, "map"), 0xDF: (_U32, "map"),
}
_CONSTANTS = {0xC0: None, 0xC2: False, 0xC3: True}


def _unpack(data: bytes, i: int) -> tuple[Any, int]:
    code = data[i]
    i += 1
    if code <= 0x7F:
        return code, i
    if code >= 0xE0:
        return code - 0x100, i
    if 0xA0 <= code <= 0xBF:
        n = code & 0x1F
        end = i + n
        if end > len(data):
            raise IndexError("string past the end")
        return data[i:end].decode("utf-8"), end
    if code <= 0x8F:
        return _unpack_map(data, i, code & 0x0F)
    if code <= 0x9F:
        return _unpack_array(data, i, code & 0x0F)
    if code in _CONSTANTS:
        return _CONSTANTS[code], i
    sized = _SIZED.get(code)
    if sized is None:
        raise TypeError(f"msgpack type 0x{code:02x} (an extension or unused) is not read here")
    form, kind = sized
    (n,) = form.unpack_from(data, i)
    i += form.size
    if kind == "value":
        return n, i
    if kind == "array":
        return _unpack_array(data, i, n)
    if kind == "map":
        return _unpack_map(data, i, n)
    end = i + n
    if end > len(data):
        raise IndexError(f"{kind} past the end")
    chunk = data[i:end]
    return (chunk.decode("utf-8") if kind == "str" else bytes(chunk)), end


def _unpack_array(data: bytes, i: int, n: int) -> tuple[list[Any], int]:
    items = []
    for _ in range(n):
        item, i = _unpack(data, i)
        items.append(item)
    return items, i


def _unpack_map(data: bytes, i: int, n: int) -> tuple[dict[Any, Any], int]:
    # Keys and most values are short strings, small integers or nil: read here, not through
    # a call each (a thousand sessions' listing decoded in half the time).
    out = {}
    size = len(data)
    for _ in range(n):
        code = data[i]
        if 0xA0 <= code <= 0xBF:
            end = i + 1 + (code & 0x1F)
            if end > size:
                raise IndexError("string past the end")
            key = data[i + 1:end].decode("utf-8")
            i = end
        else:
            key, i = _unpack(data, i)
        code = data[i]
        if 0xA0 <= code <= 0xBF:
            end = i + 1 + (code & 0x1F)
            if end > size:
                raise IndexError("string past the end")
            out[key] = data[i + 1:end].decode("utf-8")
            i = end
        elif code <= 0x7F:
            out[key] = code
            i += 1
        elif code == 0xCB:  # a float64 (times)
            (out[key],) = _F64.unpack_from(data, i + 1)
            i += 9
        else:
            out[key], i = _unpack(data, i)
    return out, i
