"""The prompt suite that goldens are recorded on, sized from the ModelProfile.

Short, multilingual and code prompts; chat prompts through the model's own chat template (encoded without adding
special tokens again: a doubled BOS is a classic day-zero bug, BUGZOO B02); and one long prompt past every boundary
the model has (sliding window, rope original context), where scaling and window bugs live. Without a tokenizer:
seeded pseudo-random token ids (tiny test checkpoints).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from onboard.profile import ModelProfile

SHORT = (
    ("short_capital", "The capital of France is"),
    ("short_story", "Once upon a time, in a small village by the sea,"),
)
MULTILINGUAL = (
    ("multi_de", "Der schnelle braune Fuchs springt über den faulen Hund, und dann"),
    ("multi_zh", "东京是日本的首都，也是世界上人口最多的城市之一。"),
    ("multi_ru", "Москва — столица России, крупнейший город страны и"),
    ("multi_ar_hi", "مرحبا بالعالم. नमस्ते दुनिया, आज का दिन"),
)
CODE = (("code_python", 'def fibonacci(n: int) -> int:\n    """Return the n-th Fibonacci number."""\n    '),)
CHAT = (
    ("chat_simple", [{"role": "user", "content": "Write one sentence about the ocean."}]),
    (
        "chat_system",
        [
            {"role": "system", "content": "You are a terse assistant."},
            {"role": "user", "content": "List three prime numbers."},
        ],
    ),
)
# Filler for the long prompt: varied sentences so the tokens are not one repeated n-gram (a loop is easy to predict
# and would hide position errors).
LONG_SENTENCES = (
    "The river bends twice before it reaches the old mill, where {n} sacks of flour wait.",
    "In chapter {n}, the committee argued about bridges, budgets and the colour of the lamps.",
    "Sensor {n} reported 21.{n} degrees while the wind turned slowly to the north-east.",
    "Whoever keeps the ledger must sign page {n} twice; nobody remembers why.",
    "At step {n} the algorithm swaps the two halves and compares the checksums again.",
)
DEFAULT_LONG_MARGIN = 48
DEFAULT_LONG_FALLBACK = 256
DEFAULT_MAX_LONG = 4096


@dataclass(frozen=True)
class PromptSpec:
    name: str
    kind: str
    """short | chat | multilingual | code | long | ids"""
    ids: tuple[int, ...]
    text: str | None = None
    boundaries: dict[str, int] = field(default_factory=dict)
    """Positions of interest crossed by this prompt, e.g. {"sliding_window": 16, "original_max_position_embeddings": 64}."""


def boundaries_of(profile: ModelProfile | None) -> dict[str, int]:
    """Positions past which a different code path runs: sliding windows, attention chunks, the original rope context."""
    if profile is None:
        return {}
    out: dict[str, int] = {}
    for kind, name in (("sliding", "sliding_window"), ("chunked", "attention_chunk")):
        windows = [layer.window for layer in profile.layers if layer.window and layer.attention == kind]
        if windows:
            out[name] = min(windows)
            if max(windows) != min(windows):
                out[f"{name}_max"] = max(windows)
    rope = profile.rope
    if rope is not None and rope.original_max_position_embeddings:
        out["original_max_position_embeddings"] = int(rope.original_max_position_embeddings)
    return out


@dataclass(frozen=True)
class LongPlan:
    """How long the long prompt is, and which boundaries it crosses (recorded in the goldens' manifest)."""

    tokens: int
    cap: int
    """--max-long-tokens (DEFAULT_MAX_LONG unless raised)."""
    crossed: dict[str, int]
    uncrossed: dict[str, int]
    """boundary -> the --max-long-tokens that would cross it (within the model's context, but past the cap)."""
    beyond_context: dict[str, int]
    """Boundaries no prompt can cross within max_position_embeddings: nothing to check there."""


def plan_long(boundaries: dict[str, int], max_positions: int | None, max_new_tokens: int, cap: int) -> LongPlan:
    """The long prompt: past the furthest boundary by a margin, within the model's context and `cap`."""
    room = max_positions - max_new_tokens - 1 if max_positions else None
    target = max(boundaries.values()) + DEFAULT_LONG_MARGIN if boundaries else DEFAULT_LONG_FALLBACK
    tokens = max(8, min(target, cap, room) if room else min(target, cap))
    crossed, uncrossed, beyond = {}, {}, {}
    for name, at in boundaries.items():
        needed = at + DEFAULT_LONG_MARGIN
        if at < tokens:
            crossed[name] = at
        elif room is not None and at >= room:
            beyond[name] = at
        else:
            uncrossed[name] = min(needed, room) if room else needed
    return LongPlan(tokens, cap, crossed, uncrossed, beyond)


def build_suite(
    tokenizer: Any | None,
    profile: ModelProfile | None,
    *,
    vocab_size: int,
    max_new_tokens: int,
    max_long_tokens: int = DEFAULT_MAX_LONG,
    seed: int = 0,
) -> list[PromptSpec]:
    """The prompt suite for one model. `tokenizer` is a transformers tokenizer or None (then token-id prompts)."""
    max_positions = profile.dims.max_position_embeddings if profile else None
    plan = plan_long(boundaries_of(profile), max_positions, max_new_tokens, max_long_tokens)
    n_long, crossed = plan.tokens, plan.crossed
    if tokenizer is None:
        return _id_suite(vocab_size, n_long, crossed, seed)
    suite: list[PromptSpec] = []
    for kind, items in (("short", SHORT), ("multilingual", MULTILINGUAL), ("code", CODE)):
        for name, text in items:
            suite.append(PromptSpec(name, kind, _encode(tokenizer, text, vocab_size), text))
    if getattr(tokenizer, "chat_template", None):
        for name, messages in CHAT:
            text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
            suite.append(PromptSpec(name, "chat", _encode(tokenizer, text, vocab_size, special=False), text))
    suite.append(_long_prompt(tokenizer, n_long, crossed, vocab_size))
    return suite


def _encode(tokenizer: Any, text: str, vocab_size: int, special: bool = True) -> tuple[int, ...]:
    ids = tokenizer(text, add_special_tokens=special)["input_ids"]
    # A tokenizer larger than the embedding (added tokens past vocab_size, BUGZOO B09) would index out of range.
    return tuple(i for i in ids if i < vocab_size)


def _long_prompt(tokenizer: Any, n_tokens: int, crossed: dict[str, int], vocab_size: int) -> PromptSpec:
    pieces: list[str] = []
    ids: tuple[int, ...] = ()
    n = 0
    while len(ids) < n_tokens:
        # Grow in chunks, re-encoding the whole text so token boundaries are the tokenizer's own.
        for _ in range(16):
            pieces.append(LONG_SENTENCES[n % len(LONG_SENTENCES)].format(n=n))
            n += 1
        ids = _encode(tokenizer, " ".join(pieces), vocab_size)
    ids = ids[:n_tokens]
    return PromptSpec("long", "long", ids, tokenizer.decode(list(ids)), crossed)


def _id_suite(vocab_size: int, n_long: int, crossed: dict[str, int], seed: int) -> list[PromptSpec]:
    rng = random.Random(seed)
    suite = [
        PromptSpec(f"ids_{i}", "ids", tuple(rng.randrange(vocab_size) for _ in range(length)))
        for i, length in enumerate((5, 12, 23, 40))
    ]
    suite.append(PromptSpec("long", "long", tuple(rng.randrange(vocab_size) for _ in range(n_long)), None, crossed))
    return suite
