"""The four families transformers 5.25 added, composed from their tiny checkpoints (no adapter
committed): MiniCPM5-MoE (a query projection that also carries a per-head output gate) and Param2-MoE (Sarvam's
`query_key_value` names, [all q; all k; all v] rows) compose and pass parity; Ergo and Kolibri 1.1 need mechanisms
the block library lacks, and their adapters refuse to run naming them."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from onboard.generate_adapter import compose_knowledge, generate
from onboard.generate_adapter.parity import check_parity, compare, load_adapter, reference_model
from onboard.generate_adapter.plan import plan
from onboard.generate_adapter.runtime import NotRunnable
from onboard.inspect_checkpoint import inspect
from tests.generate.conftest import within_tolerance

COMPOSED = ["minicpm5_moe", "param2moe", "kolibri1"]  # kolibri1 (5.24): the router Kolibri 1.1 shares


@pytest.mark.parametrize("model_type", COMPOSED)
def test_new_families_compose_and_pass_float32_parity(tiny, tmp_path: Path, model_type: str) -> None:
    result = generate(tiny(model_type), tmp_path / "out", parity=True)
    print(f"{model_type}: {result.parity['detail']}")
    assert not result.stubs
    assert result.verification == "passed", [c.detail for c in result.checks]
    assert result.parity["worst"] <= 1e-4


@pytest.mark.parametrize("model_type", COMPOSED)
def test_new_families_in_bfloat16(tiny, tmp_path: Path, model_type: str) -> None:
    """In bf16 the composed adapter's error stays within transformers' own bf16 error (parity.py's rule)."""
    ckpt = tiny(model_type, "bfloat16")
    generate(ckpt, tmp_path / "out")
    report = check_parity(tmp_path / "out/adapters" / f"{model_type}.py", ckpt, dtype="bfloat16")
    print(f"{model_type} bf16: {report['detail']}")
    assert within_tolerance(report), report["detail"]


def test_minicpm5_query_projection_carries_a_sigmoid_output_gate(tiny, tmp_path: Path) -> None:
    """q_proj has twice the query rows ([q_h; g_h] per head): the adapter gates the attention output with them.
    With the gate rows zeroed (sigmoid = 1/2 everywhere) the logits move far from transformers'."""
    ckpt = tiny("minicpm5_moe")
    generate(ckpt, tmp_path / "out")
    adapter = load_adapter(tmp_path / "out/adapters/minicpm5_moe.py").Model.from_pretrained(ckpt)
    attn = adapter.model.layers[0].self_attn
    heads, head_dim = attn.num_heads, attn.head_dim
    assert attn.output_gate and attn.qkv_proj.weight.shape[0] == (2 * heads + 2 * attn.num_kv_heads) * head_dim
    reference = reference_model(ckpt, torch.float32)
    ids = [torch.randint(0, 1000, (1, 40), generator=torch.Generator().manual_seed(0))]
    assert compare(adapter, reference, ids)[0].relative <= 1e-4
    with torch.no_grad():
        for layer in adapter.model.layers:
            layer.self_attn.qkv_proj.weight[: 2 * heads * head_dim].view(heads, 2, head_dim, -1)[:, 1] = 0.0
    assert compare(adapter, reference, ids)[0].relative > 1e-3


def test_gated_attention_decodes_with_a_kv_cache(tiny, tmp_path: Path) -> None:
    """The output gate comes from each new token's own query rows: decoding token by token with a KV cache gives the
    logits of the full forward (to float32 regrouping noise, as tests/generate/test_padding_cache.py measures)."""
    from onboard.generate_adapter.runtime import KVCache

    ckpt = tiny("minicpm5_moe")
    generate(ckpt, tmp_path / "out")
    model = load_adapter(tmp_path / "out/adapters/minicpm5_moe.py").Model.from_pretrained(ckpt)
    ids = torch.randint(0, 1000, (1, 30), generator=torch.Generator().manual_seed(1))
    cache = KVCache()
    with torch.no_grad():
        full = model(ids)[0]
        steps = [model(ids[:, :20], cache=cache)[0]] + [model(ids[:, t : t + 1], cache=cache)[0] for t in range(20, 30)]
    cached = torch.cat(steps)
    assert cache.length == 30
    assert float((cached - full).abs().max() / full.abs().max()) <= 1e-5


@pytest.mark.parametrize(
    ("model_type", "fact", "other"),
    [
        # [all q; all k; all v] (transformers splits Sarvam's names by sizes at load), not grouped per KV head
        ("param2moe", {"query_key_value": "concat"}, {"query_key_value": "grouped"}),
        # Kolibri's router ranks raw logits + bias (the weights are still sigmoid scores), not scores + bias
        ("kolibri1", {"router_select_by": "logits"}, {}),
    ],
)
def test_family_facts_matter(tiny, tmp_path: Path, monkeypatch, model_type: str, fact: dict, other: dict) -> None:
    """The modelling-code fact each family needs is applied, and the tiny checkpoint tells it from the other reading:
    the other reading's adapter is a different model, which parity rejects."""
    from onboard.generate_adapter.adapter_source import adapter_source

    ckpt = tiny(model_type)
    right = plan(inspect(str(ckpt)))
    assert right.overrides == tuple(f"{k}={v!r}" for k, v in fact.items()) and not right.stubs
    monkeypatch.setitem(compose_knowledge.FAMILY_FACTS, model_type, other)
    wrong = plan(inspect(str(ckpt)))
    assert not wrong.stubs
    reference = reference_model(ckpt, torch.float32)
    ids = [torch.randint(0, 1000, (1, 40), generator=torch.Generator().manual_seed(0))]
    errors = {}
    for name, the_plan in (("right", right), ("wrong", wrong)):
        (tmp_path / f"{name}.py").write_text(adapter_source(the_plan))
        adapter = load_adapter(tmp_path / f"{name}.py").Model.from_pretrained(ckpt)
        errors[name] = compare(adapter, reference, ids)[0].relative
    assert errors["right"] <= 1e-4 and errors["wrong"] > 1e-3, errors


@pytest.mark.parametrize(
    ("model_type", "mechanisms"),
    [
        ("ergo", {"residual_gate", "expert_output_norm", "ungated_experts"}),
        ("kolibri1_1", {"indexed_attention", "kv_shared_layers"}),
    ],
)
def test_new_mechanisms_are_named_and_the_adapter_refuses(tiny, tmp_path: Path, model_type: str, mechanisms) -> None:
    """What the blocks cannot compute is a stub naming the mechanism; the adapter refuses to run (never a crash, never
    a runnable copy of the closest family)."""
    result = generate(tiny(model_type), tmp_path / "out")
    ops = {s["op"] for s in result.stubs}
    assert mechanisms <= ops and not result.passed
    assert result.verification != "passed"
    adapter_file = tmp_path / "out/adapters" / f"{model_type}.py"
    source = adapter_file.read_text()
    assert all(f"kernels/{op}.py" in source and (tmp_path / "out/kernels" / f"{op}.py").is_file() for op in mechanisms)
    # The stubs are checked before any config field: a stubbed adapter's placeholder fields never hide them.
    with pytest.raises(NotRunnable, match="not runnable until kernels/"):
        load_adapter(adapter_file).Model.from_pretrained(tiny(model_type))


def test_ergo_attention_and_norms_map_to_blocks(tiny) -> None:
    """Ergo's serving-export names: fused `wqkv` ([q; k; v] rows, split by head counts in its modelling code), `wo`,
    sandwich norms (attention_norm, post_attention_norm, ffn_norm, post_ffn_norm) and the dense layer's ungated
    up/down: no stub is left for them, only for the mechanisms the blocks lack."""
    the_plan = plan(inspect(str(tiny("ergo"))))
    rules = {rule.target: rule for rule in the_plan.weight_rules}
    assert rules["model.layers.{i}.self_attn.qkv_proj.weight"].sources == ("layers.{i}.attention.wqkv.weight",)
    assert rules["model.layers.{i}.self_attn.qkv_proj.weight"].op == "copy"
    assert rules["model.layers.{i}.self_attn.o_proj.weight"].sources == ("layers.{i}.attention.wo.weight",)
    assert the_plan.spec.placement == "sandwich"
    ops = {s.op for s in the_plan.stubs}
    assert not ops & {"attention_projections", "attention_wqkv", "norm_layout", "post_attention_norm", "mlp"}
    assert not ops & {"feed_forward_up", "feed_forward_down", "feed_forward_router_bias"}


def test_router_ranks_logits_or_scores_with_the_correction_bias() -> None:
    """Kolibri ranks raw logits + bias, every other family sigmoid scores + bias: with logits (2, 0) and bias (0, 0.5)
    they pick different experts; the weight is the chosen expert's sigmoid score either way."""
    from onboard.blocks.moe import RouterSpec, route

    logits, bias = torch.tensor([[2.0, 0.0]]), torch.tensor([0.0, 0.5])
    spec = {"top_k": 1, "scoring": "sigmoid", "norm_topk_prob": False}
    by_logits = route(logits, RouterSpec(**spec, select_by="logits"), bias)
    by_scores = route(logits, RouterSpec(**spec), bias)
    assert by_logits[1].tolist() == [[0]] and by_scores[1].tolist() == [[1]]
    assert torch.allclose(by_logits[0], torch.sigmoid(torch.tensor([[2.0]])))
    assert torch.allclose(by_scores[0], torch.tensor([[0.5]]))
