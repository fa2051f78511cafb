"""Whether a loaded reference model can be trusted before anything is judged against it (issue 41).

Repository code written for an older transformers can load "successfully" and still be garbage: today's
from_pretrained builds the model on the meta device, so buffers the code computes in `__init__` (rotary
`cos_cached` / `sin_cached`) are left as uninitialised memory, and a stored `rotary_emb.inv_freq` may be ignored.
`sound_reference` checks a freshly loaded model:

- every parameter and buffer is finite, and no tensor attribute is left on the meta device;
- each non-persistent buffer equals a fresh computation by the module's own `__init__` (the class built again from
  its config, weights not initialised), and each persistent buffer the checkpoint stores equals the stored tensor;
- its logits on a probe prompt are finite and the same across two runs and two loads.

A model that fails is repaired the way such code expects to be loaded: constructed from its config on CPU with its
own init, then the checkpoint's state dict loaded strictly (missing and unexpected keys reported). If the repaired
model fails too, `ReferenceUnusable` names the tensor and its module: nothing may be judged against it.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from onboard.errors import ReferenceUnusable

SOUND = "sound"
REPAIRED = "repaired"
PROBE_LENGTH = 8
REPAIR = "constructed from config on CPU with its own init, then the checkpoint's state dict loaded strictly"


@dataclass(frozen=True)
class Problem:
    tensor: str
    """The parameter, buffer or output at fault (`model.layers.0.self_attn.rotary_emb.cos_cached`, `logits`)."""
    module: str
    """Its module's class (`LlamaRotaryEmbedding`), or the model's class for the logits."""
    what: str

    def __str__(self) -> str:
        return f"{self.tensor} ({self.module}): {self.what}"


@dataclass(frozen=True)
class Health:
    """How a reference was found: sound as loaded, repaired (with the load's problems and the repair's key report)."""

    verdict: str
    problems: tuple[Problem, ...] = ()
    missing_keys: tuple[str, ...] = ()
    unexpected_keys: tuple[str, ...] = ()
    notes: tuple[str, ...] = field(default_factory=tuple)

    def to_dict(self) -> dict[str, Any]:
        return {
            "verdict": self.verdict,
            "problems": [str(p) for p in self.problems],
            "missing_keys": list(self.missing_keys),
            "unexpected_keys": list(self.unexpected_keys),
            "notes": list(self.notes),
        }


_SOUND_BEFORE: set[tuple[str, ...]] = set()
"""Loads found sound with two loads in this process (checkpoint, its weights' mtimes, load options): a later load
of the same is checked once, without the second load."""


def sound_reference(
    model: Any, reload: Callable[[], Any], checkpoint: Path, options: tuple[str, ...] = ()
) -> tuple[Any, Health]:
    """`model` (just loaded by `reload`, on CPU) if sound, else its repair; ReferenceUnusable when neither is."""
    key = (str(Path(checkpoint).resolve()), *(str(f.stat().st_mtime_ns) for f in _weight_files(checkpoint)), *options)
    problems = state_problems(model, checkpoint)
    if not problems:
        problems = logit_problems(model, None if key in _SOUND_BEFORE else reload)
    if not problems:
        _SOUND_BEFORE.add(key)
        return model, Health(SOUND)
    blueprint = (type(model), copy.deepcopy(model.config), next(model.parameters()).dtype)
    del model
    repaired, missing, unexpected = repair(blueprint, checkpoint)
    # Its own init computed its buffers: only finiteness and the stored buffers are checked, then the logits.
    after = _missing_parameters(repaired, missing) + state_problems(repaired, checkpoint, own_init=True)
    if not after:
        try:
            after = logit_problems(repaired, lambda: repair(blueprint, checkpoint)[0])
        except Exception as exc:  # noqa: BLE001 - the repaired code cannot run at all: that is why it is unusable
            why = f"its forward raises {type(exc).__name__}: {' '.join(str(exc).split())[:300]}"
            after = [Problem("forward", type(repaired).__name__, why)]
    if after:
        first = after[0]
        raise ReferenceUnusable(
            f"{first.tensor} ({first.module})",
            f"{checkpoint}: the reference model is not sound (reference-unusable): {first}; as loaded: "
            f"{'; '.join(map(str, problems[:3]))}; {REPAIR} did not fix it",
            "nothing is judged against this reference (parity is unverified, goldens are refused); the modeling "
            "code may need an older transformers: run it there, or compare against an engine (onboard validate "
            "--endpoint)",
        )
    notes = (f"{REPAIR}: {len(missing)} missing, {len(unexpected)} unexpected key(s)",)
    return repaired, Health(REPAIRED, tuple(problems), tuple(missing), tuple(unexpected), notes)


def state_problems(model: Any, checkpoint: Path, own_init: bool = False) -> list[Problem]:
    """Non-finite parameters and buffers, plain tensor attributes left on the meta device, non-persistent buffers
    that differ from the module's own computation (unless `own_init`: the model was just built by it), and
    persistent buffers that differ from the tensor the checkpoint stores."""
    import torch

    kinds = _module_kinds(model)
    persistent = set(model.state_dict())
    fresh = {} if own_init else _fresh_buffers(model)
    stored = _stored(checkpoint, [n for n, _ in model.named_buffers() if n in persistent])
    problems = [
        Problem(name, kinds(name), "not finite (NaN or infinity)")
        for name, tensor in model.named_parameters()
        if tensor.is_floating_point() and not bool(torch.isfinite(tensor).all())
    ]
    never_materialised = "a tensor attribute left on the meta device (computed in __init__, never materialised)"
    problems += [
        Problem(f"{prefix}.{attr}" if prefix else attr, type(module).__name__, never_materialised)
        for prefix, module in model.named_modules()
        for attr, value in vars(module).items()
        if isinstance(value, torch.Tensor) and value.is_meta
    ]
    for name, buffer in model.named_buffers():  # in module order: the first is the one an error names
        expected, whose = (
            (stored.get(name), "the checkpoint's stored tensor")
            if name in persistent
            else (fresh.get(name), "the module's own computation")
        )
        if buffer.is_floating_point() and not bool(torch.isfinite(buffer).all()):
            problems.append(Problem(name, kinds(name), "not finite (NaN or infinity): uninitialised?"))
        elif expected is not None and (expected.shape != buffer.shape or not _close(buffer, expected)):
            problems.append(Problem(name, kinds(name), f"differs from {whose} (uninitialised or not loaded)"))
    return problems


def logit_problems(model: Any, reload: Callable[[], Any] | None) -> list[Problem]:
    """Non-finite logits on the probe prompt, or logits that change between two runs or with a second load (by
    `reload`; None: this load was found sound before)."""
    name = type(model).__name__
    # A forward that raises propagates: the callers report that run as raising (e.g. parity's float64 calibration).
    first, second = _probe(model), _probe(model)
    if not bool(first.isfinite().all()):
        if next(model.parameters()).dtype.itemsize < 4:
            # A half-precision run overflowing is that dtype's finding (divergence's low-precision stage locates it),
            # not an unsound model: the state checks judged this load, and its float32 load is checked the same way.
            return []
        return [Problem("logits", name, "not finite on the probe prompt")]
    if not _close(second, first):
        return [Problem("logits", name, "differ between two runs of the same prompt")]
    if reload is not None and not _close(_probe(reload()), first):
        return [Problem("logits", name, "differ between two loads of the same checkpoint")]
    return []


def repair(blueprint: tuple[Any, Any, Any], checkpoint: Path) -> tuple[Any, list[str], list[str]]:
    """The model of `blueprint` (its class, config and dtype) constructed on CPU with its own init, the checkpoint's
    tensors loaded into it: (model, missing keys, unexpected keys). Only safetensors are read (onboard never
    unpickles a checkpoint)."""
    from safetensors import safe_open

    cls, config, dtype = blueprint
    model = cls._from_config(copy.deepcopy(config), dtype=dtype)
    files = _weight_files(checkpoint)
    expected, loaded, unexpected = set(model.state_dict()), set(), []
    for file in files:
        with safe_open(str(file), framework="pt") as fh:
            state = {k: fh.get_tensor(k) for k in fh.keys()}  # noqa: SIM118 - safe_open is not a mapping
        result = model.load_state_dict(state, strict=False)
        unexpected += result.unexpected_keys
        loaded |= set(state) & expected
    if hasattr(model, "tie_weights"):
        model.tie_weights()
    return model.eval(), sorted(expected - loaded), sorted(unexpected)


def _missing_parameters(model: Any, missing: list[str]) -> list[Problem]:
    """Missing keys that are parameters not tied to a loaded one (a missing buffer keeps its own init)."""
    params = dict(model.named_parameters(remove_duplicate=False))
    shared = {p.data_ptr() for n, p in params.items() if n not in missing}
    kinds = _module_kinds(model)
    return [
        Problem(n, kinds(n), "not in the checkpoint (left at its random init)")
        for n in missing
        if n in params and params[n].data_ptr() not in shared
    ]


def _module_kinds(model: Any) -> Callable[[str], str]:
    modules = dict(model.named_modules())
    return lambda name: type(modules.get(name.rpartition(".")[0], model)).__name__


def _close(got: Any, want: Any) -> bool:
    """Equal up to a few units of the coarser dtype's rounding, relative to the tensor's scale."""
    import torch

    eps = max(torch.finfo(t.dtype).eps if t.is_floating_point() else 0.0 for t in (got, want))
    scale = max(float(want.double().abs().max()) if want.numel() else 0.0, 1.0)
    return bool(torch.allclose(got.double(), want.double(), rtol=0.0, atol=16 * eps * scale))


def _fresh_buffers(model: Any) -> dict[str, Any]:
    """The non-persistent buffers the model's own `__init__` computes (built again from its config, weights left
    uninitialised: buffers are what is compared)."""
    from transformers.initialization import no_init_weights

    persistent = set(model.state_dict())
    dtype = next(model.parameters()).dtype
    with no_init_weights():
        fresh = type(model)._from_config(copy.deepcopy(model.config), dtype=dtype)
    return {n: b for n, b in fresh.named_buffers() if n not in persistent}


def _weight_files(checkpoint: Path) -> list[Path]:
    return sorted(Path(checkpoint).glob("*.safetensors"))


def _stored(checkpoint: Path, names: list[str]) -> dict[str, Any]:
    """The checkpoint's tensors of these names (persistent buffers it stores, e.g. `rotary_emb.inv_freq`)."""
    from safetensors import safe_open

    out, wanted = {}, set(names)
    for file in _weight_files(checkpoint) if wanted else ():
        with safe_open(str(file), framework="pt") as fh:
            out |= {k: fh.get_tensor(k) for k in fh.keys() if k in wanted}  # noqa: SIM118
    return out


def _probe(model: Any) -> Any:
    """Logits (float64) of a fixed short prompt spread over the vocabulary."""
    import torch

    vocab = int(model.get_output_embeddings().weight.shape[0])
    ids = torch.tensor([[(1 + 7919 * i) % vocab for i in range(PROBE_LENGTH)]])
    with torch.no_grad():
        out = model(input_ids=ids)
    return (out if isinstance(out, torch.Tensor) else out.logits).double()
