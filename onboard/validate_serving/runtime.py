"""In-process candidates and the reference: a torch module scored and decoded on this machine.

The same code runs the reference (transformers, eager, float32) when recording goldens and an in-process candidate
when validating, so a difference between them is the model's, not the harness's.
"""

from __future__ import annotations

import inspect
import json
import re
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from onboard.comparator import topk_rows
from onboard.environment import hardware
from onboard.errors import InputError, OnboardError
from onboard.reference import load_transformers, torch_dtype
from onboard.validate_serving.candidates import (
    DTYPES,
    Candidate,
    CandidateInfo,
    Capabilities,
    Generation,
    LayerStat,
    TopK,
)
from onboard.verify_tokenizer.special_tokens import checkpoint_stop_set
from onboard.versions import library_versions

# A "block" in activation reports: everything up to and including the layer index.
_LAYER_PREFIX = re.compile(r"^(.*?\.(?:layers|h|blocks)\.\d+)(?:\.|$)")


class InProcessCandidate(Candidate):
    """A torch module as a candidate: a generated adapter (`hf=False`: forward(ids, attention_mask, cache=KVCache))
    or transformers (`hf=True`: attention_mask, position_ids, its own cache). Both take left-padded batches and
    decode with a KV cache."""

    def __init__(self, model: Any, path: Path, dtype: str, *, kind: str, hf: bool, note: str = "") -> None:
        self.model = model
        self.hf = hf
        self.path = path  # the checkpoint, for the first-divergence bisect when parity fails
        self.info = CandidateInfo(path.name, kind, dtype, library_versions(), hardware())
        stand_in = "reference-as-candidate: transformers stands in for the adapter runtime" + (
            f" ({note})" if note else ""
        )
        notes = (stand_in,) if kind == "reference-as-candidate" else ()
        self.capabilities = Capabilities(activations=True, notes=notes)
        # What an engine that loads `path` stops on: stop_set then fails where an end-of-turn token is not declared.
        self.stop_ids = tuple(checkpoint_stop_set(path, engine=True))
        self.device = next(model.parameters()).device
        # transformers renamed past_key_values -> cache (5.2x); support both so the pinned range keeps working.
        self._cache_kw = "cache" if hf and "cache" in inspect.signature(model.forward).parameters else "past_key_values"

    def _cached(self, ids: Any, past: Any) -> tuple[Any, Any]:
        """One cached forward: (logits of the last position, new cache). The first call takes the whole prompt,
        later ones only the last token of `ids`."""
        step = ids if past is None else ids[:, -1:]
        if not self.hf:
            from onboard.generate_adapter.runtime import KVCache

            past = KVCache() if past is None else past
            return self.model(step, cache=past)[:, -1], past
        out = self.model(input_ids=step, use_cache=True, **{self._cache_kw: past})
        return out.logits[:, -1], getattr(out, self._cache_kw)

    def _logits(self, ids: Any, mask: Any | None = None) -> Any:
        import torch

        with torch.no_grad():
            if not self.hf:
                return self.model(ids, attention_mask=mask)
            positions = None
            if mask is not None:
                from onboard.generate_adapter.runtime import padded_positions

                # Left padding shifts positions unless they are derived from the mask (what generate() does).
                positions = padded_positions(mask)
            out = self.model(input_ids=ids, attention_mask=mask, position_ids=positions, use_cache=False)
            return out.logits

    def score(self, sequences: Sequence[Sequence[int]], top_k: int, padding: str = "right") -> list[list[TopK]]:
        """One batch: unpadded when the sequences have one length, else padded on the `padding` side."""
        import torch

        if not sequences:
            return []
        if len({len(s) for s in sequences}) == 1 and (not self.hf or len(sequences) == 1):
            ids = torch.tensor([list(s) for s in sequences], device=self.device)
            logits = self._logits(ids)
            return [topk_rows(logits[r, :-1], top_k, list(seq[1:])) for r, seq in enumerate(sequences)]
        width = max(len(s) for s in sequences)
        ids = torch.zeros((len(sequences), width), dtype=torch.long, device=self.device)
        mask = torch.zeros_like(ids)
        spans = [(width - len(seq) if padding == "left" else 0, seq) for seq in sequences]
        for row, (start, seq) in enumerate(spans):
            ids[row, start : start + len(seq)] = torch.tensor(list(seq))
            mask[row, start : start + len(seq)] = 1
        logits = self._logits(ids, mask)
        return [
            topk_rows(logits[r, start : start + len(s) - 1], top_k, list(s[1:])) for r, (start, s) in enumerate(spans)
        ]

    def generate(
        self,
        prompts: Sequence[Sequence[int]],
        max_new_tokens: int,
        top_k: int,
        *,
        ignore_eos: bool = True,
        force_first: int | None = None,
    ) -> list[Generation]:
        return [self._generate_one(list(p), max_new_tokens, top_k, ignore_eos, force_first) for p in prompts]

    def _generate_one(
        self, prompt: list[int], max_new_tokens: int, top_k: int, ignore_eos: bool, force_first: int | None
    ) -> Generation:
        import torch

        start = time.perf_counter()
        times: list[float] = []
        ids = torch.tensor([prompt], device=self.device)
        past = None
        out_ids: list[int] = []
        steps: list[TopK] = []
        finish = "length"
        with torch.no_grad():
            for step in range(max_new_tokens):
                # KV cache: decode cost per token stays flat, so the performance figures mean something.
                logits, past = self._cached(ids, past)
                logits = logits[0]
                if step == 0 and force_first is not None:
                    logits = logits.clone()
                    logits[force_first] = logits.max() + 100.0
                row = topk_rows(logits.unsqueeze(0), top_k, None)[0]
                token = int(logits.argmax())
                steps.append(TopK(row.ids, row.logprobs, float(torch.log_softmax(logits.float(), -1)[token])))
                out_ids.append(token)
                times.append(time.perf_counter() - start)
                ids = torch.cat([ids, torch.tensor([[token]], device=self.device)], dim=1)
                if not ignore_eos and token in self.stop_ids:
                    finish = "stop"
                    break
        return Generation(tuple(out_ids), tuple(steps), finish, tuple(times))

    def scan_activations(self, sequence: Sequence[int]) -> list[LayerStat] | None:
        """Hooks on every module: max-abs and non-finite count of each output, grouped per layer block."""
        import torch

        stats: dict[str, list[float]] = {}

        def hook(name: str) -> Any:
            def record(_module: Any, _inputs: Any, output: Any) -> None:
                tensor = output[0] if isinstance(output, (tuple, list)) and output else output
                if not isinstance(tensor, torch.Tensor) or not tensor.is_floating_point():
                    return
                match = _LAYER_PREFIX.match(name)
                key = match.group(1) if match else name
                data = tensor.detach()
                finite = torch.isfinite(data)
                bad = int((~finite).sum())
                peak = float(data[finite].abs().max()) if bool(finite.any()) else float("inf")
                entry = stats.setdefault(key, [0.0, 0])
                entry[0], entry[1] = max(entry[0], peak), entry[1] + bad

            return record

        handles = [m.register_forward_hook(hook(n)) for n, m in self.model.named_modules() if n]
        try:
            self._logits(torch.tensor([list(sequence)], device=self.device))
        finally:
            for handle in handles:
                handle.remove()
        return [LayerStat(name, peak, int(bad)) for name, (peak, bad) in stats.items()]

    def timed_batch(self, prompts: Sequence[Sequence[int]], max_new_tokens: int) -> tuple[int, float]:
        """Greedy-decode equal-length prompts as one batch; (output tokens, seconds) for throughput at batch N."""
        import torch

        ids = torch.tensor([list(p) for p in prompts], device=self.device)
        past = None
        start = time.perf_counter()
        with torch.no_grad():
            for _ in range(max_new_tokens):
                logits, past = self._cached(ids, past)
                ids = torch.cat([ids, logits.argmax(-1, keepdim=True)], dim=1)
        return len(prompts) * max_new_tokens, time.perf_counter() - start

    def peak_memory(self) -> tuple[int | None, str]:
        """CUDA max allocated on a GPU, else this process's peak RSS (which includes Python and libraries)."""
        import resource

        import torch

        if self.device.type == "cuda":
            return int(torch.cuda.max_memory_allocated(self.device)), "cuda_max_allocated"
        return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024, "process_peak_rss"

    def close(self) -> None:
        self.model = None


def load_candidate(
    path: Path, dtype: str, *, device: str = "cpu", wrap: object | None = None, runtime: str = "auto"
) -> Candidate:
    """The in-process candidate for a checkpoint folder.

    runtime: "adapter" (the generated adapter, adapters/<model_type>.py), "reference" (transformers in
    reference-as-candidate mode), or "auto" (the adapter when one exists for the model type, else the reference,
    reported as such). `wrap` (tests, seeded defects): a callable taking the loaded torch module, returning one.
    """
    if dtype not in DTYPES:
        raise InputError(f"unknown --dtype {dtype!r}", f"use one of {', '.join(DTYPES)}")
    note = ""
    if runtime in ("auto", "adapter"):
        adapter, note = _adapter_model(path, dtype, device)
        if adapter is not None:
            model = wrap(adapter) if wrap else adapter
            return InProcessCandidate(model, path, dtype, kind="adapter", hf=False)
        if runtime == "adapter":
            raise InputError(f"{path}: no usable generated adapter ({note})", "run onboard generate first")
    model = load_transformers(path, dtype, device=device)
    model = wrap(model) if wrap else model
    return InProcessCandidate(model, path, dtype, kind="reference-as-candidate", hf=True, note=note)


def _adapter_model(path: Path, dtype: str, device: str) -> tuple[object | None, str]:
    """The generated adapter (`onboard.adapters.<model_type>.Model`) loaded from `path`, or None and why not."""
    import importlib

    try:
        model_type = json.loads((path / "config.json").read_text()).get("model_type")
    except (OSError, ValueError):
        return None, "config.json unreadable"
    try:
        module = importlib.import_module(f"onboard.adapters.{model_type}")
    except ImportError:
        return None, f"no generated adapter for model_type {model_type!r}"
    try:
        return module.Model.from_pretrained(path, dtype=torch_dtype(dtype), device=device, trust_remote_code=False), ""
    except OnboardError as exc:  # e.g. kernel stubs not implemented yet (NotRunnable)
        return None, f"adapter for {model_type} not runnable: {exc.message}"
