"""Clean reruns without re-recording: the same model with fresh rounding noise, judged at the comparator level.

A clean rerun is what a second, correct implementation produces: the same function, rounded differently. One is
drawn by re-parametrising the checkpoint with random exact rescalings before casting it to the served dtype (a norm
weight ×c with the projections that read it ÷c, v_proj ×c with o_proj ÷c, up_proj ×c with down_proj ÷c). In exact
arithmetic the model is unchanged; in bf16/fp16 every weight and activation rounds differently, so each seed is an
independent draw of implementation noise, plus weight-rounding noise a bf16 release served as stored does not have:
reruns are, if anything, noisier than a real second implementation (the test checks the generated adapter against
them). Eager and sdpa attention alternate where the model allows both (two real kernels). MoE blocks keep their
stored scale (router and experts read one norm); their routing still sees the fresh noise of the attention above.

`noisy_runs` takes DRAWS such runs of the golden suite (teacher-forced, one forward per prompt) and `replay` recombines
them per prompt: prompts are separate forwards, so their noise is independent, and 200 verdicts cost DRAWS forwards.
Greedy generation is read off the teacher-forced rows: until its first divergence a greedy decode sees exactly the
golden sequence, so the first position where the candidate's argmax leaves the golden continuation is where its
generation would diverge; `validate()` judges it with the near-tie rule as for a real generation.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from onboard.validate_serving.candidates import CandidateInfo, Capabilities, Generation, TopK

# (norm whose output feeds the projections, projections that read it): dense families; "(1+w)" norms store w.
NORM_FEEDS = {
    "input_layernorm": ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj"),
    "post_attention_layernorm": ("mlp.gate_proj", "mlp.up_proj"),
    "pre_feedforward_layernorm": ("mlp.gate_proj", "mlp.up_proj"),  # Gemma 2: post_attention_layernorm is a post-norm
}
PAIRS = (("self_attn.v_proj", "self_attn.o_proj"), ("mlp.up_proj", "mlp.down_proj"))


class Reparametrised:
    """A transformers model in the served dtype whose weights are re-drawn, for every `draw(seed)`, from an exact
    rescaling of the float32 master copy (norm x c with its readers / c, v_proj x c with o_proj / c, up_proj x c with
    down_proj / c; c log-uniform in [1/2, 2] per layer and pair)."""

    def __init__(self, model: Any, master: dict[str, Any]) -> None:
        self.model = model
        self.master = master
        self.offset = 1.0 if "gemma" in model.config.model_type else 0.0
        self.layers = len(model.model.layers)

    def draw(self, seed: int) -> None:
        import torch

        rng = random.Random(seed)
        state = dict(self.master)

        def factor() -> float:
            return math.exp(rng.uniform(-math.log(2), math.log(2)))

        for i in range(self.layers):
            pre = f"model.layers.{i}."
            for norm, readers in NORM_FEEDS.items():
                names = [pre + r + ".weight" for r in readers]
                if pre + norm + ".weight" not in state or not all(n in state for n in names):
                    continue  # no such norm, or an MoE block (router and experts) reads it: left as stored
                if norm == "post_attention_layernorm" and pre + "pre_feedforward_layernorm.weight" in state:
                    continue
                c = factor()
                state[pre + norm + ".weight"] = (state[pre + norm + ".weight"] + self.offset) * c - self.offset
                for n in names:
                    state[n] = state[n] / c
            for first, second in PAIRS:
                if pre + second + ".weight" in state:
                    c = factor()
                    state[pre + first + ".weight"] = state[pre + first + ".weight"] * c
                    state[pre + second + ".weight"] = state[pre + second + ".weight"] / c
        with torch.no_grad():
            params = dict(self.model.named_parameters())
            for name, value in state.items():
                if name in params:
                    params[name].copy_(value)
        if getattr(self.model.config, "attn_logit_softcapping", None) is None:  # sdpa has no soft-cap
            self.model.config._attn_implementation = "eager" if seed % 2 else "sdpa"


class TeacherForced:
    """A candidate whose greedy generations are read off its teacher-forced rows on the golden sequences (one
    forward per prompt instead of one per generated token)."""

    def __init__(self, inner: Any, golden: Any, rows: dict[tuple[int, ...], list[TopK]] | None = None) -> None:
        self.inner = inner
        self.info = inner.info
        self.capabilities = Capabilities()
        self.stop_ids = getattr(inner, "stop_ids", ())
        self._sequences = {p.prompt_ids: p.sequence for p in golden.prompts}
        self._rows = dict(rows or {})

    def rows(self, sequence: tuple[int, ...], top_k: int) -> list[TopK]:
        if sequence not in self._rows:
            self._rows[sequence] = self.inner.score([sequence], top_k)[0]
        return self._rows[sequence]

    def score(self, sequences: Sequence[Sequence[int]], top_k: int, padding: str = "right") -> list[list[TopK]]:
        return [self.rows(tuple(s), top_k) for s in sequences]

    def generate(self, prompts: Sequence[Sequence[int]], max_new_tokens: int, top_k: int, **_: Any) -> list[Generation]:
        out = []
        for prompt in prompts:
            rows = self.rows(self._sequences[tuple(prompt)], top_k)[len(prompt) - 1 : len(prompt) - 1 + max_new_tokens]
            out.append(Generation(tuple(r.ids[0] for r in rows), tuple(rows), "length"))
        return out

    def scan_activations(self, sequence: Sequence[int]) -> None:
        return None

    def close(self) -> None:
        if self.inner is not None:
            self.inner.close()


def noisy_runs(path: Path, golden: Any, dtype: str, draws: int, top_k: int) -> list[dict[tuple[int, ...], list[TopK]]]:
    """`draws` re-parametrised runs of the checkpoint in `dtype`: each prompt's teacher-forced rows, per run."""
    from safetensors.torch import load_file

    from onboard.reference import load_transformers
    from onboard.validate_serving.runtime import InProcessCandidate

    model = load_transformers(path, dtype)
    rerun = Reparametrised(model, {k: v.float() for k, v in load_file(path / "model.safetensors").items()})
    scorer = InProcessCandidate(model, path, dtype, kind="rerun", hf=True)
    runs = []
    for seed in range(draws):
        rerun.draw(seed)
        runs.append({p.sequence: scorer.score([p.sequence], top_k)[0] for p in golden.prompts})
    return runs


def replay(golden: Any, runs: list[dict[tuple[int, ...], list[TopK]]], seed: int, dtype: str) -> TeacherForced:
    """A simulated rerun: each prompt's rows taken from one of the real noisy runs, chosen at random (prompts are
    separate forwards, so their noise is independent; `draws` runs give draws^prompts combinations)."""
    rng = random.Random(seed)
    rows = {p.sequence: runs[rng.randrange(len(runs))][p.sequence] for p in golden.prompts}
    return TeacherForced(_Recorded(CandidateInfo(f"rerun-{seed}", "rerun", dtype)), golden, rows)


class _Recorded:
    def __init__(self, info: CandidateInfo) -> None:
        self.info = info

    def score(self, sequences: Any, top_k: int) -> Any:
        raise AssertionError("a replayed rerun answers only the golden sequences")

    def close(self) -> None:
        pass
