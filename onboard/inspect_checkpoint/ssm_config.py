"""The selective state-space (Mamba) mixer: its sizes and options, read once from config.json (every spelling of
each knob: names.config.SSM_KEYS).
"""

from __future__ import annotations

import math

from onboard.findings import Finding, warning
from onboard.inspect_checkpoint.checkpoint_types import TensorInfo
from onboard.inspect_checkpoint.config_view import ConfigView
from onboard.names.config import BARE_HEAD_KEYS, SSM_KEYS
from onboard.profile import Dims, LayerInfo, Ssm

_BARE_HEADS = {"mamba2"}
_FIXED_ACTIVATION = {"zamba2": "silu"}
_DT_FLOOR_FROM_MIN = {"zamba2"}


def ssm_from_config(
    cv: ConfigView, dims: Dims, layers: tuple[LayerInfo, ...], lm: dict[str, TensorInfo] | None
) -> tuple[Ssm | None, list[Finding]]:
    """The SSM layers' mixer (None without one), and findings where the tensors contradict config.json's biases."""
    if not any(layer.attention == "ssm" or layer.parallel_ssm for layer in layers):
        return None, []
    hidden = dims.hidden_size
    state = cv.int(*SSM_KEYS["mamba_d_state"], default=16) or 16
    conv = cv.int(*SSM_KEYS["mamba_d_conv"], default=4) or 4
    expand = cv.float(*SSM_KEYS["mamba_expand"], default=2.0) or 2.0
    heads = cv.int(*SSM_KEYS["mamba_n_heads"], default=None)
    head_dim = cv.int(*SSM_KEYS["mamba_d_head"], default=None)
    if heads is None and cv.model_type in _BARE_HEADS:
        heads, head_dim = cv.int(BARE_HEAD_KEYS["mamba_n_heads"]), cv.int(BARE_HEAD_KEYS["mamba_d_head"])
    inner = cv.int(*SSM_KEYS["mamba_d_ssm"], default=None)
    version = 2 if heads and head_dim else 1
    if version == 2:
        inner = inner or heads * head_dim  # type: ignore[operator]
        groups = cv.int(*SSM_KEYS["mamba_n_groups"], default=1) or 1
        dt_rank = None
        cv.mark_used("time_step_rank")  # Mamba2Config still writes it; Mamba-2 has no dt projection to size
    else:
        if not inner and cv.has("mamba_expand"):
            # Hybrids (Jamba, Zamba) size the mixer as mamba_expand × hidden_size: their intermediate_size is the MLP's.
            inner = int(expand * hidden)
        inner = inner or cv.int("intermediate_size", default=None) or int(expand * hidden)
        groups = 1
        dt_rank = _dt_rank(cv, hidden)
    ssm = Ssm(
        version=version,
        state_size=state,
        conv_kernel=conv,
        inner_size=inner,
        num_heads=heads if version == 2 else None,
        head_dim=head_dim if version == 2 else None,
        n_groups=groups,
        dt_rank=dt_rank,
        conv_bias=cv.bool(*SSM_KEYS["mamba_conv_bias"], default=True),
        proj_bias=cv.bool(*SSM_KEYS["mamba_proj_bias"], default=False),
        activation=_FIXED_ACTIVATION.get(cv.model_type) or str(cv.get(*SSM_KEYS["mamba_hidden_act"], default="silu")),
        dt_limit=_dt_limit(cv),
        bc_norm_eps=cv.float("mixer_rms_eps") if cv.model_type == "falcon_mamba" else None,
        residual_in_fp32=cv.bool("residual_in_fp32", default=False),
        gated_norm=cv.bool("mamba_rms_norm", default=False) if cv.has("mamba_rms_norm") else version == 2,
        norm_before_gate=cv.bool("mamba_norm_before_gate", default=False),
        in_multiplier=cv.float("ssm_in_multiplier", default=1.0) or 1.0,
        out_multiplier=cv.float("ssm_out_multiplier", default=1.0) or 1.0,
        zxbcdt_multipliers=_multipliers(cv, "ssm_multipliers", 5),
    )
    return ssm, _bias_findings(ssm, lm)


def _dt_rank(cv: ConfigView, hidden: int) -> int:
    """Mamba-1's dt projection rank: a number, or "auto" (the reference code's ceil(hidden / 16))."""
    auto = math.ceil(hidden / 16)
    value = cv.get(*SSM_KEYS["mamba_dt_rank"], default="auto")
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    if value != "auto":
        cv.type_errors["time_step_rank"] = 'a positive integer or "auto"'
    return auto


def _dt_limit(cv: ConfigView) -> tuple[float, float | None] | None:
    """`time_step_limit` as (low, high or None); None when it clamps nothing. Zamba2 clamps dt to
    [time_step_min, inf)."""
    if cv.model_type in _DT_FLOOR_FROM_MIN:
        low = cv.float("time_step_min", default=0.001) or 0.0
        return (low, None) if low > 0 else None
    limit = cv.numbers("time_step_limit", 2)
    if limit is None:
        return None
    low, high = limit
    if low <= 0 and math.isinf(high):
        return None
    return low, None if math.isinf(high) else high


def _multipliers(cv: ConfigView, key: str, count: int) -> tuple[float, ...] | None:
    """`count` numbers (Falcon-H1's ssm_multipliers for z, x, B, C, dt); None when absent or all 1."""
    value = cv.numbers(key, count)
    return None if value is None or all(v == 1 for v in value) else value


def _bias_findings(ssm: Ssm, lm: dict[str, TensorInfo] | None) -> list[Finding]:
    """config.json's biases against the stored SSM tensors: engines build the layer from config.json."""
    if not lm:
        return []
    names = [n for n in lm if ".conv1d." in n or ".in_proj." in n]
    if not any(n.endswith("conv1d.weight") for n in names):
        return []  # no Mamba tensors under the usual names: nothing to compare
    out = []
    for flag, suffix, keys in (
        (ssm.conv_bias, "conv1d.bias", "use_conv_bias / mamba_conv_bias"),
        (ssm.proj_bias, "in_proj.bias", "use_bias / mamba_proj_bias"),
    ):
        stored = any(n.endswith(suffix) for n in names)
        if stored != flag:
            said = "true" if flag else "false (or unset)"
            out.append(
                warning(
                    "ssm-bias-mismatch",
                    f"config.json's {keys} is {said} but the checkpoint "
                    f"{'stores no' if flag else 'stores a'} {suffix} tensor in its SSM layers",
                    "set the flag to match the weights: engines build the mixer from config.json",
                    file="config.json",
                )
            )
    return out
