"""Multi-token-prediction (MTP) layers as a self-draft: DeepSeek-V3's `num_nextn_predict_layers` layout.

MTP depth d sits at `model.layers.{num_hidden_layers + d}`: the family's decoder layer (the adapter's own, loaded
through its weight map) plus `enorm`, `hnorm`, `eh_proj` and `shared_head`. One step, as transformers' `MtpModel`:

    x = eh_proj([enorm(embed(token t+1)); hnorm(h_t)])      h_t: the target's post-final-norm hidden state at t
    logits = shared_head.head(shared_head.norm(decoder_layer(x)))   (rotary position t+1) -> token t+2

A chain recycles the normed output as the next step's hidden state (vLLM's chain). vLLM places step t at rotary
position t and zeroes the embedding at position 0: only that first position differs; we follow transformers.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch
from torch import nn

from onboard.blocks.attention import AttentionContext, LayerKV
from onboard.blocks.embeddings import Embedding, LMHead
from onboard.errors import InputError
from onboard.generate_adapter.loader import checkpoint_index, load_weights
from onboard.generate_adapter.runtime import AdapterModel


def mtp_depths(args: object) -> int:
    """MTP layers the config declares (DeepSeek-V3: `num_nextn_predict_layers`; transformers: `num_mtp_layers`)."""
    return int(getattr(args, "num_nextn_predict_layers", 0) or 0)


class MTPDraft(nn.Module):
    """The checkpoint's MTP layers, sharing the target's rotary tables (and its embedding / LM head where the
    checkpoint stores no copy). Parameter names equal the checkpoint's tensor names (`model.layers.N.…`)."""

    def __init__(self, target: AdapterModel, layers: dict[int, nn.Module]) -> None:
        super().__init__()
        self.model = nn.Module()
        self.model.layers = nn.ModuleDict({str(i): layer for i, layer in layers.items()})
        self.first = min(layers)
        self._target = (target,)  # a tuple: not registered as a submodule (its parameters are not ours)

    @property
    def depths(self) -> int:
        return len(self.model.layers)

    def layer(self, depth: int) -> nn.Module:
        return self.model.layers[str(self.first + depth % self.depths)]

    def step(
        self, depth: int, tokens: torch.Tensor, hidden: torch.Tensor, positions: torch.Tensor, cache: LayerKV
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """One MTP step over [1, S] tokens (each the token after its hidden state's position) -> (logits [1, S, V]
        float32, normed output [1, S, H] to recycle). `cache` holds this layer's keys of earlier steps."""
        layer, target = self.layer(depth), self._target[0]
        embed = layer.embed_tokens if hasattr(layer, "embed_tokens") else target.model.embed_tokens
        head = layer.shared_head.head if hasattr(layer.shared_head, "head") else target.lm_head
        x = layer.eh_proj(torch.cat((layer.enorm(embed(tokens)), layer.hnorm(hidden.to(embed.weight.dtype))), -1))
        cos, sin = target.rotary[layer.rope_kind](positions)
        out = layer.shared_head.norm(layer(x, cos, sin, AttentionContext(None, cache)))
        return head(out), out


def load_mtp(checkpoint: str | Path, target: AdapterModel) -> MTPDraft:
    """Build and load the MTP layers of `checkpoint` for the in-process `target` adapter (same dtype and device);
    InputError when the config declares none or the checkpoint lacks their tensors."""
    path, args = Path(checkpoint), target.args
    depths = mtp_depths(args)
    if depths == 0:
        raise InputError(
            f"{path / 'config.json'}: num_nextn_predict_layers is 0 or absent: the checkpoint declares no MTP layer",
            "use a draft model or `ngram` instead of `mtp`",
        )
    first = args.num_hidden_layers
    names = checkpoint_index(path)
    absent = [i for i in range(first, first + depths) if f"model.layers.{i}.eh_proj.weight" not in names]
    if absent:
        raise InputError(
            f"{path}: config.json declares {depths} MTP layer(s) but the checkpoint has no tensors "
            f"model.layers.{absent[0]}.* (eh_proj, enorm, hnorm, shared_head, decoder layer)",
            "use the original release (conversions and quantizations often drop the MTP layers), or draft with "
            "a draft model / `ngram`",
        )
    family = sys.modules[type(target).__module__]
    weight = target.lm_head.weight
    previous = torch.get_default_dtype()
    torch.set_default_dtype(weight.dtype)
    try:
        with torch.device(weight.device):
            layers = {i: _mtp_layer(family, args, i, names) for i in range(first, first + depths)}
    finally:
        torch.set_default_dtype(previous)
    draft = MTPDraft(target, layers)
    own = "|".join(str(i) for i in layers)
    load_weights(draft, path, type(target).WEIGHT_MAP, type(target).DROPPED + (rf"(?!model\.layers\.({own})\.).*",))
    return draft.eval()


def _mtp_layer(family: object, args: object, index: int, names: dict[str, Path]) -> nn.Module:
    """The family's decoder layer at `index` with the MTP extras attached under the checkpoint's names."""
    hidden, vocab = args.hidden_size, args.vocab_size  # type: ignore[attr-defined]
    layer = family.DecoderLayer(args, index)  # type: ignore[attr-defined]
    layer.enorm = family.norm(args, hidden)  # type: ignore[attr-defined]
    layer.hnorm = family.norm(args, hidden)  # type: ignore[attr-defined]
    layer.eh_proj = nn.Linear(2 * hidden, hidden, bias=False)
    layer.shared_head = nn.Module()
    layer.shared_head.norm = family.norm(args, hidden)  # type: ignore[attr-defined]
    prefix = f"model.layers.{index}."
    if prefix + "shared_head.head.weight" in names:
        layer.shared_head.head = LMHead(hidden, vocab)
    if prefix + "embed_tokens.weight" in names:
        layer.embed_tokens = Embedding(vocab, hidden)
    return layer


@torch.no_grad()
def target_hidden(target: AdapterModel, input_ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """input_ids [1, S] -> (target logits [1, S, V] float32, post-final-norm hidden states [1, S, H])."""
    logits, hidden = target(input_ids, return_hidden_states=True)
    return logits, target.model.norm(hidden[-1])


@torch.no_grad()
def mtp_draft_logits(draft: MTPDraft, hidden: torch.Tensor, input_ids: torch.Tensor) -> torch.Tensor:
    """Teacher-forced first MTP depth over a sequence: [1, S-1, V] float32, row t = the draft's distribution for
    token t+2 from the target's hidden state at t and token t+1."""
    seq = input_ids.shape[1]
    positions = torch.arange(1, seq, device=input_ids.device)[None]
    return draft.step(0, input_ids[:, 1:], hidden[:, :-1], positions, LayerKV())[0]


@torch.no_grad()
def mtp_draft_chain(draft: MTPDraft, hidden: torch.Tensor, input_ids: torch.Tensor, start: int, k: int) -> torch.Tensor:
    """The k-token draft window an engine proposes after verifying tokens <= start+1 (the target's hidden state at
    `start`): [k, V] float32, row j the distribution for token start+2+j.

    Step j uses MTP layer j % depths and recycles the previous step's normed output (vLLM's chain). Step inputs are
    the sequence's own tokens: acceptance is only ever read along an accepted prefix, where they are the drafts'."""
    _check_window(input_ids, start, k)
    return mtp_draft_windows(draft, hidden[:, : start + 1], input_ids[:, : start + 1 + k], k, [start])[0]


@torch.no_grad()
def mtp_draft_windows(
    draft: MTPDraft, hidden: torch.Tensor, input_ids: torch.Tensor, k: int, starts: list[int] | None = None
) -> torch.Tensor:
    """`mtp_draft_chain` for many starts sharing one teacher-forced pass: [len(starts), k, V] float32.
    Default starts: every full window of the sequence."""
    seq = input_ids.shape[1]
    starts = list(range(seq - 1 - k)) if starts is None else starts
    for start in starts:
        _check_window(input_ids, start, k)
    prefix = LayerKV()  # depth 0 over the teacher-forced sequence: the keys every window's first step sees
    width = min(hidden.shape[1], seq - 1)
    positions = torch.arange(1, seq, device=input_ids.device)[None]
    first, recycled = draft.step(0, input_ids[:, 1 : width + 1], hidden[:, :width], positions[:, :width], prefix)
    windows = []
    for start in starts:
        rows, state = [first[0, start]], recycled[:, start : start + 1]
        caches = {0: _truncated(prefix, start + 1)}
        for j in range(1, k):
            cache = caches.setdefault(j % draft.depths, LayerKV())
            token = input_ids[:, start + 1 + j : start + 2 + j]
            logits, state = draft.step(j, token, state, positions[:, start + j : start + j + 1], cache)
            rows.append(logits[0, 0])
        windows.append(torch.stack(rows))
    return torch.stack(windows) if windows else first.new_zeros(0, k, first.shape[-1])


def _check_window(input_ids: torch.Tensor, start: int, k: int) -> None:
    seq = input_ids.shape[1]
    if start < 0 or k < 1 or start + 1 + k > seq:
        raise ValueError(f"a {k}-token window needs 0 <= start <= {seq - 1 - k} for a {seq}-token sequence")


def _truncated(cache: LayerKV, length: int) -> LayerKV:
    """A branch of `cache` holding its first `length` keys (extending it leaves the original untouched)."""
    out = LayerKV()
    out.k, out.v = cache.k[:, :, :length], cache.v[:, :, :length]  # type: ignore[index]
    return out
