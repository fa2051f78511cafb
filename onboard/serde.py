"""JSON round trip for the frozen dataclasses that pass between stages.

`to_dict` is `dataclasses.asdict` with tuples as lists; `from_dict` follows the type hints back, so a profile
written by one stage is read by the next with the same types (nested dataclasses, tuples, optional fields).

A dataclass with a field `unknown` (names of fields it could not establish) writes each of those fields as the
string "unknown", never as a value taken from a default; reading it back gives the field's empty placeholder (None,
empty collection, False, or the all-defaults dataclass).
"""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from functools import cache
from typing import Any, TypeVar

T = TypeVar("T")
UNKNOWN = "unknown"


def to_dict(obj: Any) -> Any:
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        withheld = set(getattr(obj, UNKNOWN, None) or ()) if _declares_unknown(type(obj)) else set()
        return {
            f.name: UNKNOWN if f.name in withheld else to_dict(getattr(obj, f.name)) for f in dataclasses.fields(obj)
        }
    if isinstance(obj, (list, tuple)):
        return [to_dict(x) for x in obj]
    if isinstance(obj, dict):
        return {str(k): to_dict(v) for k, v in obj.items()}
    return obj


def to_json(obj: Any, indent: int | None = 2) -> str:
    return json.dumps(to_dict(obj), indent=indent, sort_keys=False, ensure_ascii=False)


@cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def from_dict(cls: type[T], data: Any) -> T:
    """Build `cls` from plain JSON data, following its type hints. Unknown keys are an error."""
    return _convert(cls, data, cls.__name__)


def _convert(tp: Any, value: Any, where: str) -> Any:
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if tp is Any:
        return value
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        errors = []
        for arg in args:
            if arg is type(None):
                continue
            try:
                return _convert(arg, value, where)
            except (TypeError, ValueError) as exc:
                errors.append(str(exc))
        raise TypeError(f"{where}: {value!r} matches none of {args}: {errors}")
    if dataclasses.is_dataclass(tp):
        if not isinstance(value, dict):
            raise TypeError(f"{where}: expected an object for {tp.__name__}, got {type(value).__name__}")
        hints = _hints(tp)
        names = {f.name for f in dataclasses.fields(tp)}
        unknown = set(value) - names
        if unknown:
            raise ValueError(f"{where}: unknown keys {sorted(unknown)} for {tp.__name__}")
        withheld = set(value.get(UNKNOWN) or ()) if UNKNOWN in names else set()
        kwargs = {
            k: _placeholder(hints[k], f"{where}.{k}")
            if k in withheld and v == UNKNOWN
            else _convert(hints[k], v, f"{where}.{k}")
            for k, v in value.items()
        }
        return tp(**kwargs)
    if origin is tuple:
        if not isinstance(value, (list, tuple)):
            raise TypeError(f"{where}: expected a list, got {type(value).__name__}")
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_convert(args[0], v, f"{where}[{i}]") for i, v in enumerate(value))
        return tuple(_convert(a, v, f"{where}[{i}]") for i, (a, v) in enumerate(zip(args, value)))
    if origin is list:
        return [_convert(args[0], v, f"{where}[{i}]") for i, v in enumerate(value)]
    if origin is dict:
        if not isinstance(value, dict):
            raise TypeError(f"{where}: expected an object, got {type(value).__name__}")
        return {_convert(args[0], k, where): _convert(args[1], v, f"{where}.{k}") for k, v in value.items()}
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise TypeError(f"{where}: expected a number, got {value!r}")
        return float(value)
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"{where}: expected an integer, got {value!r}")
        return value
    if tp in (str, bool):
        if not isinstance(value, tp):
            raise TypeError(f"{where}: expected {tp.__name__}, got {value!r}")
        return value
    if tp is type(None):
        if value is not None:
            raise TypeError(f"{where}: expected null, got {value!r}")
        return None
    return value


@cache
def _declares_unknown(cls: type) -> bool:
    return any(f.name == UNKNOWN for f in dataclasses.fields(cls))


def _placeholder(tp: Any, where: str) -> Any:
    """The in-memory value of a field written as "unknown": empty, never a claim."""
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType) and type(None) in typing.get_args(tp):
        return None
    empty = {tuple: (), list: [], dict: {}}.get(origin)
    if empty is not None:
        return empty
    if tp is bool:
        return False
    if dataclasses.is_dataclass(tp):
        return tp()
    raise TypeError(f"{where}: a {tp} field cannot be unknown")
