"""Request bodies read as RFC 8259 JSON and no wider: what Python's `json` lets through besides (NaN and the
infinities, a number no double holds, a lone surrogate, an integer no 64-bit column holds, nesting that the
database's JSON encoder refuses) is a 422 naming where it is, before anything is saved.

The checks cost little on a good body (a few microseconds on a submit): the parser's number hooks, the walk that
finds a lone surrogate and the count of levels each run only when the raw bytes show there may be something to find."""

import json
import math
import re
from typing import Any

from app.api.errors import ApiError

MAX_DEPTH = 64  # levels of arrays and objects, the body itself the first
INT64 = range(-(2**63), 2**63)
MAX_INT_DIGITS = 20  # a longer integer is out of range anyway, and Python's int() of a very long one is slow
# A \u escape of a surrogate: the only way a lone surrogate gets in, as UTF-8 cannot encode one.
SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")
Path = list[str | int]


class _Refused(ValueError):
    """A value the parser's hooks will not take; where it is, a second pass finds."""


class _Bad:
    """What the second pass puts in place of a refused value, to find it by."""

    def __init__(self, why: str) -> None:
        self.why = why


def _int(text: str) -> int:
    value = int(text) if len(text.lstrip("-")) <= MAX_INT_DIGITS else None
    if value is None or value not in INT64:
        raise _Refused
    return value


def _float(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        raise _Refused
    return value


def _refuse(_: str) -> None:
    raise _Refused


def _bad_int(text: str) -> int | _Bad:
    try:
        return _int(text)
    except _Refused:
        return _Bad("an integer outside the signed 64-bit range")


def _bad_float(text: str) -> float | _Bad:
    return _Bad("a number too large for a double") if math.isinf(float(text)) else float(text)


# Number hooks cost a Python call per number (a batch of 500 jobs took 5x as long to parse with them), so a body
# is parsed with them only when its raw bytes hold a number that could be out of range: 19 digits in a row (every
# integer of 18 digits is in range) or an exponent of three digits. NaN and the infinities cost nothing to refuse.
DIGITS_AS_ZERO = bytes.maketrans(b"123456789E", b"000000000e")
RISKY_NUMBERS = (b"0" * 19, b"e000", b"e+000", b"e-000")
STRICT = json.JSONDecoder(parse_constant=_refuse)
NUMBERS = json.JSONDecoder(parse_int=_int, parse_float=_float, parse_constant=_refuse)
MARKING = json.JSONDecoder(
    parse_int=_bad_int, parse_float=_bad_float, parse_constant=lambda name: _Bad(f"{name}, which JSON does not allow")
)


def loads(body: bytes) -> Any:
    """The body's JSON value; a 422 (`invalid_json`) for anything RFC 8259 does not allow."""
    try:
        text = body.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise _invalid("The body is not valid JSON (UTF-8); send a JSON object.") from None
    try:
        value, marked = _decode(text, NUMBERS if _risky_numbers(body) else STRICT)
    except json.JSONDecodeError as exc:
        raise _invalid(f"The body is not valid JSON: {exc}.") from None
    except RecursionError:
        raise _fault([], f"nested deeper than {MAX_DEPTH} levels") from None
    if marked or SURROGATE_ESCAPE.search(body):
        _check(value)
    elif body.count(b"[") + body.count(b"{") > MAX_DEPTH and _nested_too_deep(body):
        raise _fault(_deepest(value), f"nested deeper than {MAX_DEPTH} levels")
    return value


def _risky_numbers(body: bytes) -> bool:
    digits = body.translate(DIGITS_AS_ZERO)
    return any(risky in digits for risky in RISKY_NUMBERS)


STRING = re.compile(rb'"(?:[^"\\]|\\.)*"')
NOT_BRACKETS = bytes(set(range(256)) - set(b"[]{}"))
EMPTY_PAIR = re.compile(rb"\[\]|\{\}")


def _nested_too_deep(body: bytes) -> bool:
    """Whether a body already parsed nests deeper than MAX_DEPTH, from its bytes: strings dropped, then its
    brackets alone, each pass taking away the innermost level (a few C-speed passes, not a walk of every value)."""
    outside = STRING.sub(b"", body) if b'\\"' in body else b"".join(body.split(b'"')[::2])  # strings dropped
    brackets = outside.translate(None, NOT_BRACKETS)
    for _ in range(MAX_DEPTH):
        brackets = EMPTY_PAIR.sub(b"", brackets)
        if not brackets:
            return False
    return True


def _deepest(value: Any) -> Path:
    """Where the first array or object nested deeper than MAX_DEPTH is, looking at arrays and objects only."""
    stack: list[tuple[Any, Path]] = [(value, [])]
    while stack:
        item, path = stack.pop()
        if len(path) >= MAX_DEPTH:
            return path
        pairs = reversed(list(enumerate(item) if isinstance(item, list) else item.items()))
        stack.extend((child, [*path, key]) for key, child in pairs if isinstance(child, dict | list))
    return []


def _decode(text: str, decoder: json.JSONDecoder) -> tuple[Any, bool]:
    """The value, and whether a second pass had to mark what the first refused."""
    try:
        return decoder.decode(text), False
    except _Refused:
        return MARKING.decode(text), True


def _check(value: Any) -> None:
    """Walk every value, without recursion, for the first thing refused: a marked value, a lone surrogate, a level
    too deep (only when the raw body shows one of the first two may be there)."""
    stack: list[tuple[Any, Path, int]] = [(value, [], 1)]
    while stack:
        item, path, depth = stack.pop()
        if isinstance(item, _Bad):
            raise _fault(path, item.why)
        if isinstance(item, str) and not _encodable(item):
            raise _fault(path, "a lone surrogate (\\ud800-\\udfff), which is no character")
        if not isinstance(item, dict | list):
            continue
        if depth > MAX_DEPTH:
            raise _fault(path, f"nested deeper than {MAX_DEPTH} levels")
        if isinstance(item, list):
            stack.extend((child, [*path, index], depth + 1) for index, child in reversed(list(enumerate(item))))
            continue
        for key in reversed(list(item)):
            if not _encodable(key):
                raise _fault([*path, _named(key)], "a lone surrogate (\\ud800-\\udfff) in a key, which is no character")
            stack.append((item[key], [*path, key], depth + 1))


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _named(key: str) -> str:
    """A key as the client wrote it, its lone surrogates as \\u escapes (an answer cannot carry them)."""
    return key.encode("utf-8", "backslashreplace").decode("utf-8")


def _invalid(detail: str) -> ApiError:
    return ApiError(422, "invalid_json", detail)


def _fault(path: Path, why: str) -> ApiError:
    loc = ["body", *path]
    where = ".".join(str(part) for part in loc)
    detail = f"The body is not JSON that RFC 8259 allows: {where} is {why}; nothing was saved."
    return ApiError(422, "invalid_json", detail, errors=[{"type": "json_not_allowed", "loc": loc, "msg": why}])
