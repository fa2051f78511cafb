"""All tensors of a checkpoint grouped by name shape (`layers.#.mlp.experts.#.w1.weight`), built at C speed.

A large checkpoint has ~140k tensors but ~100 name shapes, and the analysis works on the groups. The per-tensor steps
are `map`, `str.translate`, `Counter` and `compress` over iterators: no Python loop body per tensor.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from itertools import compress, count, repeat
from operator import attrgetter, itemgetter, ne, sub

import msgspec

from onboard.inspect_checkpoint import tensor_names as tn
from onboard.inspect_checkpoint.checkpoint_types import DTYPE_BYTES, SafetensorsHeader, TensorInfo

_DIGITS = str.maketrans("0123456789", "##########")
_DIGIT_BYTES = bytes.maketrans(b"0123456789", b"##########")
_CHUNK = 4096  # names masked per call: no multi-megabyte joined text
SMALL_GROUP = 1024  # groups this small (per-layer tensors, not experts) keep their positions once asked for
_DTYPE, _SHAPE, _OFFSETS = attrgetter("dtype"), attrgetter("shape"), attrgetter("data_offsets")
_BEGIN, _END = itemgetter(0), itemgetter(1)
# Masked digits that form a whole dotted component are indices; the rest (w1, fc2, …) belong to the name.
_RUNS = re.compile(r"(?<=\.)#+(?=\.|$)")


class TensorGroup(msgspec.Struct, frozen=True):
    """Tensors whose names differ only in their numbers (layer, expert) and that share a dtype."""

    template: str  # every number replaced by `{}`, multimodal wrapper prefix kept
    dtype: str
    count: int
    nbytes: int
    first_name: str
    first_shape: tuple[int, ...]
    first_file: str
    members: tuple[str, ...] = ()  # first names of the raw groups merged here (`layers.9.x`, `layers.10.x`)

    @property
    def numel(self) -> int:
        per = DTYPE_BYTES.get(self.dtype)
        if not per:
            return 0
        n = int(self.nbytes / per)
        # MXFP4 weights are stored as U8 blocks holding two 4-bit values a byte.
        return n * 2 if self.dtype == "U8" and self.template.endswith("_blocks") else n


class TensorIndex:
    def __init__(self, groups: list[TensorGroup]) -> None:
        self.groups = groups
        self.total = sum(g.count for g in groups)
        # Per tensor, for the name and shape queries: its name and its group id, the position of its raw group's
        # first tensor. A raw group is one masked name, one dtype and the same digits inside names (`w1` apart from
        # `w3`); raw groups of other digit counts (`layers.9`, `layers.10`) merge into one group.
        self._names: Sequence[str] = ()
        self._firsts: list[int] = []
        self._counts: dict[int, int] = {}  # tensors per group id
        self._first_of: dict[str, int] = {}  # a raw group's first tensor's name -> its group id
        self._id_shapes: dict[int, tuple[int, ...]] = {}  # group id -> the shape of its tensors not in _odd_shapes
        self._odd_shapes: dict[int, tuple[int, ...]] = {}  # position -> shape, where unlike its masked name's first
        self._small: dict[int, list[int]] | None = None

    # -- building ------------------------------------------------------------------------------------------------

    @classmethod
    def from_headers(cls, headers: Iterable[SafetensorsHeader]) -> TensorIndex:
        names: list[str] = []
        entries: list = []  # records with .dtype/.shape/.data_offsets: msgspec structs or TensorInfo
        bounds: list[tuple[int, str]] = []  # (end position in `names`, file) per header
        validated = True
        for h in headers:
            raw = getattr(h.tensors, "records", None)  # a TensorMap's decoded records: no TensorInfo objects
            validated = validated and raw is not None
            source = raw if raw is not None else h.tensors
            names += source
            entries += source.values()
            bounds.append((len(names), h.file))
        return cls._build(names, entries, bounds, sized_by_shape=validated)

    @classmethod
    def from_tensors(cls, tensors: Mapping[str, TensorInfo]) -> TensorIndex:
        names = list(tensors)
        entries = list(tensors.values())
        files = [t.file for t in entries]
        bounds = [(i + 1, f) for i, f in enumerate(files)]
        return cls._build(names, entries, bounds)

    @classmethod
    def _build(
        cls, names: list[str], entries: list, bounds: list[tuple[int, str]], sized_by_shape: bool = False
    ) -> TensorIndex:
        """`sized_by_shape`: every record's bytes are its shape × its dtype's width (validated headers)."""
        if not names:
            return cls([])
        # Group key: the name with digits masked, one C call per chunk of names.
        first_index: dict[str, int] = {}
        firsts: list[int] = []  # each tensor → index of its group's first tensor
        for start in range(0, len(names), _CHUNK):
            chunk = names[start : start + _CHUNK]
            joined = "\n".join(chunk)
            text = joined.encode().translate(_DIGIT_BYTES).decode() if joined.isascii() else joined.translate(_DIGITS)
            masked = text.split("\n")
            if len(masked) != len(chunk):  # a name holding a newline (legal JSON): mask one by one
                masked = [name.translate(_DIGITS) for name in chunk]
            firsts += map(first_index.setdefault, masked, count(start))
        counts = Counter(firsts)
        # Most groups hold tensors of one dtype and one size: their bytes are count × the first one's. Only groups
        # where a tensor differs from its first are summed member by member, and split by dtype when mixed.
        group_ids = first_index.values()
        first_dtype = {i: entries[i].dtype for i in group_ids}
        id_shapes = {i: tuple(entries[i].shape) for i in group_ids}
        first_size = dict(zip(group_ids, _sizes(map(entries.__getitem__, group_ids))))
        mixed = _differs_from_first(map(_DTYPE, entries), firsts, first_dtype)
        # Tensors shaped unlike their masked name's first (few); shape queries take every other one's from the first.
        odd = list(compress(count(), map(ne, map(_SHAPE, entries), map(id_shapes.__getitem__, firsts))))
        if sized_by_shape:  # one dtype and one shape make one size
            uneven = {firsts[p] for p in odd}
        else:
            uneven = _differs_from_first(_sizes(entries), firsts, first_size)
        ends_of_files = [b[0] for b in bounds]

        def group(template: str, first: int, n: int, size: int) -> TensorGroup:
            e = entries[first]
            return TensorGroup(
                template, e.dtype, n, size, names[first], tuple(e.shape), bounds[bisect_right(ends_of_files, first)][1]
            )

        groups: list[TensorGroup] = []
        members_of: dict | None = None
        for key, i in first_index.items():
            inner = _inner_digit_positions(key)
            if i not in mixed and not inner:
                if i in uneven:
                    members_of = members_of or positions_by_key(firsts)
                    size = sum(_sizes(map(entries.__getitem__, members_of[i])))
                else:
                    size = counts[i] * first_size[i]
                groups.append(group(_RUNS.sub("{}", key), i, counts[i], size))
                continue
            # Split a raw group with mixed dtypes or digits inside a name component (`w1`/`w3` share a masked key).
            members_of = members_of or positions_by_key(firsts)
            members = members_of[i]
            member_names = list(map(names.__getitem__, members))
            digits = map(itemgetter(*inner), member_names) if inner else repeat(())
            sub_keys = list(zip(digits, map(_DTYPE, map(entries.__getitem__, members))))
            for sub_members in positions_by_key(sub_keys).values():
                positions = list(map(members.__getitem__, sub_members))
                size = sum(_sizes(map(entries.__getitem__, positions)))
                if positions[0] != i:  # a raw group of its own: its tensors take its first position as their id
                    for p in positions:
                        firsts[p] = positions[0]
                    counts[positions[0]], counts[i] = len(positions), counts[i] - len(positions)
                    id_shapes[positions[0]] = id_shapes[i]  # what the odd shapes were judged against
                groups.append(group(tn.template(names[positions[0]]), positions[0], len(positions), size))
        index = cls(_merge(groups))
        index._names, index._firsts, index._counts = names, firsts, counts
        index._first_of = {names[i]: i for i in id_shapes}
        index._id_shapes = id_shapes
        index._odd_shapes = {p: tuple(entries[p].shape) for p in odd}
        return index

    # -- queries -------------------------------------------------------------------------------------------------

    def names_of(self, groups: Iterable[TensorGroup]) -> list[str]:
        """Every tensor name in the given groups. Meant for small groups (per-layer tensors, not experts)."""
        return [name for name, _ in self.shapes_of(groups)]

    def shapes_of(self, groups: Iterable[TensorGroup]) -> list[tuple[str, tuple[int, ...]]]:
        """(name, shape) of every tensor in the given groups (small groups only, as names_of)."""
        groups = list(groups)
        if not self._firsts or not groups:
            return [(g.first_name, g.first_shape) for g in groups]
        firsts_wanted = {m for g in groups for m in (g.members or (g.first_name,))}
        ids = {self._first_of[n] for n in firsts_wanted if n in self._first_of}
        small = self._small_group_positions()
        if ids <= small.keys():  # per-layer groups, asked for again and again: positions listed once
            found: Iterable[tuple[int, int]] = sorted((p, i) for i in ids for p in small[i])
        else:
            found = self._find(ids)
        odd, id_shapes, names = self._odd_shapes, self._id_shapes, self._names
        return [(names[p], odd[p] if p in odd else id_shapes[i]) for p, i in found]

    def _find(self, ids: set[int]) -> Iterator[tuple[int, int]]:
        """(position, group id) of each tensor in the groups `ids`, in order: one C-level pass."""
        firsts = self._firsts
        for p in compress(count(), map(ids.__contains__, firsts)):
            yield p, firsts[p]

    def _small_group_positions(self) -> dict[int, list[int]]:
        """Group id -> positions of its tensors, for groups of at most SMALL_GROUP tensors (built on first use)."""
        if self._small is None:
            wanted = {i for i, n in self._counts.items() if n <= SMALL_GROUP}
            small = self._small = {i: [] for i in wanted}
            firsts = self._firsts
            for p in compress(count(), map(wanted.__contains__, firsts)):
                small[firsts[p]].append(p)
        return self._small


def positions_by_key(keys: list) -> dict:
    """key -> positions holding it (ascending), in order of first appearance, with no Python step per element; keys
    must be sortable among themselves."""
    counts = Counter(keys)
    order = sorted(range(len(keys)), key=keys.__getitem__)
    by_key, start = {}, 0
    for key in sorted(counts):
        by_key[key] = order[start : start + counts[key]]
        start += counts[key]
    return {key: by_key[key] for key in counts}  # a Counter keeps first-appearance order


def _sizes(entries: Iterable) -> Iterator[int]:
    offsets = list(map(_OFFSETS, entries))
    return map(sub, map(_END, offsets), map(_BEGIN, offsets))


def _differs_from_first(values: Iterable, firsts: list[int], of_first: dict[int, object]) -> set[int]:
    """The groups (by first position) holding a value unlike their first one's (`of_first`)."""
    return set(compress(firsts, map(ne, values, map(of_first.__getitem__, firsts))))


def _inner_digit_positions(key: str) -> tuple[int, ...]:
    """Positions of masked digits that are part of a word (`w#`, `fc#`), not a whole dotted index."""
    if "#" not in key:
        return ()
    whole = {p for m in _RUNS.finditer(key) for p in range(m.start(), m.end())}
    return tuple(p for p, ch in enumerate(key) if ch == "#" and p not in whole)


def _merge(groups: list[TensorGroup]) -> list[TensorGroup]:
    """One group per (template, dtype): raw groups differ when indices have different digit counts."""
    merged: dict[tuple[str, str], TensorGroup] = {}
    for g in groups:
        key = (g.template, g.dtype)
        members = g.members or (g.first_name,)
        prev = merged.get(key)
        if prev is None:
            merged[key] = msgspec.structs.replace(g, members=members)
        else:
            count, nbytes = prev.count + g.count, prev.nbytes + g.nbytes
            merged[key] = msgspec.structs.replace(prev, count=count, nbytes=nbytes, members=prev.members + members)
    return list(merged.values())


def language_view(index: TensorIndex) -> dict[str, TensorInfo]:
    """Language-model templates (towers dropped, wrapper prefixes removed) -> the first tensor of each group: what
    architecture checks look at instead of every name."""
    out: dict[str, TensorInfo] = {}
    for g in index.groups:
        if tn.tower_of(g.template) is None:
            key = tn.strip_lm_prefix(g.template)
            out.setdefault(key, TensorInfo(g.first_name, g.dtype, g.first_shape, (0, g.nbytes), g.first_file))
    return out


def shape_of(lm: dict[str, TensorInfo] | None, *needles: str) -> tuple[int, ...] | None:
    for name, t in (lm or {}).items():
        if all(n in name for n in needles):
            return t.shape
    return None
