"""Generated adapters over padded batches and with a KV cache: a padded row equals the row alone, and cached
decoding equals recomputing the whole prefix.

Not bitwise, and why: a padded row's attention reduces over a longer (masked) key axis and a one-row forward takes
the GEMV path instead of GEMM, so float32 sums are grouped differently. Measured: max |padded - alone| is 4.6e-7 to
7.8e-7 of the row's largest logit (a few ulp); the tolerance is 1e-5 of it. That tolerance means something because
the classic padding bug (padding keys visible to real queries) breaks it by five orders of magnitude (1.1 to 1.6)
on these checkpoints with sharpened attention: softmax scale x16 gives a median top attention weight of 0.35-0.75
per query, as trained heads have, instead of the near-uniform ~0.05 of random weights.
"""

from __future__ import annotations

import importlib

import pytest
import torch

from onboard.blocks import attention
from onboard.comparator import tolerances
from onboard.generate_adapter import runtime
from onboard.generate_adapter.runtime import KVCache
from onboard.validate_serving.checks import determinism_padding
from onboard.validate_serving.golden import GoldenPrompt, GoldenSet
from onboard.validate_serving.runtime import load_candidate

# Each brings one attention path: biases (llama), sliding window on some layers (qwen2), soft-capping + sliding +
# sandwich norms (gemma2), sinks + sliding + MoE (gpt_oss), MLA + MoE (deepseek_v3).
ARCHS = ["llama", "qwen2", "gemma2", "gpt_oss", "deepseek_v3"]
LENGTHS = (41, 7, 23)  # 41 > 2 x the tiny 16-token window; 7 is padded by 34
REL_TOL = 1e-5
SHARPEN = 16.0


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _sharpened(tiny, model_type: str) -> torch.nn.Module:
    return _sharpen(importlib.import_module(f"adapters.{model_type}").Model.from_pretrained(tiny(model_type)))


def _sharpen(model: torch.nn.Module) -> torch.nn.Module:
    for module in model.modules():
        if hasattr(module, "scale") and hasattr(module, "o_proj"):  # Attention / MLAttention softmax scale
            module.scale *= SHARPEN
    return model


def _left_padded(rows: list[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    width = max(len(r) for r in rows)
    ids = torch.zeros(len(rows), width, dtype=torch.long)
    mask = torch.zeros_like(ids)
    for i, row in enumerate(rows):
        ids[i, width - len(row) :], mask[i, width - len(row) :] = row, 1
    return ids, mask


def _worst_relative(model: torch.nn.Module, rows: list[torch.Tensor]) -> float:
    """max over rows of max|padded row - row alone| / max|row alone|."""
    ids, mask = _left_padded(rows)
    with torch.no_grad():
        padded = model(ids, attention_mask=mask)
        worst = 0.0
        for i, row in enumerate(rows):
            alone = model(row[None])[0]
            diff = (padded[i, ids.shape[1] - len(row) :] - alone).abs().max()
            worst = max(worst, float(diff / alone.abs().max()))
    return worst


def _rows(seed: int = 0) -> list[torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    return [torch.randint(0, 1000, (n,), generator=gen) for n in LENGTHS]


@pytest.mark.parametrize("model_type", ARCHS)
def test_padded_rows_equal_rows_alone_and_padding_bugs_do_not(tiny, model_type: str, monkeypatch) -> None:
    model, rows = _sharpened(tiny, model_type), _rows()
    clean = _worst_relative(model, rows)
    print(f"{model_type}: padded vs alone, max relative logit difference {clean:.2g}")
    assert clean <= REL_TOL

    # The classic bug: padding keys visible to real queries.
    monkeypatch.setattr(attention, "padded_mask", lambda causal, key_mask: causal)
    visible = _worst_relative(model, rows)
    print(f"{model_type}: with padding keys visible {visible:.2g}")
    assert visible > 100 * REL_TOL


def test_positions_count_from_each_rows_first_real_token() -> None:
    """Rotary scores depend on position differences only, so a constant per-row offset is invisible to plain rope;
    right positions still matter where rope depends on the absolute position (dynamic NTK and longrope switch on the
    longest position, as in transformers)."""
    _, mask = _left_padded([torch.ones(4, dtype=torch.long), torch.ones(2, dtype=torch.long)])
    assert runtime.padded_positions(mask).tolist() == [[0, 1, 2, 3], [0, 0, 0, 1]]


@pytest.mark.parametrize("model_type", ARCHS)
def test_cached_decoding_equals_full_recompute(tiny, model_type: str) -> None:
    """Greedy decoding of a left-padded batch with a KV cache: each row's tokens and logits equal recomputing the
    row alone from scratch at every step (the quadratic way)."""
    cache = _decode_against_recompute(_sharpened(tiny, model_type), _rows(1))
    assert cache.length == max(len(r) for r in _rows(1)) + 6


def _decode_against_recompute(model: torch.nn.Module, rows: list[torch.Tensor], steps: int = 6) -> KVCache:
    """Greedy decoding of the left-padded rows with a KV cache; asserts each row's tokens and logits equal
    recomputing the row alone from scratch at every step. Returns the cache."""
    ids, mask = _left_padded(rows)
    cache, logits_by_step, generated = KVCache(), [], [[] for _ in rows]
    with torch.no_grad():
        logits = model(ids, attention_mask=mask, cache=cache)[:, -1]
        for _ in range(steps):
            logits_by_step.append(logits)
            token = logits.argmax(-1, keepdim=True)
            for row, t in zip(generated, token.tolist()):
                row.append(t[0])
            mask = torch.cat((mask, torch.ones_like(token)), dim=1)
            logits = model(token, attention_mask=mask, cache=cache)[:, -1]
        for i, row in enumerate(rows):
            full = model(torch.cat((row, torch.tensor(generated[i][:-1])))[None])[0, len(row) - 1 :]
            cached = torch.stack([s[i] for s in logits_by_step])
            assert full.argmax(-1).tolist() == generated[i]
            assert float((cached - full).abs().max() / full.abs().max()) <= REL_TOL
    return cache


def test_mask_must_cover_cached_and_new_tokens(tiny) -> None:
    model = importlib.import_module("adapters.llama").Model.from_pretrained(tiny("llama"))
    cache = KVCache()
    with torch.no_grad():
        model(torch.tensor([[1, 2, 3]]), cache=cache)
        with pytest.raises(ValueError, match=r"expected \(1, 4\)"):
            model(torch.tensor([[4]]), attention_mask=torch.ones(1, 1, dtype=torch.long), cache=cache)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_determinism_padding_check_runs_in_process_and_catches_visible_padding(tiny, monkeypatch, dtype) -> None:
    """The validate check on the adapter candidate: the shortest prompt alone vs left/right-padded among longer ones.
    It compares the candidate with itself, so goldens need only prompts (no reference rows). Measured spreads, clean
    vs visible padding: float32 9.5e-7 vs 0.40 (tolerance 2e-5), bfloat16 7.9e-3 vs 0.40 (tolerance 8e-2)."""
    rows = _rows(2)
    prompts = tuple(
        GoldenPrompt(f"p{i}", "plain", None, tuple(r[:-4].tolist()), tuple(r[-4:].tolist()), ())
        for i, r in enumerate(rows)
    )
    golden = GoldenSet(tiny.root, {}, prompts)
    tol = tolerances(dtype, None)
    candidate = load_candidate(tiny("qwen2"), dtype, runtime="adapter", wrap=_sharpen)
    clean = determinism_padding(golden, candidate, 10, tol)
    print(clean.detail)
    assert clean.passed and not clean.skipped and clean.data["arrangements"] == 4
    assert clean.data["max_difference"] <= tol.max_logprob_error
    monkeypatch.setattr(attention, "padded_mask", lambda causal, key_mask: causal)
    broken = determinism_padding(golden, candidate, 10, tol)
    print(broken.detail)
    assert not broken.passed and "left-padded batch" in broken.detail


def _composed(tiny, tmp_path, model_type: str) -> torch.nn.Module:
    """An adapter composed from the tiny checkpoint, sharpened like the committed ones."""
    from onboard.generate_adapter import generate
    from onboard.generate_adapter.parity import load_adapter

    generate(tiny(model_type), tmp_path / "out")
    return _sharpen(load_adapter(tmp_path / f"out/adapters/{model_type}.py").Model.from_pretrained(tiny(model_type)))


def test_sparse_attention_padded_rows_and_cached_indexer_keys(tiny, tmp_path) -> None:
    """DeepSeek-V3.2's indexer (top 4 keys per query) over a left-padded batch: a padded row equals the row alone
    (padding keys never selected; the top-k over the row's own keys, as unpadded). With a KV cache the indexer's
    keys are cached like the attention's: after decoding, layer 0's (computed from the embeddings alone) equal the
    keys recomputed from the whole sequence, position by position.
    (Cached logits are not compared with a full recompute: which of several exactly tied keys torch.topk keeps
    depends on the row's length, in transformers as here, and relu'd scores tie often in a 2-head indexer.)"""
    model, rows = _composed(tiny, tmp_path, "deepseek_v32"), _rows()
    assert _worst_relative(model, rows) <= REL_TOL
    indexers = [m.self_attn.indexer for m in model.model.layers]
    assert all(i is not None for i in indexers)
    ids = rows[0][None]
    cache = KVCache()
    with torch.no_grad():
        model(ids[:, :30], cache=cache)
        for t in range(30, ids.shape[1]):
            model(ids[:, t : t + 1], cache=cache)
        fresh = KVCache()
        model(ids, cache=fresh)
    cached, whole = cache.layers[0].index_k, fresh.layers[0].index_k
    assert cached.shape == whole.shape == (1, ids.shape[1], indexers[0].spec.head_dim)
    torch.testing.assert_close(cached, whole, atol=1e-6, rtol=1e-6)


def test_short_conv_layers_padded_rows_and_cached_decoding(tiny, tmp_path) -> None:
    """LFM2's conv layers (a composed adapter): a left-padded row equals the row alone (padding zeroed before the
    convolution), and greedy decoding with the convolution state cached equals recomputing each row from scratch."""
    model, rows = _composed(tiny, tmp_path, "lfm2"), _rows()
    assert _worst_relative(model, rows) <= REL_TOL
    cache = _decode_against_recompute(model, _rows(1))
    assert cache.layers[0].conv_state is not None  # layer 0 convolves


def test_linear_attention_layers_padded_rows_and_cached_decoding(tiny, tmp_path) -> None:
    """Qwen3-Next's Gated DeltaNet layers (a composed adapter): a left-padded row equals the row alone (padding zeroed,
    so the state stays at zero through it), and greedy decoding with the convolution and recurrent states cached
    equals recomputing each row from scratch."""
    model, rows = _composed(tiny, tmp_path, "qwen3_next"), _rows()
    assert _worst_relative(model, rows) <= REL_TOL
    cache = _decode_against_recompute(model, _rows(1))
    assert any(layer.recurrent_state is not None for layer in cache.layers)


def test_alibi_padded_rows_and_cached_decoding(tiny, tmp_path) -> None:
    """BLOOM's ALiBi (a composed adapter) biases by key index: left padding shifts a padded row's biases by one
    constant, which softmax ignores, so a padded row equals the row alone; cached decoding equals recomputing."""
    model, rows = _composed(tiny, tmp_path, "bloom"), _rows()
    assert _worst_relative(model, rows) <= REL_TOL
    _decode_against_recompute(model, _rows(1))


def test_kv_shared_layers_padded_rows_and_cached_decoding(tiny, tmp_path) -> None:
    """Gemma 4's KV-shared layers (a composed adapter): they attend over their source layer's keys and values,
    which that layer keeps in the same cache entry; a left-padded row equals the row alone, greedy decoding with the
    cache equals recomputing each row from scratch, and the shared layers cache nothing of their own."""
    model, rows = _composed(tiny, tmp_path, "gemma4_unified_text"), _rows()
    assert _worst_relative(model, rows) <= REL_TOL
    cache = _decode_against_recompute(model, _rows(1))
    sources = [getattr(layer, "kv_source", None) for layer in model.model.layers]
    assert sources == [None, None, 0, 1]  # the last two layers read the last earlier layer of their type
    assert [layer.k is None for layer in cache.layers] == [False, False, True, True]


def test_per_layer_inputs_padded_rows_and_cached_decoding(tiny, tmp_path) -> None:
    """Gemma 4's per-layer embeddings (a composed adapter) are computed for each call's own tokens: a left-padded row
    equals the row alone, and greedy decoding with the cache equals recomputing each row from scratch."""
    model, rows = _composed(tiny, tmp_path, "gemma4_text"), _rows()
    assert model.model.per_layer_inputs is not None
    assert _worst_relative(model, rows) <= REL_TOL
    _decode_against_recompute(model, _rows(1))
