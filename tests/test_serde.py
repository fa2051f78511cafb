"""serde.from_dict: msgspec decodes the stage hand-off dataclasses; unknown keys and wrong types name the field."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from onboard import serde


@dataclass(frozen=True)
class Inner:
    name: str
    sizes: tuple[int, ...] = ()


@dataclass(frozen=True)
class Outer:
    inner: Inner
    items: tuple[Inner, ...] = ()
    by_name: dict[str, Inner] = field(default_factory=dict)
    ratio: float | None = None
    unknown: tuple[str, ...] = ()


VALUE = Outer(Inner("a", (1, 2)), (Inner("b"),), {"c": Inner("c", (3,))}, 0.5)


def test_round_trip_keeps_types() -> None:
    back = serde.from_dict(Outer, serde.to_dict(VALUE))
    assert back == VALUE and isinstance(back.inner.sizes, tuple) and isinstance(back.items, tuple)


def test_a_wrong_type_names_its_path() -> None:
    data = serde.to_dict(VALUE)
    data["items"][0]["sizes"] = [1, "2"]
    with pytest.raises(TypeError, match=r"Outer: Expected `int`, got `str` - at `\$\.items\[0\]\.sizes\[1\]`"):
        serde.from_dict(Outer, data)


@pytest.mark.parametrize(
    ("path", "where"), [((), "Outer"), (("inner",), "Outer.inner"), (("by_name", "c"), "Outer.by_name.c")]
)
def test_unknown_keys_are_refused_at_any_depth(path: tuple[str, ...], where: str) -> None:
    data = serde.to_dict(VALUE)
    target = data
    for key in path:
        target = target[key]
    target["extra"] = 1
    with pytest.raises(ValueError, match=rf"{where}: unknown keys \['extra'\]"):
        serde.from_dict(Outer, data)


def test_fields_written_as_unknown_read_back_empty() -> None:
    withheld = Outer(Inner("a"), (Inner("b"),), ratio=0.5, unknown=("items", "ratio"))
    data = serde.to_dict(withheld)
    assert data["items"] == "unknown" and data["ratio"] == "unknown"
    back = serde.from_dict(Outer, data)
    assert back.items == () and back.ratio is None and back.unknown == ("items", "ratio")
