"""A parity pass states its power: before a pass is reported, calibrated probe defects are injected into the
candidate and judged by the same comparison. A check whose tolerance (the reference's own noise) is wide enough to
let a probe through would also let that defect through: the pass is then "passed, low power (would miss …)".

Probes are DATA: a name and how it bends the candidate (its logits, or one layer's attention output).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import torch
from torch import nn

LOW_POWER = "passed, low power"
"""The parity status (and the detail's first words) when a probe would pass: never a plain pass."""
PROBE_SCALE = 1.05
"""How far each probe bends the candidate: the acceptance's seeded defect (layer 1 attention x1.05)."""
PROBE_LAYER = 1
_ATTENTION = re.compile(r"(?:^|\.)(?:layers|h|blocks)\.(\d+)\.(?:self_attn|attn|self_attention)$")


@dataclass(frozen=True)
class Probe:
    name: str
    logit_scale: float = 1.0  # applied to the candidate's logits
    attention_scale: float = 1.0  # applied to one layer's attention output (PROBE_LAYER, or the last if fewer)


PROBES: tuple[Probe, ...] = (
    Probe(f"logits x{PROBE_SCALE}", logit_scale=PROBE_SCALE),
    Probe(f"layer {PROBE_LAYER} attention x{PROBE_SCALE}", attention_scale=PROBE_SCALE),
)


def _layer_attention(model: nn.Module) -> tuple[nn.Module, nn.Module] | None:
    """(decoder layer, its attention) for layer PROBE_LAYER (or the last layer, for a one-layer model)."""
    found = {int(m.group(1)): (name, mod) for name, mod in model.named_modules() if (m := _ATTENTION.search(name))}
    if not found:
        return None
    name, attention = found.get(PROBE_LAYER, found[max(found)])
    return model.get_submodule(name.rpartition(".")[0]), attention


def _main(output: Any) -> Any:
    return output[0] if isinstance(output, tuple) and output else output


def _scaled(output: Any, scale: float) -> Any:
    if isinstance(output, torch.Tensor):
        return output * scale
    if isinstance(output, tuple) and output and isinstance(output[0], torch.Tensor):
        return (output[0] * scale, *output[1:])
    return output


def _branch_end(layer: nn.Module, attention: nn.Module, run: Callable[[], Any]) -> nn.Module:
    """The module whose output is the attention branch as the residual stream receives it: the module of the layer
    that takes the attention's output as its input (a sandwich post-norm, which would undo a scale applied before
    it), else the attention itself. Found by one forward run."""
    inner = {id(m) for m in attention.modules()}
    seen: dict[str, Any] = {}

    def record(_m: nn.Module, _i: Any, out: Any) -> None:
        seen["out"] = _main(out)

    hooks = [attention.register_forward_hook(record)]
    for module in layer.modules():
        if id(module) not in inner and module is not layer:

            def pre(m: nn.Module, args: tuple[Any, ...]) -> None:
                if args and "out" in seen and args[0] is seen["out"]:
                    seen.setdefault("consumer", m)

            hooks.append(module.register_forward_pre_hook(pre))
    try:
        with torch.no_grad():
            run()
    finally:
        for hook in hooks:
            hook.remove()
    return seen.get("consumer", attention)


def probe_logits(
    probe: Probe, model: nn.Module, logits: Sequence[torch.Tensor], run: Callable[[], list[torch.Tensor]]
) -> list[torch.Tensor] | None:
    """The candidate's logits with `probe` injected; `logits` are its own (reused when only they are bent), `run`
    the forward over the same prompts. None when the model has no attention to bend."""
    if probe.attention_scale == 1.0:
        return [x * probe.logit_scale for x in logits]
    found = _layer_attention(model)
    if found is None:
        return None
    end = _branch_end(*found, run)
    handle = end.register_forward_hook(lambda _m, _i, out: _scaled(out, probe.attention_scale))
    try:
        with torch.no_grad():
            return [x * probe.logit_scale for x in run()]
    finally:
        handle.remove()


def missed_probes(
    model: nn.Module,
    logits: Sequence[torch.Tensor],
    run: Callable[[], list[torch.Tensor]],
    passes: Callable[[list[torch.Tensor]], bool],
) -> tuple[list[str], list[str]]:
    """(probes the comparison would miss, probes it catches): each probe's logits judged by `passes`, the same
    verdict the candidate passed. A probe bends both ways (x scale, then x 1/scale): power is measured from the
    candidate, so a candidate that already carries a x1.05 defect would catch a further x1.05 and pass x1/1.05,
    which takes it back to the truth: that pass is what says the defect could be there."""
    missed, caught = [], []
    for probe in PROBES:
        ran = False
        for bend in (
            probe,
            replace(probe, logit_scale=1 / probe.logit_scale, attention_scale=1 / probe.attention_scale),
        ):
            bent = probe_logits(bend, model, logits, run)
            if bent is None:
                break
            ran = True
            if passes(bent):
                missed.append(probe.name)
                break
        else:
            if ran:
                caught.append(probe.name)
    return missed, caught


def power_fields(missed: Sequence[str], caught: Sequence[str]) -> dict[str, Any]:
    """What a parity result records of its power: status, the probes, and the detail's opening words."""
    status = "passed" if not missed else LOW_POWER
    lead = f"{LOW_POWER} (would miss {', '.join(missed)})" if missed else f"passed (catches {', '.join(caught)})"
    return {"status": status, "power": {"missed": list(missed), "caught": list(caught)}, "lead": lead}
