"""JSON round trip for the frozen records (msgspec Structs or dataclasses) that pass between stages.

`to_dict` is `dataclasses.asdict` with tuples as lists; `from_dict` follows the type hints back (msgspec.convert).
A record with a field `unknown` writes each field it names as the string "unknown", never a default's value, and
reads it back as the field's empty placeholder (None, empty collection, False, the all-defaults record).
`decode_json` / `convert` turn documents from disk or the network into typed structs: a wrong shape is an
InputError naming the source and the field's JSON path, never a KeyError later.
"""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from functools import cache
from typing import Any, TypeVar

import msgspec

from onboard.errors import InputError, OnboardError

T = TypeVar("T")
UNKNOWN = "unknown"


def is_record(tp: Any) -> bool:
    """A dataclass or msgspec Struct class."""
    return isinstance(tp, type) and (dataclasses.is_dataclass(tp) or issubclass(tp, msgspec.Struct))


@cache
def field_names(cls: type) -> tuple[str, ...]:
    if issubclass(cls, msgspec.Struct):
        return cls.__struct_fields__
    return tuple(f.name for f in dataclasses.fields(cls))


OMIT_EMPTY = {"omit_empty": True}
"""Dataclass field metadata: the field is left out of `to_dict` while empty (it reads back as its default)."""


@cache
def _omitted_when_empty(cls: type) -> frozenset[str]:
    if not dataclasses.is_dataclass(cls):
        return frozenset()
    return frozenset(f.name for f in dataclasses.fields(cls) if f.metadata.get("omit_empty"))


def to_dict(obj: Any) -> Any:
    if is_record(type(obj)):
        withheld = set(getattr(obj, UNKNOWN, None) or ()) if _declares_unknown(type(obj)) else set()
        omit = _omitted_when_empty(type(obj))
        return {
            name: UNKNOWN if name in withheld else to_dict(getattr(obj, name))
            for name in field_names(type(obj))
            if name not in omit or getattr(obj, name)
        }
    if isinstance(obj, (list, tuple)):
        return [to_dict(x) for x in obj]
    if isinstance(obj, dict):
        return {str(k): to_dict(v) for k, v in obj.items()}
    return obj


def to_json(obj: Any, indent: int | None = 2) -> str:
    return json.dumps(to_dict(obj), indent=indent, sort_keys=False, ensure_ascii=False)


def decode_json(raw: bytes | str, kind: Any, source: str, hint: str, error: type[OnboardError] = InputError) -> Any:
    """JSON text -> `kind` (a Struct, dataclass or typing form); `source` names the file or request in errors."""
    try:
        return msgspec.json.decode(raw, type=kind)
    except msgspec.ValidationError as exc:
        raise error(f"{source}: {exc}", hint) from exc
    except msgspec.DecodeError as exc:
        raise error(f"{source}: not JSON ({exc})", hint) from exc


def convert(data: Any, kind: Any, source: str, hint: str, error: type[OnboardError] = InputError) -> Any:
    """Already-parsed data (YAML, a dict from a caller) -> `kind`, with the same field-naming errors."""
    try:
        return msgspec.convert(data, type=kind)
    except msgspec.ValidationError as exc:
        raise error(f"{source}: {exc}", hint) from exc


@cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def from_dict(cls: type[T], data: Any) -> T:
    """`cls` from plain JSON data; unknown keys are a ValueError, a wrong type a TypeError naming the field."""
    _refuse_unknown_keys(cls, data, cls.__name__)
    try:
        return msgspec.convert(_with_placeholders(cls, data), type=cls)
    except msgspec.ValidationError as exc:
        raise TypeError(f"{cls.__name__}: {exc}") from exc


def _with_placeholders(cls: Any, data: Any) -> Any:
    """Fields written as "unknown" replaced by their empty placeholder's JSON form."""
    if not (isinstance(data, dict) and is_record(cls) and _declares_unknown(cls)):
        return data
    withheld = set(data.get(UNKNOWN) or ())
    hints = _hints(cls)
    return {
        k: to_dict(_placeholder(hints[k], f"{cls.__name__}.{k}")) if k in withheld and v == UNKNOWN else v
        for k, v in data.items()
    }


def _refuse_unknown_keys(tp: Any, value: Any, where: str) -> None:
    """msgspec drops undeclared keys; a record with keys we do not know is from another version of onboard (or
    hand-edited), and is refused rather than half-read."""
    if is_record(tp) and isinstance(value, dict):
        hints = _hints(tp)
        unknown = set(value) - set(field_names(tp))
        if unknown:
            raise ValueError(f"{where}: unknown keys {sorted(unknown)} for {tp.__name__}")
        for key, item in value.items():
            _refuse_unknown_keys(hints[key], item, f"{where}.{key}")
        return
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        classes = [arg for arg in args if is_record(arg)]
        if len(classes) == 1:  # Optional[SomeRecord]; a union of several is left to msgspec
            _refuse_unknown_keys(classes[0], value, where)
    elif origin in (list, tuple) and isinstance(value, list) and args:
        for i, item in enumerate(value):
            _refuse_unknown_keys(
                args[0] if origin is list or args[-1] is Ellipsis else args[min(i, len(args) - 1)],
                item,
                f"{where}[{i}]",
            )
    elif origin is dict and isinstance(value, dict) and len(args) == 2:
        for key, item in value.items():
            _refuse_unknown_keys(args[1], item, f"{where}.{key}")


@cache
def _declares_unknown(cls: type) -> bool:
    return UNKNOWN in field_names(cls)


def _placeholder(tp: Any, where: str) -> Any:
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType) and type(None) in typing.get_args(tp):
        return None
    empty = {tuple: (), list: [], dict: {}}.get(origin)
    if empty is not None:
        return empty
    if tp is bool:
        return False
    if is_record(tp):
        return tp()
    raise TypeError(f"{where}: a {tp} field cannot be unknown")


# transformers writes the floats JSON has no literal for as tagged objects (Mamba-2 hybrids' time_step_limit).
_SPECIAL_FLOATS = {"Infinity": float("inf"), "-Infinity": float("-inf"), "NaN": float("nan")}


def decode_special_floats(value: Any) -> Any:
    """`value` with transformers' `{"__float__": "Infinity"}` tags read back as floats, at any depth."""
    if isinstance(value, dict):
        if len(value) == 1 and value.get("__float__") in _SPECIAL_FLOATS:
            return _SPECIAL_FLOATS[value["__float__"]]
        return {k: decode_special_floats(v) for k, v in value.items()}
    if isinstance(value, list):
        return [decode_special_floats(v) for v in value]
    return value
