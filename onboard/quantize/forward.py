"""The reference run over the prompt suite, and reruns of a (partly quantized) model scored against it.

The reference run records each decoder layer's output (a rerun resumes at the quantized unit's layer) and each unit
module's inputs and output (`module_delta` reruns one module alone). The score: KL(reference || candidate) over the
full vocabulary in float32, averaged over every teacher-forced position, and the top-1 agreement.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache
from typing import Any

from onboard.comparator import DTYPE_COLUMNS, threshold
from onboard.names.tensors import LAYER_CONTAINERS

_LAYER_LIST = re.compile(rf"(?:^|\.)(?:{'|'.join(LAYER_CONTAINERS)})$")
KL_CHUNK_BYTES = 2 << 20
"""Float32 log-probabilities per KL chunk: small enough for the chunk's arrays to stay in cache across the KL's
passes."""
REFERENCE_CACHE_BYTES = 1 << 30
"""The reference's log-probabilities, probabilities and argmax are kept while they fit (8 bytes per position and
vocabulary entry); past that, each score recomputes them."""


@dataclass(frozen=True)
class Score:
    kl: float
    top1: float
    """Fraction of positions whose argmax equals the reference's."""
    positions: int


@cache
def hold_freed_memory() -> bool:
    """Ask glibc to serve large temporaries from its heap and keep what is freed, for the rest of the process: a
    sweep allocates and frees megabyte tensors thousands of times, and by default each is mapped anew and zero-filled
    by the kernel. False (nothing changed) where the C library is not glibc."""
    import ctypes
    import ctypes.util

    name = ctypes.util.find_library("c")
    try:
        mallopt = ctypes.CDLL(name).mallopt if name else None
    except (OSError, AttributeError):  # not loadable, or a C library without mallopt (musl, macOS)
        return False
    if mallopt is None:
        return False
    # M_MMAP_THRESHOLD (-3), M_TRIM_THRESHOLD (-1), M_TOP_PAD (-2): mallopt's parameter numbers in malloc.h.
    return all(mallopt(option, value) == 1 for option, value in ((-3, 1 << 30), (-1, 1 << 31), (-2, 1 << 28)))


def decoder_layers(model: Any) -> list[Any]:
    """The decoder layers (the longest ModuleList named after a layer container), in forward order."""
    import torch

    best: list[Any] = []
    for name, module in model.named_modules():
        if isinstance(module, torch.nn.ModuleList) and _LAYER_LIST.search(name) and len(module) > len(best):
            best = list(module)
    return best


def _main(output: Any) -> Any:
    return output[0] if isinstance(output, (tuple, list)) else output


class Runner:
    """A model and the prompt suite (token-id sequences); `hf`: transformers' calling convention, else an adapter."""

    def __init__(self, model: Any, sequences: Sequence[Sequence[int]], *, hf: bool) -> None:
        self.model, self.hf = model, hf
        hold_freed_memory()
        self.sequences = [tuple(s) for s in sequences if len(s) >= 2]
        self.layers = decoder_layers(model)
        self.positions = sum(len(s) - 1 for s in self.sequences)
        self._reference: list[Any] = []
        self._reference_kept: list[list[tuple[Any, Any, Any]]] = []
        self._layer_out: list[list[Any]] = [[] for _ in self.layers]
        self._module_io: dict[int, list[tuple[tuple, dict, Any]]] = {}
        self._joined: dict[int, tuple[Any, Any]] = {}  # module id -> (inputs, outputs) of every prompt, joined
        self.input_peaks: dict[int, list[float]] = {}
        """id(module) -> [max |x|, sum x^2, count] of everything it multiplied (activation outliers)."""
        self.forward_seconds = 0.0
        """One plain forward over the suite: the unit of the sweep's cost."""

    def _logits(self, ids: Any) -> Any:
        if self.hf:
            return self.model(input_ids=ids, use_cache=False).logits[0]
        return self.model(ids)[0]

    def _ids(self, seq: Sequence[int]) -> Any:
        import torch

        return torch.tensor([list(seq)], device=next(self.model.parameters()).device)

    def record_reference(self, matmul_modules: Sequence[Any], unit_modules: Sequence[Any]) -> None:
        """Run the reference once with hooks, then once more without (timing)."""
        import torch

        handles = []
        for kept, layer in zip(self._layer_out, self.layers):
            handles.append(layer.register_forward_hook(lambda _m, _a, out, kept=kept: kept.append(out)))
        for module in unit_modules:
            calls = self._module_io.setdefault(id(module), [])
            hook = lambda _m, args, kwargs, out, calls=calls: calls.append((args, kwargs, out))  # noqa: E731
            handles.append(module.register_forward_hook(hook, with_kwargs=True))
        handles += [m.register_forward_pre_hook(self._record_input(id(m))) for m in matmul_modules]
        try:
            with torch.no_grad():
                for seq in self.sequences:
                    self._reference.append(self._logits(self._ids(seq))[:-1].detach())
        finally:
            for handle in handles:
                handle.remove()
        self._join_token_wise(unit_modules)
        if sum(r.numel() for r in self._reference) * 8 <= REFERENCE_CACHE_BYTES:
            self._reference_kept = [list(_reference_chunks(r)) for r in self._reference]
        self.time_forward()

    def time_forward(self, repeats: int = 1) -> float:
        """forward_seconds: the median of `repeats` plain forwards over the suite."""
        import statistics

        import torch

        samples = []
        with torch.no_grad():
            for _ in range(max(repeats, 1)):
                start = time.perf_counter()
                for seq in self.sequences:
                    self._logits(self._ids(seq))
                samples.append(time.perf_counter() - start)
        self.forward_seconds = statistics.median(samples)
        return self.forward_seconds

    def _record_input(self, key: int) -> Any:
        def hook(_module: Any, args: tuple) -> None:
            if not args or not hasattr(args[0], "is_floating_point") or not args[0].is_floating_point():
                return
            x = args[0].detach().float()
            entry = self.input_peaks.setdefault(key, [0.0, 0.0, 0.0])
            entry[0] = max(entry[0], float(x.abs().max()))
            entry[1] += float((x * x).sum())
            entry[2] += x.numel()

        return hook

    def input_outlier(self, module: Any) -> float | None:
        """max |x| / rms(x) of what `module` multiplied in the reference run (None when it never ran)."""
        entry = self.input_peaks.get(id(module))
        if not entry or not entry[2] or not entry[1]:
            return None
        return entry[0] / (entry[1] / entry[2]) ** 0.5

    @contextmanager
    def _resume_at(self, start: int, seq_index: int) -> Iterator[None]:
        """Layers before `start` return what they returned in the reference run (instance `forward` override)."""
        replaced = []
        try:
            for i in range(min(start, len(self.layers))):
                output = self._layer_out[i][seq_index]
                self.layers[i].forward = lambda *_a, _out=output, **_k: _out
                replaced.append(self.layers[i])
            yield
        finally:
            for layer in replaced:
                del layer.forward

    def score(self, start_layer: int = 0) -> Score:
        """KL and top-1 agreement of the model as it is now, resuming at `start_layer` (0: a full forward)."""
        import torch

        total_kl, agree = 0.0, 0
        with torch.no_grad():
            for index, seq in enumerate(self.sequences):
                with self._resume_at(start_layer, index):
                    logits = self._logits(self._ids(seq))[:-1]
                kept = self._reference_kept[index] if self._reference_kept else None
                kl, same = kl_top1(self._reference[index], logits, kept)
                total_kl, agree = total_kl + kl, agree + same
        n = max(self.positions, 1)
        return Score(total_kl / n, agree / n, self.positions)

    def module_delta(self, module: Any, per_token: bool = True) -> float:
        """Sum of squared changes of `module`'s output (one of record_reference's unit_modules), rerun alone from its
        reference inputs. `per_token`: no rounding in the run depends on other tokens (no per-tensor activation
        scale), so a token-wise module runs once over every prompt's tokens joined (_join_token_wise)."""
        import torch

        energy = 0.0
        with torch.no_grad():
            joined = self._joined.get(id(module)) if per_token else None
            if joined is not None:
                new = _main(module(joined[0])).float()
                return float(((new - joined[1].float()) ** 2).sum())
            for args, kwargs, output in self._module_io.get(id(module), []):
                new = _main(module(*args, **kwargs)).float()
                energy += float(((new - _main(output).float()) ** 2).sum())
        return energy

    def _join_token_wise(self, modules: Sequence[Any]) -> None:
        """Join the recorded inputs and outputs of each module that maps every token on its own along the positions,
        so an error energy runs it once over all prompts. Checked, not assumed from the type: run once on the joined
        inputs, each token's output must be within the comparator's `token_wise` bound of its recorded one (a token
        mixed with its neighbours misses by far more). The per-prompt records become views of the joined tensors."""
        import torch

        for module in modules:
            calls = self._module_io.get(id(module), [])
            if len(calls) < 2 or any(
                len(args) != 1 or kwargs or not torch.is_tensor(args[0]) or args[0].dim() < 2
                for args, kwargs, _ in calls
            ):
                continue
            outputs = [_main(output) for _, _, output in calls]
            if any(
                not torch.is_tensor(o) or o.shape[:-1] != args[0].shape[:-1] for o, (args, _, _) in zip(outputs, calls)
            ):
                continue
            x = torch.cat([args[0] for args, _, _ in calls], dim=-2)
            reference = torch.cat(outputs, dim=-2)
            with torch.no_grad():
                got = _main(module(x))
            if not torch.is_tensor(got) or got.shape != reference.shape or not _token_wise_equal(got, reference):
                continue
            self._joined[id(module)] = (x, reference)
            lengths = [args[0].shape[-2] for args, _, _ in calls]
            self._module_io[id(module)] = [
                ((part,), {}, out) for part, out in zip(x.split(lengths, dim=-2), reference.split(lengths, dim=-2))
            ]


def _token_wise_equal(got: Any, reference: Any) -> bool:
    """Each token's output within the comparator's `token_wise` bound of its recorded one. An output dtype outside
    the threshold table is never joined (the module then runs per prompt)."""
    dtype = str(reference.dtype).removeprefix("torch.")
    if dtype not in DTYPE_COLUMNS:
        return False
    error = (got.float() - reference.float()).norm(dim=-1)
    return bool((error <= threshold("token_wise", dtype) * reference.float().norm(dim=-1)).all())


def kl_chunk_rows(vocab: int) -> int:
    """Positions per KL chunk at this vocabulary size (see KL_CHUNK_BYTES)."""
    return max(1, KL_CHUNK_BYTES // (4 * max(vocab, 1)))


def _reference_chunks(reference: Any) -> Iterator[tuple[Any, Any, Any]]:
    """Per kl_chunk_rows positions of the reference's logits: (log-probabilities, probabilities, argmax), float32."""
    rows = kl_chunk_rows(reference.shape[-1])
    for start in range(0, reference.shape[0], rows):
        ref = reference[start : start + rows].float().log_softmax(-1)
        yield ref, ref.exp(), ref.argmax(-1)


def kl_top1(reference: Any, logits: Any, kept: list[tuple[Any, Any, Any]] | None = None) -> tuple[float, int]:
    """(sum over positions of KL(reference || logits), positions with the same argmax), in float32 chunks; `kept`:
    the reference's chunks computed once (_reference_chunks), the same values either way."""
    import torch

    total, same = 0.0, 0
    rows = kl_chunk_rows(reference.shape[-1])
    chunks = kept if kept is not None else _reference_chunks(reference)
    for (ref, probs, top), start in zip(chunks, range(0, reference.shape[0], rows)):
        cand = logits[start : start + rows].float().log_softmax(-1)
        terms = torch.sub(ref, cand).mul_(probs)  # in place: one temporary, not two
        total += float(terms.sum())
        same += int((top == cand.max(-1).indices).sum())  # max's index: the first of equals, as argmax's
    return total, same
