"""One config-names layer (onboard/names/config.py): inspect (ConfigView) and generate (config_values.ConfigValues,
what the adapters' ModelArgs read) resolve every spelling of every tiny architecture's config identically, the
derived rules included, and the spellings real releases use resolve to their quantity."""

from __future__ import annotations

import json
from functools import cache
from typing import Any

import pytest

from onboard.generate_adapter.compose_mixers import MAMBA_ALIASES
from onboard.generate_adapter.config_values import DERIVED, ConfigValues
from onboard.inspect_checkpoint.config_view import ConfigView, language_model_config, tie_word_embeddings
from onboard.names.config import ALIASES, BARE_HEAD_KEYS, SSM_KEYS, spellings


@cache
def tiny_configs() -> dict[str, dict[str, Any]]:
    """config.json of every tiny architecture tests/tiny builds (as save_pretrained writes it: the diff from the
    class defaults), text models and multimodal wrappers."""
    from tests.tiny.configs import TINY
    from tests.tiny.factory import make_tiny_config
    from tests.tiny.tiny_wrappers import ALL_WRAPPERS

    out = {}
    for model_type in sorted({*TINY, *ALL_WRAPPERS}):
        try:
            config = make_tiny_config(model_type)
        except Exception:  # noqa: BLE001 - the factory's own limits (a config the installed transformers rejects)
            continue
        out[model_type] = json.loads(config.to_json_string(use_diff=True))
    return out


def _readers(raw: dict[str, Any]) -> tuple[ConfigView, ConfigValues]:
    """Inspect's view of config.json, and generate's of the language model's config (as the adapter reads it)."""
    return ConfigView(raw), ConfigValues(language_model_config(raw))


def test_the_tiny_architectures_are_there() -> None:
    assert len(tiny_configs()) > 150, sorted(tiny_configs())


@pytest.mark.parametrize("model_type", sorted(tiny_configs()))
def test_inspect_and_generate_read_every_spelling_identically(model_type: str) -> None:
    raw = tiny_configs()[model_type]
    cv, values = _readers(raw)
    differ = {}
    for name in ALIASES:
        seen, read = cv.get(*spellings(name)), values.get(name)
        if name == "tie_word_embeddings":  # a wrapper ties by its own flag too: inspect's reading of the flag
            seen = tie_word_embeddings(raw)
            seen = cv.get(*spellings(name)[1:]) if seen is None else seen
        if seen != read:
            differ[name] = (seen, read)
    for field, chain in SSM_KEYS.items():  # the Mamba knobs, by the fields composed adapters give them
        # (less Mamba-2's bare head names, which name the attention's heads in a hybrid: inspect reads them for
        # Mamba-2 only, a composed adapter only where the Mamba-2 spelling is absent)
        extra = tuple(key for key in MAMBA_ALIASES[field] if key != BARE_HEAD_KEYS.get(field))
        seen, read = cv.get(*chain), values.get(field, extra)
        if seen != read:
            differ[field] = (seen, read)
    assert not differ, f"{model_type}: inspect and generate read {differ}"


@pytest.mark.parametrize("model_type", sorted(tiny_configs()))
def test_inspect_dims_are_what_generate_derives(model_type: str) -> None:
    """inspect's Dims (config.json alone) against the values a generated adapter derives from the same config: the
    quantities the alias table and the derived rules (multi_query, layer types) decide."""
    from onboard.errors import ConfigError
    from onboard.inspect_checkpoint.architecture import analyze

    raw = tiny_configs()[model_type]
    cv, values = _readers(raw)
    try:
        dims = analyze(cv, None)[0].dims
    except ConfigError:
        pytest.skip("inspect refuses this config on its own (a plausibility check)")

    def derived(name: str) -> Any:
        rule = DERIVED.get(name)
        value = rule(values) if rule is not None else None
        return value if value is not None else values.get(name)

    heads = derived("num_attention_heads") or 0
    read = {
        "hidden_size": derived("hidden_size") or 0,
        "num_layers": derived("num_hidden_layers") or 0,
        "num_attention_heads": heads,
        "num_kv_heads": derived("num_key_value_heads") or heads,
        "max_position_embeddings": derived("max_position_embeddings"),
    }
    seen = {name: getattr(dims, name) for name in read}
    assert seen == read


@pytest.mark.parametrize(
    ("spelling", "value", "name", "expected"),
    [
        ("rotary_pct", 0.25, "partial_rotary_factor", 0.25),  # GPT-NeoX, Pythia
        ("rope_pct", 0.25, "partial_rotary_factor", 0.25),  # StableLM-alpha
        ("rotary_emb_base", 10000.0, "rope_theta", 10000.0),  # GPT-NeoX, StableLM
        ("hidden_dim", 512, "hidden_size", 512),
        ("model_max_length", 2048, "max_position_embeddings", 2048),
        ("local_window", 64, "sliding_window", 64),
    ],
)
def test_release_spellings_resolve_in_both(spelling: str, value: Any, name: str, expected: Any) -> None:
    raw = {"model_type": "a_day_zero_model", spelling: value}  # unknown to transformers: config.json as written
    cv, values = _readers(raw)
    assert cv.get(*spellings(name)) == expected
    assert values.get(name) == expected


def test_inspect_profiles_a_partial_rotary_and_theta_spelled_as_releases_do() -> None:
    """The rope facts inspect profiles from rope_pct / rotary_emb_base: what the adapter's ModelArgs read too."""
    from onboard.inspect_checkpoint.numerics import rope_from_config

    raw = {
        "model_type": "a_day_zero_model",
        "hidden_size": 64,
        "num_attention_heads": 4,
        "rope_pct": 0.25,
        "rotary_emb_base": 50000,
    }
    rope, position = rope_from_config(ConfigView(raw), None)
    assert position == "rope" and rope is not None
    assert (rope.partial_rotary_factor, rope.theta) == (0.25, 50000.0)


def test_a_mamba_knob_spelled_twice_is_read_in_the_same_order() -> None:
    """Nemotron-H's mixer reads use_bias, not its mamba_proj_bias: inspect and the composed adapter alike."""
    raw = {
        "model_type": "a_day_zero_model",
        "use_bias": False,
        "mamba_proj_bias": True,
        "time_step_rank": 8,
        "mamba_dt_rank": 4,
    }
    cv, values = _readers(raw)
    for field in ("mamba_proj_bias", "mamba_dt_rank"):
        assert cv.get(*SSM_KEYS[field]) == values.get(field, MAMBA_ALIASES[field]) == raw[SSM_KEYS[field][0]]


def test_falcons_kv_heads_one_rule_for_both() -> None:
    """Falcon before new_decoder_architecture: one KV head with multi_query (its class's default, so also when the
    key is absent), as many as query heads without; GPT-BigCode's multi_query: one."""
    from onboard.inspect_checkpoint.architecture import analyze

    base = {"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 100}
    cases = [
        ({"model_type": "falcon"}, 1),
        ({"model_type": "falcon", "multi_query": False, "num_kv_heads": 2}, 4),
        ({"model_type": "falcon", "new_decoder_architecture": True, "num_kv_heads": 2}, 2),
        ({"model_type": "gpt_bigcode", "multi_query": True}, 1),
    ]
    for extra, kv in cases:
        raw = {**base, **extra}
        assert analyze(ConfigView(raw), None)[0].dims.num_kv_heads == kv, extra
        assert DERIVED["num_key_value_heads"](ConfigValues(raw)) in (kv, None), extra
