"""Measure a real KV cache: run forwards with use_cache=True and weigh every cached tensor, layer by layer.

Two probes (batch 2): `short` tokens (below any window) and `long` = 2 * window + 3 tokens. Comparing the two
sorts each cached tensor into growing (bytes linear in tokens: full / MLA attention), capped (sliding or chunked
layers, which stop growing) and fixed state (conv / SSM / recurrent, independent of tokens).

Where transformers 5.x keeps the states:
  * `Cache.layers[i]`: DynamicLayer / DynamicSlidingWindowLayer (`keys`, `values`), LinearAttentionLayer
    (`conv_states`, `recurrent_states` dicts), hybrids with both, DummyLayer (nothing);
  * extra per-layer lists on the cache object (MiniMaxCache.linear_cache);
  * a returned list of stacked states (RWKV `state`: tensors [batch, hidden, layers]);
  * plain tensor attributes set on modules during the forward (RecurrentGemma's conv1d_state / recurrent_states).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

BATCH = 2
SHORT = 8
_OUTPUT_CACHE_KEYS = ("cache", "past_key_values", "cache_params", "state")


@dataclass
class Probe:
    """Bytes per cached tensor, keyed (layer index, tensor name), for one forward of `tokens` tokens."""

    tokens: int
    bytes: dict[tuple[int, str], int] = field(default_factory=dict)
    seq_len: dict[tuple[int, str], int] = field(default_factory=dict)  # dim -2 of keys/values
    dtypes: set[str] = field(default_factory=set)
    cache_class: str = ""
    layer_classes: dict[int, str] = field(default_factory=dict)

    def add(self, layer: int, name: str, tensor: Any) -> None:
        if tensor is None or not hasattr(tensor, "element_size") or tensor.dim() == 0:
            return
        self.bytes[(layer, name)] = self.bytes.get((layer, name), 0) + tensor.numel() * tensor.element_size()
        if name in ("keys", "values") and tensor.dim() >= 3:
            self.seq_len[(layer, name)] = tensor.shape[-2]
        self.dtypes.add(str(tensor.dtype).removeprefix("torch."))


def _plain_tensor_attrs(model: Any, layers: list[Any]) -> dict[tuple[int, str], Any]:
    """Tensors held as plain module attributes (not parameters/buffers) inside decoder layer i."""
    import torch

    found: dict[tuple[int, str], Any] = {}
    for i, layer in enumerate(layers):
        for mod_name, mod in layer.named_modules():
            for attr, value in vars(mod).items():
                if torch.is_tensor(value) and not attr.startswith("_"):
                    found[(i, f"{mod_name}.{attr}".lstrip("."))] = value
    return found


def _collect_cache(probe: Probe, cache: Any, num_layers: int) -> None:
    import torch

    probe.cache_class = type(cache).__name__
    if isinstance(cache, (list, tuple)) and cache and all(torch.is_tensor(t) for t in cache):
        # RWKV: k state tensors stacked over layers on the last dim.
        for k, stacked in enumerate(cache):
            for i in range(stacked.shape[-1]):
                probe.add(i, f"state[{k}]", stacked[..., i])
        return
    for i, layer in enumerate(getattr(cache, "layers", []) or []):
        probe.layer_classes[i] = type(layer).__name__
        for name, value in vars(layer).items():
            if name.startswith("_"):
                continue  # e.g. _sliding_window_tensor: bookkeeping, not cache memory
            if isinstance(value, dict):
                for key, item in value.items():
                    if torch.is_tensor(item):
                        probe.add(i, f"{name}[{key}]", item)
            elif torch.is_tensor(value):
                probe.add(i, name, value)
    for name, value in vars(cache).items():
        if name != "layers" and isinstance(value, list) and 0 < len(value) <= num_layers:
            for i, item in enumerate(value):
                if torch.is_tensor(item):
                    probe.add(i, name, item)


def run_probe(model: Any, layers: list[Any], tokens: int, vocab: int) -> Probe:
    """One forward of BATCH x `tokens` with use_cache=True; weigh everything the forward left cached."""
    import torch
    from transformers import DynamicCache

    probe = Probe(tokens=tokens)
    # Hold the tensors themselves, not their id(): once the forward frees an old state tensor, a new one can be
    # allocated at the same address, get the same id() and be missed (RecurrentGemma's states, seen as a flaky total).
    before = dict(_plain_tensor_attrs(model, layers))
    gen = torch.Generator().manual_seed(1234)
    ids = torch.randint(3, max(4, min(vocab, 1000)), (BATCH, tokens), generator=gen)
    with torch.no_grad():
        out = model(input_ids=ids, use_cache=True)
    cache = next((out[k] for k in _OUTPUT_CACHE_KEYS if k in out and out[k] is not None), None)
    if cache is None:
        # Some models (RecurrentGemma) build a cache internally but do not return it: hand them one.
        cache = DynamicCache(config=model.config)
        with torch.no_grad():
            model(input_ids=ids, use_cache=True, cache=cache)
    _collect_cache(probe, cache, len(layers))
    for key, tensor in _plain_tensor_attrs(model, layers).items():
        if before.get(key) is not tensor:
            probe.add(key[0], key[1], tensor)
    return probe


def _grows_from_prefix(short: Probe, long: Probe, key: tuple[int, str]) -> bool:
    """The cached length grows token for token, from more than the tokens given: a fixed prefix, not a cap."""
    a, b = short.seq_len.get(key), long.seq_len.get(key)
    return a is not None and b is not None and a > short.tokens and b - a == long.tokens - short.tokens


def fold_sublayers(probe: Probe, num_layers: int) -> Probe:
    """Cache layers beyond the decoder layers, k per decoder layer (LongCat-Flash: two attention sublayers with
    cache indices 2i and 2i+1), folded onto their decoder layer as `name#sublayer`; otherwise unchanged."""
    count = max((layer for layer, _ in probe.bytes), default=-1) + 1
    if count <= num_layers or count % num_layers:
        return probe
    k = count // num_layers
    folded = Probe(tokens=probe.tokens, dtypes=probe.dtypes, cache_class=probe.cache_class)
    for (layer, name), nbytes in probe.bytes.items():
        folded.bytes[(layer // k, f"{name}#{layer % k}")] = nbytes
    for (layer, name), length in probe.seq_len.items():
        folded.seq_len[(layer // k, f"{name}#{layer % k}")] = length
    folded.layer_classes = {layer // k: cls for layer, cls in probe.layer_classes.items()}
    return folded


def classify(short: Probe, long: Probe, num_layers: int) -> list[dict[str, Any]]:
    """Per layer: growing bytes/token, capped bytes and tokens, fixed state bytes (all per sequence)."""
    per_layer: list[dict[str, Any]] = []
    names: dict[int, set[str]] = defaultdict(set)
    for layer, name in set(short.bytes) | set(long.bytes):
        names[layer].add(name)
    for i in range(num_layers):
        row: dict[str, Any] = {
            "layer": i,
            "cache_layer_class": long.layer_classes.get(i),
            "kv_bytes_per_token": 0,
            "capped_bytes": 0,
            "capped_tokens": None,
            "state_bytes": 0,
            "tensors": {},
        }
        for name in sorted(names[i]):
            b_short = short.bytes.get((i, name), 0) // BATCH
            b_long = long.bytes.get((i, name), 0) // BATCH
            if b_short == b_long:
                kind = "state"
                row["state_bytes"] += b_long
            elif b_short * long.tokens == b_long * short.tokens:
                kind = "growing"
                row["kv_bytes_per_token"] += b_short // short.tokens
            elif _grows_from_prefix(short, long, (i, name)):
                # Every token cached after a fixed prefix (CPM-Ant prepends prompt_length learned prompt tokens):
                # the prefix is a fixed size per sequence, counted with the state.
                kind = "growing"
                per_token = (b_long - b_short) // (long.tokens - short.tokens)
                row["kv_bytes_per_token"] += per_token
                row["state_bytes"] += b_short - per_token * short.tokens
            else:
                kind = "capped"
                row["kv_bytes_per_token"] += b_short // short.tokens  # still below the cap at the short probe
                row["capped_bytes"] += b_long
                row["capped_tokens"] = long.seq_len.get((i, name), row["capped_tokens"])
            row["tensors"][name] = {"kind": kind, f"bytes@{short.tokens}": b_short, f"bytes@{long.tokens}": b_long}
        per_layer.append(row)
    return per_layer
