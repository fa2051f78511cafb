"""All tensors of a checkpoint grouped by name shape, built in one pass at C speed.

A 1T-parameter checkpoint has ~140k tensors but only ~100 distinct name shapes (`layers.#.mlp.experts.#.w1.weight`).
The analysis works on those groups: per-tensor work would cost more than reading the headers, and a whole-process
`onboard inspect` aims at 2.5× a bare header read (benchmarks/bench_inspect_local.py). The per-tensor steps below are
`map`, `str.translate`, `dict.setdefault`, `Counter` and `compress` over iterators — no Python-level loop body per
tensor, and no per-tensor list kept beyond each tensor's name and group id.

Indexes built apart (index_worker groups the last shards in a second process) are put together with `concat`,
which gives what one build over all the tensors gives; one crosses processes as an `IndexPart`.
"""

from __future__ import annotations

import re
from array import array
from bisect import bisect_right
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from itertools import accumulate, chain, compress, count, repeat
from operator import attrgetter, itemgetter, ne, sub
from typing import NamedTuple

import msgspec

from onboard.inspect_checkpoint import tensor_names as tn
from onboard.inspect_checkpoint.checkpoint_types import DTYPE_BYTES, SafetensorsHeader, TensorInfo

_DIGITS = str.maketrans("0123456789", "##########")
_DIGIT_BYTES = bytes.maketrans(b"0123456789", b"##########")
_CHUNK = 4096  # names masked per call
SMALL_GROUP = 1024  # groups this small (per-layer tensors, not experts) keep their positions once asked for
_DTYPE, _SHAPE, _OFFSETS = attrgetter("dtype"), attrgetter("shape"), attrgetter("data_offsets")
_BEGIN, _END = itemgetter(0), itemgetter(1)
# Masked digits that form a whole dotted component are indices; the rest (w1, fc2, …) belong to the name.
_RUNS = re.compile(r"(?<=\.)#+(?=\.|$)")


class TensorGroup(msgspec.Struct, frozen=True):
    """Tensors whose names differ only in their numbers (layer, expert) and that share a dtype."""

    template: str
    """Name with every number replaced by `{}`, multimodal wrapper prefix kept."""
    dtype: str
    count: int
    nbytes: int
    first_name: str
    first_shape: tuple[int, ...]
    first_file: str
    members: tuple[str, ...] = ()
    """First names of the raw groups merged here (`layers.9.x` and `layers.10.x` mask differently)."""

    @property
    def numel(self) -> int:
        per = DTYPE_BYTES.get(self.dtype)
        if not per:
            return 0
        n = int(self.nbytes / per)
        # MXFP4 weights are stored as U8 blocks holding two 4-bit values a byte.
        return n * 2 if self.dtype == "U8" and self.template.endswith("_blocks") else n


class IndexPart(msgspec.Struct, array_like=True):
    """A TensorIndex as one process hands it to another (index_worker: the shards read on a second core). The
    per-tensor data travels as three buffers, not 50k objects to build and free: the names end to end (UTF-8), the
    byte offset each ends at, and each tensor's group id. Decoded, they are views into the buffer the part was
    decoded from, not copies. Positions count from the part's first tensor."""

    groups: list[TensorGroup]
    order: list[tuple[str, int]]
    raw_firsts: dict[str, int]
    names: memoryview
    ends: memoryview  # int64s (array("q"))
    firsts: memoryview  # int64s
    counts: dict[int, int]
    id_shapes: dict[int, tuple[int, ...]]
    odd_shapes: dict[int, tuple[int, ...]]


class _PackedNames:
    """Names end to end (UTF-8) and the byte offset each ends at; a name is decoded when asked for."""

    __slots__ = ("_data", "_ends")

    def __init__(self, data: memoryview, ends: Sequence[int]) -> None:
        self._data, self._ends = data, ends

    def __len__(self) -> int:
        return len(self._ends)

    def __getitem__(self, p: int) -> str:
        return str(self._data[self._ends[p - 1] if p else 0 : self._ends[p]], "utf-8")

    def __iter__(self) -> Iterator[str]:
        return map(self.__getitem__, range(len(self._ends)))


class _Segment(NamedTuple):
    """Tensors built together (one build, or one process's part): their names and group ids, the ids counted from
    the segment's own first tensor (at `start` in the whole index), so putting parts together copies no list."""

    start: int
    names: Sequence[str] | _PackedNames
    firsts: Sequence[int]


class TensorIndex:
    def __init__(self, groups: list[TensorGroup]) -> None:
        self.groups = groups
        self.total = sum(g.count for g in groups)
        # Per tensor, for the name and shape queries (none in an index made of groups alone): its name and its group
        # id, the position of its raw group's first tensor. A raw group is one masked name with one dtype and the
        # same digits inside names (`w1` apart from `w3`): what becomes a group, or part of one once groups of other
        # digit counts (`layers.9` and `layers.10`) are merged. A group's `members` name its raw groups' firsts.
        self._segments: list[_Segment] = []
        self._starts: list[int] = []
        self._counts: dict[int, int] = {}  # tensors per group id
        self._first_of: dict[str, int] = {}  # a raw group's first tensor's name -> its group id
        self._id_shapes: dict[int, tuple[int, ...]] = {}  # group id -> the shape of its tensors not in _odd_shapes
        self._odd_shapes: dict[int, tuple[int, ...]] = {}  # position -> shape, where unlike its masked name's first
        self._small: dict[int, list[int]] | None = None
        # What concat needs to order groups as one build over all the tensors would: each masked name's first
        # position, and per group the masked name and first position of the first raw group merged into it.
        self._raw_firsts: dict[str, int] = {}
        self._order: list[tuple[str, int]] = []

    # -- building ------------------------------------------------------------------------------------------------

    @classmethod
    def from_headers(cls, headers: Iterable[SafetensorsHeader]) -> TensorIndex:
        names: list[str] = []
        entries: list = []  # records with .dtype/.shape/.data_offsets: msgspec structs or TensorInfo
        bounds: list[tuple[int, str]] = []  # (end position in `names`, file) per header
        validated = True
        for h in headers:
            raw = getattr(h.tensors, "records", None)  # the lazy TensorMap: its decoded records, no TensorInfo objects
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
    def concat(cls, parts: Iterable[TensorIndex]) -> TensorIndex:
        """The index of the parts' tensors one after another: the groups, in the order, that one build over all of
        them gives. (A group's `members` also name its first tensor in each part: the queries look tensors up by
        those.)"""
        parts = [p for p in parts if p.total]
        if len(parts) <= 1:
            return parts[0] if parts else cls([])
        index = cls([])
        keyed: list[tuple[tuple[int, int], TensorGroup, tuple[str, int]]] = []
        off = 0
        for part in parts:
            index._segments += [seg._replace(start=seg.start + off) for seg in part._segments]
            index._counts.update({i + off: n for i, n in part._counts.items()})
            index._first_of.update({name: i + off for name, i in part._first_of.items()})
            index._id_shapes.update({i + off: shape for i, shape in part._id_shapes.items()})
            index._odd_shapes.update({p + off: shape for p, shape in part._odd_shapes.items()})
            for key, i in part._raw_firsts.items():
                index._raw_firsts.setdefault(key, i + off)
            # A group sorts where one build would have met it: at its masked name's first tensor in any part, then
            # by its own first tensor (dtypes of one masked name split in the order they first appear).
            keyed += [((index._raw_firsts[key], own + off), g, (key, own + off))
                      for g, (key, own) in zip(part.groups, part._order, strict=True)]  # fmt: skip
            off += part.total
        keyed.sort(key=itemgetter(0))
        index.groups, index._order = _merge([g for _, g, _ in keyed], [o for _, _, o in keyed])
        index.total = off
        index._starts = [seg.start for seg in index._segments]
        return index

    def to_part(self) -> IndexPart:
        names = [name for seg in self._segments for name in seg.names]
        firsts = array("q")
        for seg in self._segments:
            firsts.extend(map(seg.start.__add__, seg.firsts) if seg.start else seg.firsts)
        text = "".join(names)
        data = text.encode()
        # ASCII names (the usual case): a name's bytes are its characters.
        lengths = map(len, names) if len(data) == len(text) else map(len, map(str.encode, names))
        ends = array("q", accumulate(lengths))
        return IndexPart(self.groups, self._order, self._raw_firsts, memoryview(data), memoryview(ends),
                         memoryview(firsts), dict(self._counts), self._id_shapes, self._odd_shapes)  # fmt: skip

    @classmethod
    def from_part(cls, part: IndexPart) -> TensorIndex:
        """The index a part describes; ValueError if its buffers disagree with its counts."""
        ends, firsts = part.ends.cast("B").cast("q"), part.firsts.cast("B").cast("q")
        index = cls(part.groups)
        counted = len(ends) == len(firsts) == index.total == sum(part.counts.values())
        in_range = all(0 <= i < index.total for i in chain(part.counts, part.id_shapes, part.odd_shapes))
        if not counted or not in_range or (ends and ends[-1] != len(part.names)):
            raise ValueError("an index part whose buffers disagree with its counts")
        names = _PackedNames(part.names, ends)
        index._segments, index._starts = [_Segment(0, names, firsts)], [0]
        index._counts, index._id_shapes, index._odd_shapes = part.counts, part.id_shapes, part.odd_shapes
        index._first_of = {names[i]: i for i in part.id_shapes}
        index._raw_firsts, index._order = part.raw_firsts, part.order
        return index

    @classmethod
    def _build(
        cls, names: list[str], entries: list, bounds: list[tuple[int, str]], sized_by_shape: bool = False
    ) -> TensorIndex:
        """`sized_by_shape`: every record's bytes are known to be its shape × its dtype's width (parsed headers,
        checked tensor by tensor), so tensors of one dtype and one shape have one size."""
        if not names:
            return cls([])
        # Group key: the name with digits masked, one C call per chunk of names (chunks keep the joined text small:
        # no multi-megabyte buffer to allocate and fault in). Only the ~100 distinct keys are kept.
        first_index: dict[str, int] = {}
        firsts: list[int] = []  # each tensor → index of its group's first tensor
        for start in range(0, len(names), _CHUNK):
            chunk = names[start : start + _CHUNK]
            joined = "\n".join(chunk)
            # ASCII names (the usual case) are masked as bytes: a 256-entry table, not a lookup per character.
            text = joined.encode().translate(_DIGIT_BYTES).decode() if joined.isascii() else joined.translate(_DIGITS)
            masked = text.split("\n")
            if len(masked) != len(chunk):  # a name holding a newline (legal JSON): mask one by one
                masked = [name.translate(_DIGITS) for name in chunk]
            firsts += map(first_index.setdefault, masked, count(start))
        counts = Counter(firsts)
        # Most groups hold tensors of one dtype and one size (every layer's q_proj, every expert's w1): their bytes
        # are count × the first one's. Only the groups where a tensor differs from its first are summed member by
        # member, and split by dtype when their dtypes are mixed (rare: one layer kept in higher precision).
        group_ids = first_index.values()
        first_dtype = {i: entries[i].dtype for i in group_ids}
        id_shapes = {i: tuple(entries[i].shape) for i in group_ids}
        first_size = dict(zip(group_ids, _sizes(map(entries.__getitem__, group_ids))))
        mixed = _differs_from_first(map(_DTYPE, entries), firsts, first_dtype)
        # The tensors shaped unlike their masked name's first (few: one wider layer); the shape queries take every
        # other tensor's shape from that first. Comparing shapes is one C-level step per tensor.
        odd = list(compress(count(), map(ne, map(_SHAPE, entries), map(id_shapes.__getitem__, firsts))))
        if sized_by_shape:  # one dtype and one shape make one size
            uneven = {firsts[p] for p in odd}
        else:
            uneven = _differs_from_first(_sizes(entries), firsts, first_size)
        ends_of_files = [b[0] for b in bounds]

        def group(template: str, first: int, n: int, size: int) -> TensorGroup:
            e = entries[first]
            return TensorGroup(template, e.dtype, n, size, names[first], tuple(e.shape),
                               bounds[bisect_right(ends_of_files, first)][1])  # fmt: skip

        groups: list[TensorGroup] = []
        order: list[tuple[str, int]] = []  # per group: its masked name and its first tensor's position
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
                order.append((key, i))
                continue
            # A raw group is split when its dtypes are mixed or when it masked digits inside a name component
            # (`w1`/`w3`, `fc1`/`fc2` share a masked key).
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
                order.append((key, positions[0]))
        index = cls([])
        index.groups, index._order = _merge(groups, order)
        index.total = len(names)
        index._segments, index._starts, index._counts = [_Segment(0, names, firsts)], [0], counts
        index._first_of = {names[i]: i for i in id_shapes}
        index._id_shapes = id_shapes
        index._odd_shapes = {p: tuple(entries[p].shape) for p in odd}
        index._raw_firsts = first_index
        return index

    # -- queries -------------------------------------------------------------------------------------------------

    def names_of(self, groups: Iterable[TensorGroup]) -> list[str]:
        """Every tensor name in the given groups. Meant for small groups (per-layer tensors, not experts)."""
        return [name for name, _ in self.shapes_of(groups)]

    def shapes_of(self, groups: Iterable[TensorGroup]) -> list[tuple[str, tuple[int, ...]]]:
        """(name, shape) of every tensor in the given groups (small groups only, as names_of)."""
        groups = list(groups)
        if not self._segments or not groups:
            return [(g.first_name, g.first_shape) for g in groups]
        firsts_wanted = {m for g in groups for m in (g.members or (g.first_name,))}
        # The group id of a tensor is the position of its group's first tensor; find those positions once.
        ids = {self._first_of[n] for n in firsts_wanted if n in self._first_of}
        small = self._small_group_positions()
        if ids <= small.keys():  # per-layer groups, asked for again and again: positions listed once
            found: Iterable[tuple[int, int]] = sorted((p, i) for i in ids for p in small[i])
        else:
            found = self._find(ids)
        odd, id_shapes, starts, segments = self._odd_shapes, self._id_shapes, self._starts, self._segments
        out = []
        for p, i in found:
            seg = segments[bisect_right(starts, p) - 1]
            out.append((seg.names[p - seg.start], odd[p] if p in odd else id_shapes[i]))
        return out

    def _find(self, ids: set[int]) -> Iterator[tuple[int, int]]:
        """(position, group id) of each tensor in the groups `ids`, in order: one C-level pass per segment."""
        for seg in self._segments:
            local = {i - seg.start for i in ids if seg.start <= i < seg.start + len(seg.firsts)}
            if local:
                firsts = seg.firsts
                for p in compress(count(), map(local.__contains__, firsts)):
                    yield seg.start + p, seg.start + firsts[p]

    def _small_group_positions(self) -> dict[int, list[int]]:
        """Group id -> positions of its tensors, for the groups of at most SMALL_GROUP tensors (one pass over all
        tensors, the first time it is needed)."""
        if self._small is None:
            wanted = {i for i, n in self._counts.items() if n <= SMALL_GROUP}
            small = self._small = {i: [] for i in wanted}
            for seg in self._segments:  # _find's pass, without a tuple per tensor found (~10k here)
                start, firsts = seg.start, seg.firsts
                local = {i - start for i in wanted if start <= i < start + len(firsts)}
                for p in compress(count(), map(local.__contains__, firsts)):
                    small[start + firsts[p]].append(start + p)
        return self._small


def positions_by_key(keys: list) -> dict:
    """key -> positions holding it (ascending), in order of first appearance. The per-element steps run in C (a
    count, a stable sort of the positions by key, slices), so 100k tensors cost no Python loop body each; keys must
    be sortable among themselves."""
    counts = Counter(keys)
    order = sorted(range(len(keys)), key=keys.__getitem__)
    by_key, start = {}, 0
    for key in sorted(counts):
        by_key[key] = order[start : start + counts[key]]
        start += counts[key]
    return {key: by_key[key] for key in counts}  # a Counter keeps first-appearance order


def _sizes(entries: Iterable) -> Iterator[int]:
    """`end - begin` of each record's data_offsets, computed in C."""
    offsets = list(map(_OFFSETS, entries))
    return map(sub, map(_END, offsets), map(_BEGIN, offsets))


def _differs_from_first(values: Iterable, firsts: list[int], of_first: dict[int, object]) -> set[int]:
    """The groups (by first position) holding a value unlike their first one's (`of_first`), compared in C."""
    return set(compress(firsts, map(ne, values, map(of_first.__getitem__, firsts))))


def _inner_digit_positions(key: str) -> tuple[int, ...]:
    """Positions of masked digits that are part of a word (`w#`, `fc#`), not a whole dotted index."""
    if "#" not in key:
        return ()
    whole = {p for m in _RUNS.finditer(key) for p in range(m.start(), m.end())}
    return tuple(p for p, ch in enumerate(key) if ch == "#" and p not in whole)


def _merge(groups: list[TensorGroup], order: list[tuple[str, int]]) -> tuple[list[TensorGroup], list[tuple[str, int]]]:
    """One group per (template, dtype): raw groups differ when indices have different digit counts. Each merged
    group keeps the `order` entry of the first group merged into it."""
    merged: dict[tuple[str, str], TensorGroup] = {}
    first_order: dict[tuple[str, str], tuple[str, int]] = {}
    for g, where in zip(groups, order, strict=True):
        key = (g.template, g.dtype)
        members = g.members or (g.first_name,)
        prev = merged.get(key)
        if prev is None:
            merged[key] = TensorGroup(g.template, g.dtype, g.count, g.nbytes, g.first_name, g.first_shape,
                                      g.first_file, members)  # fmt: skip
            first_order[key] = where
        else:
            merged[key] = TensorGroup(prev.template, prev.dtype, prev.count + g.count, prev.nbytes + g.nbytes,
                                      prev.first_name, prev.first_shape, prev.first_file,
                                      prev.members + members)  # fmt: skip
    return list(merged.values()), list(first_order.values())
