"""A human-readable summary of a ModelProfile (what `onboard inspect` prints without --json)."""

from __future__ import annotations

from onboard.findings import SEVERITIES
from onboard.inspect_checkpoint.families import describe_layers
from onboard.profile import MemoryPlan, ModelProfile, Ssm


def _human(n: float) -> str:
    for unit, scale in (("T", 1e12), ("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if abs(n) >= scale:
            return f"{n / scale:.2f}{unit}"
    return str(int(n))


def _bytes(n: float) -> str:
    for unit, scale in (("TiB", 1024**4), ("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if abs(n) >= scale:
            return f"{n / scale:.2f} {unit}"
    return f"{int(n)} B"


def _weights(mem: MemoryPlan) -> str:
    """Exact from headers, the index's total, an estimate (marked, with what it counts) or unknown: never 0 B."""
    if mem.weights_bytes is None:
        return "unknown"
    text = _bytes(mem.weights_bytes)
    if mem.weights_source == "index":
        return text + " (index total_size)"
    est = mem.weights_estimate
    if mem.weights_source == "estimated" and est is not None:
        parts = [f"{_human(est.parameters)} parameters", est.quantization or est.dtype]
        parts += [f"{_human(est.mtp_parameters)} in MTP layers"] if est.mtp_parameters else []
        return f"{text} (estimated from config: {', '.join(parts)})"
    return text


def render_summary(p: ModelProfile) -> str:
    """Fatal findings lead; fields the profile could not establish (`p.unknown`) are named once, never shown."""
    d = p.dims
    fatal = [f for f in p.findings if f.severity == "fatal"]
    lines = [f"{p.source}  ({p.model_type}; {', '.join(p.architectures) or 'no architectures'})"]
    for f in fatal:
        lines.append(f"UNUSABLE [{f.code}] {f.message}" + (f" ({f.file})" if f.file else ""))
        lines += [f"  fix: {f.hint}"] if f.hint else []
    lines += [
        f"revision: {p.revision or 'local (no commit)'}",
        f"dims{' (config.json)' if p.unknown else ''}: hidden {d.hidden_size}, layers {d.num_layers}, heads "
        f"{d.num_attention_heads}/{d.num_kv_heads} kv, head_dim {d.head_dim}, intermediate {d.intermediate_size}, "
        f"vocab {d.vocab_size}",
    ]
    if p.unknown:
        lines.append(f"unknown until the weights can be read: {', '.join(p.unknown)}")
    else:
        lines += [
            f"layers: {'; '.join(describe_layers(p.layers)) or (p.layers[0].attention + ' on every layer' if p.layers else 'none')}",
            f"features: {', '.join(p.features) or 'none'}",
        ]
    if p.rope:
        lines.append(
            f"rope: {p.rope.type}, theta {p.rope.theta:g}"
            + (f", partial {p.rope.partial_rotary_factor:g}" if p.rope.partial_rotary_factor < 1 else "")
        )
    if p.moe:
        m = p.moe
        lines.append(
            f"moe: {m.num_experts} experts, top-{m.top_k}, {m.num_shared_experts} shared, {m.scoring} router"
            + (", correction bias" if m.correction_bias else "")
        )
    if p.ssm:
        lines.append(f"ssm: {describe_ssm(p.ssm)}")
    if p.parameters:
        lines.append(
            f"parameters: {_human(p.parameters.total)} total, {_human(p.parameters.active)} active; "
            + ", ".join(f"{k} {_human(v)}" for k, v in p.parameters.by_dtype.items())
        )
    if p.memory:
        mem = p.memory
        lines.append(
            f"memory: weights {_weights(mem)}; KV {_bytes(mem.kv_bytes_per_token)}/token "
            f"({mem.kv_dtype}); one sequence of {mem.max_model_len} tokens {_bytes(mem.kv_bytes_per_sequence)}"
        )
        if mem.target:
            t = mem.target
            if t.fits is None:
                verdict = "unknown (weight bytes unknown)"
            elif t.fits:
                verdict = (
                    f"fits, tensor parallel {t.recommended_tensor_parallel}, {t.concurrent_sequences} "
                    "concurrent sequences"
                )
            else:
                verdict = "does not fit" + (f"; would fit with {' or '.join(t.would_fit)}" if t.would_fit else "")
            lines.append(f"target {t.count}× {t.gpu}: {verdict}")
            lines += [f"  {note}" for note in t.notes]
    if "closest_family" not in p.unknown:
        lines.append(f"closest family: {p.closest_family or 'none'}")
        lines += [f"  {line}" for line in p.novelty]
    counts = {s: sum(1 for f in p.findings if f.severity == s) for s in SEVERITIES}
    lines.append(
        "findings: " + ", ".join(f"{n} {s}" for s, n in counts.items() if n) if p.findings else "findings: none"
    )
    for f in sorted(p.findings, key=lambda f: SEVERITIES.index(f.severity)):
        if f.severity == "fatal":
            continue  # shown first, above
        where = " ".join(x for x in (f.file, f.tensor) if x)
        lines.append(f"  [{f.severity}] {f.code}: {f.message}" + (f" ({where})" if where else ""))
    return "\n".join(lines)


def describe_ssm(s: Ssm) -> str:
    """One line naming what a Mamba kernel must match: version, sizes, and every option that changes the scan."""
    shape = (
        f"{s.num_heads} heads × {s.head_dim}, {s.n_groups} group{'s' if s.n_groups != 1 else ''}"
        if s.version == 2
        else f"dt rank {s.dt_rank}"
    )
    sizes = f"Mamba-{s.version}, state {s.state_size}, conv {s.conv_kernel}, inner {s.inner_size}"
    parts = [sizes, shape, s.activation]
    if s.dt_limit:
        low, high = s.dt_limit
        parts.append(f"dt clamped to [{low:g}, {'inf' if high is None else f'{high:g}'}]")
    if s.bc_norm_eps is not None:
        parts.append(f"RMS-normed B, C, dt (eps {s.bc_norm_eps:g})")
    if s.residual_in_fp32:
        parts.append("float32 residual")
    if s.version == 2:
        parts.append(
            "no gated norm" if not s.gated_norm else "norm, then gate" if s.norm_before_gate else "gate, then norm"
        )
    if s.in_multiplier != 1 or s.out_multiplier != 1:
        parts.append(f"input ×{s.in_multiplier:g}, output ×{s.out_multiplier:g}")
    if s.zxbcdt_multipliers:
        parts.append("z, x, B, C, dt ×(" + ", ".join(f"{m:g}" for m in s.zxbcdt_multipliers) + ")")
    parts += [name for name, on in (("conv bias", s.conv_bias), ("projection bias", s.proj_bias)) if on]
    return ", ".join(parts)
