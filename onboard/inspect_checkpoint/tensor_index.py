"""All tensors of a checkpoint grouped by name shape, built in one pass at C speed.

A 1T-parameter checkpoint has ~140k tensors but only ~100 distinct name shapes (`layers.#.mlp.experts.#.w1.weight`).
The analysis works on those groups: per-tensor work would cost more than reading the headers, and inspect must stay
within 1.2× of a bare header read (benchmarks/bench_inspect_local.py). The per-tensor steps below are `map`,
`str.translate`, `dict.setdefault` and `sum` over iterators — no Python-level loop body per tensor.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from itertools import compress, count
from operator import attrgetter, itemgetter

from onboard.inspect_checkpoint import tensor_names as tn
from onboard.inspect_checkpoint.checkpoint_types import DTYPE_BYTES, SafetensorsHeader, TensorInfo

_DIGITS = str.maketrans("0123456789", "##########")
# Masked digits that form a whole dotted component are indices; the rest (w1, fc2, …) belong to the name.
_RUNS = re.compile(r"(?<=\.)#+(?=\.|$)")


@dataclass(frozen=True)
class TensorGroup:
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


class TensorIndex:
    def __init__(self, groups: list[TensorGroup]) -> None:
        self.groups = groups
        self.total = sum(g.count for g in groups)

    # -- building ------------------------------------------------------------------------------------------------

    @classmethod
    def from_headers(cls, headers: Iterable[SafetensorsHeader]) -> TensorIndex:
        names: list[str] = []
        entries: list = []  # records with .dtype/.shape/.data_offsets: msgspec structs or TensorInfo
        bounds: list[tuple[int, str]] = []  # (end position in `names`, file) per header
        for h in headers:
            raw = getattr(h.tensors, "records", None)  # the lazy TensorMap: its decoded records, no TensorInfo objects
            source = raw if raw is not None else h.tensors
            names += source
            entries += source.values()
            bounds.append((len(names), h.file))
        return cls._build(names, entries, bounds)

    @classmethod
    def from_tensors(cls, tensors: Mapping[str, TensorInfo]) -> TensorIndex:
        names = list(tensors)
        entries = list(tensors.values())
        files = [t.file for t in entries]
        bounds = [(i + 1, f) for i, f in enumerate(files)]
        return cls._build(names, entries, bounds)

    @classmethod
    def _build(cls, names: list[str], entries: list, bounds: list[tuple[int, str]]) -> TensorIndex:
        import numpy as np  # bincount: per-group byte sums without a Python loop body per tensor

        if not names:
            return cls([])
        n = len(names)
        dtypes = list(map(attrgetter("dtype"), entries))
        offsets = list(map(attrgetter("data_offsets"), entries))
        # Group key: the name with digits masked. Translating one joined string is one C call.
        masked = "\n".join(names).translate(_DIGITS).split("\n")
        first_index: dict[str, int] = {}
        firsts = list(map(first_index.setdefault, masked, count()))  # each tensor → index of its group's first tensor
        ends = np.fromiter(map(itemgetter(1), offsets), np.int64, n)
        begins = np.fromiter(map(itemgetter(0), offsets), np.int64, n)
        first_arr = np.fromiter(firsts, np.int64, n)
        nbytes = (ends - begins).astype(np.float64)
        totals = np.bincount(first_arr, weights=nbytes)
        counts = np.bincount(first_arr)
        # A raw group is split when its dtypes are mixed (rare: one layer kept in higher precision) or when it
        # masked digits inside a name component (`w1`/`w3`, `fc1`/`fc2` share a masked key).
        codes = {d: i for i, d in enumerate(dict.fromkeys(dtypes))}
        dtype_arr = np.fromiter(map(codes.__getitem__, dtypes), np.int64, n)
        mixed = set(np.unique(first_arr[dtype_arr != dtype_arr[first_arr]]).tolist()) if len(codes) > 1 else set()
        ends_of_files = [b[0] for b in bounds]
        groups = []
        for key, i in first_index.items():
            inner = _inner_digit_positions(key)
            if i in mixed or inner:
                members = np.nonzero(first_arr == i)[0]
                member_names = [names[j] for j in members]
                digits = map(itemgetter(*inner), member_names) if inner else [()] * len(members)
                sub_first: dict[tuple, int] = {}
                sub_ids = list(map(sub_first.setdefault, zip(digits, dtype_arr[members].tolist()), count()))
                sub_arr = np.asarray(sub_ids, np.int64)
                sub_bytes = np.bincount(sub_arr, weights=nbytes[members])
                sub_counts = np.bincount(sub_arr)
                for k in sub_first.values():
                    j = int(members[k])
                    groups.append(TensorGroup(tn.template(names[j]), dtypes[j], int(sub_counts[k]), int(sub_bytes[k]),
                                              names[j], tuple(entries[j].shape),
                                              bounds[bisect_right(ends_of_files, j)][1]))  # fmt: skip
                continue
            groups.append(TensorGroup(_RUNS.sub("{}", key), dtypes[i], int(counts[i]), int(totals[i]), names[i],
                                      tuple(entries[i].shape), bounds[bisect_right(ends_of_files, i)][1]))  # fmt: skip
        index = cls(_merge(groups))
        index._names_list = names
        index._entries = entries
        index._firsts = firsts
        return index

    # -- queries -------------------------------------------------------------------------------------------------

    def names_of(self, groups: Iterable[TensorGroup]) -> list[str]:
        """Every tensor name in the given groups. Meant for small groups (per-layer tensors, not experts)."""
        return [name for name, _ in self.shapes_of(groups)]

    def shapes_of(self, groups: Iterable[TensorGroup]) -> list[tuple[str, tuple[int, ...]]]:
        """(name, shape) of every tensor in the given groups (small groups only, as names_of)."""
        groups = list(groups)
        names = getattr(self, "_names_list", None)
        if names is None or not groups:
            return [(g.first_name, g.first_shape) for g in groups]
        firsts_wanted = {m for g in groups for m in (g.members or (g.first_name,))}
        # The group id of a tensor is the position of its group's first tensor; find those positions once.
        ids = {i for i in set(self._firsts) if names[i] in firsts_wanted}
        picked = compress(zip(names, self._entries), map(ids.__contains__, self._firsts))
        return [(name, tuple(entry.shape)) for name, entry in picked]


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
        prev = merged.get(key)
        if prev is None:
            merged[key] = TensorGroup(g.template, g.dtype, g.count, g.nbytes, g.first_name, g.first_shape,
                                      g.first_file, (g.first_name,))  # fmt: skip
        else:
            merged[key] = TensorGroup(prev.template, prev.dtype, prev.count + g.count, prev.nbytes + g.nbytes,
                                      prev.first_name, prev.first_shape, prev.first_file,
                                      prev.members + (g.first_name,))  # fmt: skip
    return list(merged.values())
