"""Build the trained tiny reference model: a Qwen3-shaped checkpoint of ~2M parameters trained for a few CPU minutes.

Why: random tiny checkpoints have near-uniform outputs (attention logits ~0.03, output logits ~0.16), so a dropped
soft-cap, a wrong rope theta or logits x1.03 barely move them; checks calibrated on them say nothing about what they
would catch on a real model. This model has peaked next-token distributions, attention that looks somewhere, and
the small embeddings of a real checkpoint (so rms_norm_eps matters as it does in real models).

Offline and deterministic: the text is the Python standard library's docstrings (a fixed module list, read with
`inspect`) plus this repository's docs/*.md, frozen into `corpus.txt.gz` the first time (docstrings differ between
Python versions and the docs change: the frozen copy keeps every rebuild identical). The tokenizer is a byte-level
BPE (4032 merges-based tokens + Qwen3's 26 special tokens at the end, Qwen2's pre-tokenizer) trained with the
`tokenizers` library; the chat template and special tokens are Qwen3's. Training: torch.manual_seed(0), one
thread, deterministic algorithms, a fixed number of steps (not a time budget).

    .venv/bin/python scripts/train_tiny_reference.py            # rebuild tests/fixtures/trained-qwen3/ (~4 min)
    .venv/bin/python scripts/train_tiny_reference.py --tokenizer-only --out /tmp/t   # config + tokenizer only
    .venv/bin/python scripts/train_tiny_reference.py --refresh-corpus                # re-extract the corpus
    .venv/bin/python scripts/train_tiny_reference.py --draft     # tests/fixtures/trained-qwen3-draft/ (~1 min)
    .venv/bin/python scripts/train_tiny_reference.py --untied    # tests/fixtures/trained-qwen3-untied/ (~5 min)
    .venv/bin/python scripts/train_tiny_reference.py --tools     # tests/fixtures/trained-qwen3-tools/ (~5 min)

`--draft` trains a much smaller model of the same family on the same corpus with the same tokenizer (copied from
the built reference): the draft model of speculative-decoding tests (`onboard draft-check`, issue 15).

`--untied` trains the same recipe on the same corpus and tokenizer at hidden 256 (heads of 64) with an untied
output head: the quantization fixture (`onboard quantize-plan`, issue 13). Every row is a multiple of 256 wide, so
llama.cpp's K-quants (Q4_K, Q6_K: super-blocks of 256) apply as they do to every released model; on the reference's
192-wide rows llama-quantize stores them as their fallbacks (Q5_0, Q8_0), and its tied embedding (35% of the weights)
is one tensor for the input and the head. Untied, as in Llama-3.1-8B, Qwen3-8B and Mistral-7B.

`--tools` fine-tunes the reference's weights (same tokenizer and Qwen3 chat template: Hermes-style `<tool_call>` JSON,
`<think>` reasoning) on synthetic tool-call conversations rendered through that template with `tools=`, the
conformance suite's (onboard/tool_calls/suite.py) and variations on them, mixed with windows of the same corpus: the
tool-calling fixture (issue 43), whose greedy answers to the suite parse into the suite's expected calls.

Bit-identical weights need the same torch version and CPU instruction set (float summation order differs between
AVX2 and AVX-512 kernels): compare `sha256sum model.safetensors` with PROVENANCE.md on such a machine.
"""

from __future__ import annotations

import argparse
import functools
import gzip
import hashlib
import importlib
import inspect
import json
import math
import operator
import os
import random
import re
import shutil
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
OUT = REPO / "tests" / "fixtures" / "trained-qwen3"
QWEN3_TOKENIZER = REPO / "examples" / "tokenizer-qwen3"
CORPUS_FILE = "corpus.txt.gz"
DOC_SEPARATOR = "\n\x1e\n"  # record separator between documents in the frozen corpus

# Documented, pure-Python-heavy standard library modules: rich English prose about code.
STDLIB_MODULES = (
    "abc", "argparse", "ast", "base64", "bisect", "builtins", "calendar", "codecs", "collections", "configparser",
    "contextlib", "copy", "csv", "dataclasses", "datetime", "decimal", "difflib", "email.message", "enum",
    "fnmatch", "fractions", "functools", "glob", "gzip", "hashlib", "heapq", "hmac", "html", "http.client",
    "inspect", "io", "ipaddress", "itertools", "json", "logging", "math", "operator", "os", "os.path", "pathlib",
    "pickle", "platform", "pprint", "queue", "random", "re", "secrets", "shlex", "shutil", "socket", "sqlite3",
    "statistics", "string", "struct", "subprocess", "tarfile", "tempfile", "textwrap", "threading", "time",
    "tokenize", "traceback", "types", "typing", "unittest", "urllib.parse", "uuid", "warnings", "weakref",
    "xml.etree.ElementTree", "zipfile", "zlib",
)  # fmt: skip
QUESTIONS = ("What does {name} do?", "Explain {name}.", "How do I use {name}?", "Describe {name} in Python.")

BPE_VOCAB = 4032  # byte alphabet + merges; multiple of 64
VOCAB_SIZE = 4096  # BPE + 26 special tokens + unused rows (as Qwen3's 151936 > 151669 ids)
CONFIG: dict[str, Any] = dict(  # shrunk from Qwen/Qwen3-1.7B (real values in comments)
    hidden_size=192,  # 2048
    num_hidden_layers=4,  # 28
    num_attention_heads=4,  # 16
    num_key_value_heads=2,  # 8
    head_dim=32,  # 128; the smallest vLLM's CPU build serves
    intermediate_size=512,  # 6144
    vocab_size=VOCAB_SIZE,  # 151936
    max_position_embeddings=4096,  # 40960
    rope_theta=1000000.0,
    rms_norm_eps=1e-6,
    tie_word_embeddings=True,
)
# The quantization fixture: K-quant-native widths (every row a multiple of 256) and an untied head.
UNTIED_OUT = REPO / "tests" / "fixtures" / "trained-qwen3-untied"
UNTIED_CONFIG: dict[str, Any] = dict(CONFIG, hidden_size=256, head_dim=64, tie_word_embeddings=False)
# The draft: same vocabulary and tokenizer, ~6% of the reference's parameters (a real draft is 5-15% of its target,
# e.g. Qwen3-0.6B for Qwen3-8B), small enough to commit (a few hundred KB in bfloat16).
DRAFT_OUT = REPO / "tests" / "fixtures" / "trained-qwen3-draft"
DRAFT_CONFIG: dict[str, Any] = dict(CONFIG, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                                    num_key_value_heads=1, head_dim=16, intermediate_size=96)  # fmt: skip
TOKENIZER_FILES = ("vocab.json", "merges.txt", "tokenizer_config.json", "added_tokens.json", "special_tokens_map.json")
SEQ_LEN = 128
BATCH = 16
STEPS = 320
LR, WARMUP, MIN_LR_FRACTION, WEIGHT_DECAY = 3e-3, 20, 0.1, 0.1
HELD_OUT = 0.02  # fraction of sequences kept out of training for the PROVENANCE measurements


# ---- corpus ---------------------------------------------------------------------------------------------------


def _signature(obj: Any) -> str:
    try:
        text = str(inspect.signature(obj))
    except (TypeError, ValueError):
        return "(...)"
    return re.sub(r" at 0x[0-9a-fA-F]+", "", text)  # sentinel defaults print their address: not reproducible


def _own_doc(obj: Any) -> str | None:
    """The object's own docstring (not one inherited from a base class: every exception would repeat Exception's)."""
    doc = vars(obj).get("__doc__") if inspect.isclass(obj) else getattr(obj, "__doc__", None)
    return inspect.cleandoc(doc) if isinstance(doc, str) else None


def _members(module: Any) -> list[tuple[str, Any]]:
    """Public functions and classes defined in `module` (not re-exported), with the public methods of classes."""
    out = []
    for name in sorted(dir(module)):
        obj = getattr(module, name, None)
        if name.startswith("_") or inspect.ismodule(obj) or not (inspect.isclass(obj) or callable(obj)):
            continue
        if getattr(obj, "__module__", module.__name__) not in (module.__name__, "builtins", "posix", "_io"):
            continue
        qual = f"{module.__name__}.{name}" if module.__name__ != "builtins" else name
        out.append((qual, obj))
        if inspect.isclass(obj):
            for attr in sorted(vars(obj)):
                member = vars(obj)[attr]
                if not attr.startswith("_") and callable(member) and _own_doc(member):
                    out.append((f"{qual}.{attr}", member))
    return out


def extract_corpus() -> list[str]:
    """Documents: module docstrings, one per documented member ("name(signature)" + docstring), the repo's docs,
    and chat turns asking about a member and answering with its docstring's first paragraph."""
    docs: list[str] = []
    chats: list[str] = []
    rng = random.Random(0)
    for modname in STDLIB_MODULES:
        module = importlib.import_module(modname)
        if inspect.getdoc(module):
            docs.append(f"Module {modname}\n\n{inspect.getdoc(module)}")
        for qual, obj in _members(module):
            doc = _own_doc(obj)
            if not doc or len(doc) < 40:
                continue
            head = f"{qual}{_signature(obj)}" if callable(obj) and not inspect.isclass(obj) else f"class {qual}"
            docs.append(f"{head}\n\n{doc}")
            answer = doc.split("\n\n")[0].strip()
            question = QUESTIONS[rng.randrange(len(QUESTIONS))].format(name=qual)
            chats.append(f"<|im_start|>user\n{question}<|im_end|>\n<|im_start|>assistant\n{qual}: {answer}<|im_end|>\n")
    for md in sorted((REPO / "docs").glob("*.md")):
        docs.extend(part.strip() for part in md.read_text(encoding="utf-8").split("\n## ") if part.strip())
    return docs + chats


def read_corpus(frozen: Path) -> list[str]:
    return gzip.decompress(frozen.read_bytes()).decode("utf-8").split(DOC_SEPARATOR)


def write_corpus(frozen: Path, docs: list[str]) -> None:
    data = DOC_SEPARATOR.join(docs).encode("utf-8")
    with open(frozen, "wb") as fh, gzip.GzipFile(fileobj=fh, mode="wb", mtime=0, filename="") as gz:
        gz.write(data)  # mtime 0 and no name: the same text gives the same bytes


# ---- tokenizer -------------------------------------------------------------------------------------------------


def _qwen3_specials() -> list[tuple[str, dict[str, Any]]]:
    """Qwen3's special tokens in id order, with their added_tokens_decoder entries."""
    config = json.loads((QWEN3_TOKENIZER / "tokenizer_config.json").read_text(encoding="utf-8"))
    decoder = config["added_tokens_decoder"]
    return [(decoder[k]["content"], decoder[k]) for k in sorted(decoder, key=int)]


def train_tokenizer(docs: list[str], out: Path) -> Any:
    """Byte-level BPE with Qwen2's normalizer and pre-tokenizer, saved as vocab.json + merges.txt (+ Qwen3's
    tokenizer_config.json, special tokens and chat template with ids moved to the end of this vocabulary)."""
    os.environ["TOKENIZERS_PARALLELISM"] = "false"  # sequential counting: merges cannot depend on thread scheduling
    from tokenizers import Regex, Tokenizer, decoders, normalizers, pre_tokenizers
    from tokenizers.models import BPE
    from tokenizers.trainers import BpeTrainer
    from transformers.models.qwen2.tokenization_qwen2 import PRETOKENIZE_REGEX

    tok = Tokenizer(BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(PRETOKENIZE_REGEX), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    specials = _qwen3_specials()
    plain = [_strip_specials(d, [s for s, _ in specials]) for d in docs]
    trainer = BpeTrainer(
        vocab_size=BPE_VOCAB, min_frequency=2, show_progress=False, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    tok.train_from_iterator(plain, trainer=trainer)
    if tok.get_vocab_size() != BPE_VOCAB:
        raise SystemExit(f"BPE vocabulary has {tok.get_vocab_size()} tokens, expected {BPE_VOCAB}: corpus too small")
    out.mkdir(parents=True, exist_ok=True)
    tok.model.save(str(out))  # vocab.json + merges.txt, the layout of examples/tokenizer-qwen3
    ids = {content: BPE_VOCAB + i for i, (content, _) in enumerate(specials)}
    config = json.loads((QWEN3_TOKENIZER / "tokenizer_config.json").read_text(encoding="utf-8"))
    config["added_tokens_decoder"] = {str(ids[c]): entry for c, entry in specials}
    _write_json(out / "tokenizer_config.json", config)
    _write_json(out / "added_tokens.json", dict(sorted(ids.items())))
    shutil.copy2(QWEN3_TOKENIZER / "special_tokens_map.json", out / "special_tokens_map.json")
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(out, trust_remote_code=False)


def _strip_specials(text: str, specials: list[str]) -> str:
    for s in specials:
        text = text.replace(s, "\n")
    return text


def _write_json(path: Path, doc: Any) -> None:
    path.write_text(json.dumps(doc, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def model_config(tokenizer: Any, shape: dict[str, Any] = CONFIG) -> Any:
    from transformers import Qwen3Config

    eot, eos = tokenizer.convert_tokens_to_ids("<|endoftext|>"), tokenizer.convert_tokens_to_ids("<|im_end|>")
    config = Qwen3Config(**shape, bos_token_id=eot, eos_token_id=eos, pad_token_id=eot)
    config.architectures = ["Qwen3ForCausalLM"]
    return config


def write_config(config: Any, out: Path) -> None:
    import torch

    config.dtype = torch.bfloat16  # the stored weights' dtype, as in a real bf16 release
    config.save_pretrained(out)
    gen = {"bos_token_id": config.bos_token_id, "eos_token_id": [config.eos_token_id, config.pad_token_id],
           "pad_token_id": config.pad_token_id, "do_sample": False}  # fmt: skip
    _write_json(out / "generation_config.json", gen)


# ---- training --------------------------------------------------------------------------------------------------


def token_batches(docs: list[str], tokenizer: Any) -> tuple[Any, Any]:
    """(train, held-out) tensors of SEQ_LEN+1 token windows: documents shuffled, each ended by <|endoftext|>."""
    import torch

    order = list(range(len(docs)))
    random.Random(0).shuffle(order)
    eot = tokenizer.convert_tokens_to_ids("<|endoftext|>")
    stream: list[int] = []
    for i in order:
        stream.extend(tokenizer(docs[i], add_special_tokens=False)["input_ids"])
        stream.append(eot)
    n = len(stream) // (SEQ_LEN + 1)
    windows = torch.tensor(stream[: n * (SEQ_LEN + 1)]).view(n, SEQ_LEN + 1)
    held = max(BATCH, int(n * HELD_OUT))
    return windows[:-held], windows[-held:]


def optimizer(model: Any, lr: float) -> Any:
    """AdamW, weight decay on matrices only."""
    import torch

    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    rest = [p for n, p in model.named_parameters() if p.dim() < 2]
    return torch.optim.AdamW([{"params": decay, "weight_decay": WEIGHT_DECAY}, {"params": rest, "weight_decay": 0.0}],
                             lr=lr, betas=(0.9, 0.95))  # fmt: skip


def learning_rate(step: int, steps: int, peak: float, warmup: int) -> float:
    """Linear warmup to `peak`, then cosine down to MIN_LR_FRACTION of it."""
    if step < warmup:
        return peak * ((step + 1) / warmup)
    progress = (step - warmup) / max(1, steps - warmup)
    return peak * (MIN_LR_FRACTION + (1 - MIN_LR_FRACTION) * 0.5 * (1 + math.cos(math.pi * progress)))


def fit(model: Any, steps: int, peak: float, warmup: int, losses: Any, log: Any, every: int) -> Any:
    """`steps` AdamW steps on the sum of `losses(generator)` (named loss tensors of one batch, drawn with the seeded
    generator), clipped at 1.0, with the warmup + cosine schedule; logged every `every` steps."""
    import torch

    opt = optimizer(model, peak)
    gen = torch.Generator().manual_seed(0)
    started = time.time()
    model.train()
    for step in range(steps):
        lr = learning_rate(step, steps, peak, warmup)
        for group in opt.param_groups:
            group["lr"] = lr
        named = losses(gen)
        total = functools.reduce(operator.add, named.values())
        opt.zero_grad(set_to_none=True)
        total.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if step % every == 0 or step == steps - 1:
            shown = "  ".join(f"{name} {value.item():.3f}" for name, value in named.items())
            log(f"step {step:4d}  {shown}  lr {lr:.2e}  {time.time() - started:.0f} s")
    return model.eval()


def train(config: Any, train_windows: Any, log: Any = print) -> Any:
    import torch
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32, attn_implementation="sdpa")

    def losses(gen: Any) -> dict[str, Any]:
        batch = train_windows[torch.randint(0, train_windows.shape[0], (BATCH,), generator=gen)]
        return {"loss": model(input_ids=batch[:, :-1], labels=batch[:, :-1]).loss}

    return fit(model, STEPS, LR, WARMUP, losses, log, every=20)


# ---- measurements (PROVENANCE.md; the fixture test asserts them) ------------------------------------------------


def measure(model: Any, windows: Any) -> dict[str, float]:
    """Peakedness, attention focus and activation outliers of `model` (eager attention) on token windows.

    loss: mean next-token cross-entropy (nats); mean_max_prob: mean over positions of the largest next-token
    probability; logit_std: spread of the output logits; attention_entropy: mean entropy of the attention rows past
    position 16 relative to a uniform row's (1 = uniform); mlp_outlier_ratio: the largest max|a| / rms(a) of the MLP
    activations (down_proj inputs), where trained models grow outliers first; embedding_rms: the first residual
    stream's size, which sets how much rms_norm_eps matters.
    """
    import torch

    model.config._attn_implementation = "eager"
    ids = windows[:, :-1]
    acts: list[Any] = []
    hooks = [m.register_forward_hook(lambda _m, inputs, _o: acts.append(inputs[0].detach()))
             for name, m in model.named_modules() if name.endswith("mlp.down_proj")]  # fmt: skip
    try:
        with torch.no_grad():
            out = model(input_ids=ids, labels=ids, output_attentions=True, output_hidden_states=True)
    finally:
        for hook in hooks:
            hook.remove()
    probs = torch.softmax(out.logits.float(), dim=-1)
    entropies = []
    for att in out.attentions:  # (batch, heads, q, k)
        rows = att.float()[:, :, 16:, :]
        ent = -(rows.clamp_min(1e-12).log() * rows).sum(-1)
        uniform = torch.log(torch.arange(17, rows.shape[2] + 17, dtype=torch.float32))
        entropies.append((ent / uniform).mean())
    return {
        "loss": round(float(out.loss), 3),
        "mean_max_prob": round(float(probs.max(-1).values.mean()), 4),
        "logit_std": round(float(out.logits.float().std()), 3),
        "attention_entropy": round(float(torch.stack(entropies).mean()), 3),
        "mlp_outlier_ratio": round(max(float(a.abs().max() / a.pow(2).mean().sqrt()) for a in acts), 1),
        "embedding_rms": round(float(out.hidden_states[0].pow(2).mean().sqrt()), 4),
    }


PROVENANCE = """# {name}: {title}

Built by `scripts/train_tiny_reference.py` (deterministic, offline; rebuild: `.venv/bin/python
scripts/train_tiny_reference.py{flag}`). Why it exists: random tiny checkpoints have near-uniform outputs, so fidelity
checks tuned on them say nothing about what they catch on a real model (issue 17).{why}

## Contents

- `config.json`: Qwen3 (`model_type` qwen3, `Qwen3ForCausalLM`), {layers} layers, hidden {hidden}, {heads} heads /
  {kv} KV heads of {head_dim}, MLP {inter}, vocabulary {vocab}, rope theta {theta:g}, rms_norm_eps {eps:g}, {tied};
  {params:,} parameters stored in bfloat16 (`model.safetensors`, sha256 `{model_sha}`).
- Tokenizer: byte-level BPE of {bpe} tokens trained with the `tokenizers` library on the corpus below, with Qwen2's
  NFC normalizer and pre-tokenizer regex (`vocab.json`, `merges.txt`), plus Qwen3's 26 special tokens at ids
  {first_special}..{last_special} and Qwen3's chat template (`tokenizer_config.json`, `added_tokens.json`,
  `special_tokens_map.json`; from `examples/tokenizer-qwen3`, Apache-2.0, Copyright 2025 Alibaba Cloud).
- {corpus}: the training text, frozen ({documents} documents, sha256 `{corpus_sha}`): the docstrings of
  {modules} Python {python} standard-library modules (read with `inspect`; Python Software Foundation License), this
  repository's docs/*.md, and chat turns asking about a documented function and answering with its docstring's
  first paragraph. `--refresh-corpus` re-extracts it (docstrings differ between Python versions).

## Training

{steps} steps of AdamW (lr {lr:g}, warmup {warmup}, cosine to {min_lr:g}x, weight decay {wd:g}, betas 0.9/0.95, clip
1.0) on batches of {batch} x {seq} tokens ({train_tokens:,} tokens, {epochs:.1f} passes over the {corpus_tokens:,}-token
corpus); torch.manual_seed(0), one thread, `torch.use_deterministic_algorithms(True)`; {train_cpu} s of CPU time,
{train_seconds} s wall on the machine that built it. 2% of the token windows are held out for the measurements below.

## Measured (held-out text, float32 compute on the stored weights)

| | trained (this model) | random (same config, transformers' init) |
|---|---|---|
{rows}

Peaked distributions (a mean max probability of {tmax:.2f} against {rmax:.4f}), attention that looks somewhere
(entropy {tent:.2f} of uniform against {rent:.2f}), and MLP activation outliers {tout:.0f}x the rms (random: {rout:.0f}x). Real LLMs
grow far larger outliers (100-1000x, "massive activations") over long training; a few CPU minutes do not. The
first residual stream is small ({temb:.3f} rms), as in real checkpoints, so rms_norm_eps matters as it does there.

## Reproducing

`.venv/bin/python scripts/train_tiny_reference.py{flag} --tokenizer-only --out /tmp/t` rebuilds the config and
tokenizer (a test compares the reference's with its files). `--tools` fine-tunes the reference's weights (same tokenizer and Qwen3 chat template: Hermes-style `<tool_call>` JSON,
`<think>` reasoning) on synthetic tool-call conversations rendered through that template with `tools=`, the
conformance suite's (onboard/tool_calls/suite.py) and variations on them, mixed with windows of the same corpus: the
tool-calling fixture (issue 43), whose greedy answers to the suite parse into the suite's expected calls.

Bit-identical weights need the same torch version and CPU instruction set
(summation order differs between AVX2 and AVX-512 kernels): run the full script with `{flag_arg}--out /tmp/t` and compare
`sha256sum /tmp/t/model.safetensors` with the sha256 above. Built with Python {python}, torch {torch},
transformers {transformers}, tokenizers {tokenizers}.
"""


UNTIED_WHY = """

This one is the quantization fixture (`onboard quantize-plan`, issue 13): every weight row is a multiple of 256
wide, so llama.cpp's K-quants (Q4_K, Q6_K: super-blocks of 256) apply as they do in every released model (on the
reference's 192-wide rows llama-quantize stores them as Q5_0 / Q8_0), and the output head is its own tensor, as in
Llama-3.1-8B, Qwen3-8B or Mistral-7B (the reference's tied embedding is 35% of its weights and one tensor for both
ends). Same corpus, tokenizer and training recipe as `tests/fixtures/trained-qwen3`."""


def write_provenance(out: Path, config: Any, info: dict[str, Any]) -> None:
    import tokenizers
    import torch
    import transformers

    names = {"loss": "held-out loss (nats)", "mean_max_prob": "mean max next-token probability",
             "logit_std": "output logit std", "attention_entropy": "attention entropy / uniform (past position 16)",
             "mlp_outlier_ratio": "MLP activation max / rms", "embedding_rms": "first residual stream rms"}  # fmt: skip
    trained, random_ = info["trained"], info["random"]
    rows = "\n".join(f"| {label} | {trained[k]} | {random_[k]} |" for k, label in names.items())
    untied = not config.tie_word_embeddings
    text = PROVENANCE.format(
        name=out.name.removesuffix(".tmp"), flag=" --untied" if untied else "", why=UNTIED_WHY if untied else "",
        flag_arg="--untied " if untied else "",
        title="a trained tiny model for quantization plans" if untied else "a trained tiny reference model (test "
        "fixture and demo)", tied="an untied output head" if untied else "tied embeddings",
        corpus="`corpus.txt.gz` of `tests/fixtures/trained-qwen3`" if untied else "`corpus.txt.gz`",
        layers=config.num_hidden_layers, hidden=config.hidden_size, heads=config.num_attention_heads,
        kv=config.num_key_value_heads, head_dim=config.head_dim, inter=config.intermediate_size,
        vocab=config.vocab_size, theta=CONFIG["rope_theta"], eps=config.rms_norm_eps, params=info["parameters"],
        model_sha=info["model_sha256"], bpe=BPE_VOCAB, first_special=BPE_VOCAB, last_special=BPE_VOCAB + 25,
        documents=info["documents"], corpus_sha=info["corpus_sha256"], modules=len(STDLIB_MODULES),
        python=".".join(map(str, sys.version_info[:3])), steps=STEPS, lr=LR, warmup=WARMUP, min_lr=MIN_LR_FRACTION,
        wd=WEIGHT_DECAY, batch=BATCH, seq=SEQ_LEN, train_tokens=info["train_tokens"],
        epochs=info["train_tokens"] / info["corpus_tokens"], corpus_tokens=info["corpus_tokens"],
        train_seconds=info["train_seconds"], train_cpu=info["train_cpu_seconds"], rows=rows, tmax=trained["mean_max_prob"], rmax=random_["mean_max_prob"],
        tent=trained["attention_entropy"], rent=random_["attention_entropy"], tout=trained["mlp_outlier_ratio"],
        rout=random_["mlp_outlier_ratio"], temb=trained["embedding_rms"], torch=torch.__version__,
        transformers=transformers.__version__, tokenizers=tokenizers.__version__,
    )  # fmt: skip
    (out / "PROVENANCE.md").write_text(text, encoding="utf-8")


# ---- main ------------------------------------------------------------------------------------------------------


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def build(
    out: Path, *, shape: dict[str, Any] = CONFIG, tokenizer_only: bool = False, refresh_corpus: bool = False
) -> dict[str, Any]:
    import torch

    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    frozen = OUT / CORPUS_FILE
    docs = extract_corpus() if refresh_corpus or not frozen.is_file() else read_corpus(frozen)
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    write_corpus(tmp / CORPUS_FILE, docs)
    tokenizer = train_tokenizer(docs, tmp)
    config = model_config(tokenizer, shape)
    write_config(config, tmp)
    info: dict[str, Any] = {"documents": len(docs), "corpus_sha256": sha256(tmp / CORPUS_FILE)}
    if not tokenizer_only:
        train_windows, held = token_batches(docs, tokenizer)
        started, cpu = time.time(), time.process_time()
        model = train(config, train_windows, log=lambda s: print(s, file=sys.stderr))
        info["train_seconds"] = round(time.time() - started)
        info["train_cpu_seconds"] = round(time.process_time() - cpu)
        info["train_tokens"] = STEPS * BATCH * SEQ_LEN
        info["corpus_tokens"] = int(train_windows.numel() + held.numel())
        model = model.to(torch.bfloat16)
        model.save_pretrained(tmp, safe_serialization=True)
        write_config(config, tmp)  # save_pretrained rewrote config.json from the model's (float32-built) config
        info["parameters"] = sum(p.numel() for p in model.parameters())
        info["trained"] = measure(model.float(), held[:BATCH])
        info["random"] = measure(_random_model(config), held[:BATCH])
        info["model_sha256"] = sha256(tmp / "model.safetensors")
        write_provenance(tmp, config, info)
    if shape is not CONFIG:  # a variant trains on the reference's frozen corpus: one copy of it is enough
        (tmp / CORPUS_FILE).unlink()
    shutil.rmtree(out, ignore_errors=True)
    os.replace(tmp, out)
    return info


DRAFT_PROVENANCE = """# trained-qwen3-draft: a small draft model for the trained tiny reference (speculative decoding tests)

Built by `scripts/train_tiny_reference.py --draft` (deterministic, offline) from the reference in
`tests/fixtures/trained-qwen3/` (model sha256 `{target_sha}`): the same corpus (`corpus.txt.gz` there, sha256
`{corpus_sha}`), the same tokenizer files (copied: `vocab.json`, `merges.txt`, `tokenizer_config.json`,
`added_tokens.json`, `special_tokens_map.json`), the same training recipe ({steps} steps, batch {batch} x {seq},
AdamW lr {lr:g}, seed 0, one thread, deterministic algorithms), and a much smaller Qwen3: {layers} layers, hidden
{hidden}, {heads} heads / {kv} KV heads of {head_dim}, MLP {inter}, vocabulary {vocab}, tied embeddings; {params:,}
parameters ({ratio:.1%} of the reference's) stored in bfloat16 (`model.safetensors`, sha256 `{model_sha}`).
Why: `onboard draft-check` measures how often a draft's tokens are accepted by its target (issue 15); a draft of the
same family trained on the same text is what teams serve next to a new model, and its acceptance is neither 0 nor 1.

Held-out loss {loss} nats (reference: {target_loss}), mean max next-token probability {max_prob} (reference:
{target_max_prob}). {train_cpu} s of CPU time. Built with Python {python}, torch {torch}, transformers
{transformers}; bit-identical weights need the same torch version and CPU instruction set.
"""


def start_variant(out: Path, reference: Path) -> tuple[Path, Any, Any, Any]:
    """A fixture built from the reference's tokenizer and corpus: one thread, deterministic algorithms, its
    temporary folder (`out`.tmp) holding the reference's tokenizer files; (folder, tokenizer, train and held-out
    corpus windows)."""
    import torch
    from transformers import AutoTokenizer

    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    for name in TOKENIZER_FILES:
        shutil.copy2(reference / name, tmp / name)
    tokenizer = AutoTokenizer.from_pretrained(tmp, trust_remote_code=False)
    return (tmp, tokenizer, *token_batches(read_corpus(reference / CORPUS_FILE), tokenizer))


def finish_variant(tmp: Path, out: Path, provenance: str) -> None:
    """The fixture built in `tmp` gets its PROVENANCE.md and replaces `out`."""
    (tmp / "PROVENANCE.md").write_text(provenance, encoding="utf-8")
    shutil.rmtree(out, ignore_errors=True)
    os.replace(tmp, out)


def build_draft(out: Path, reference: Path = OUT) -> dict[str, Any]:
    """The draft fixture: DRAFT_CONFIG trained like the reference, on its corpus, with its tokenizer."""
    import torch
    import transformers
    from transformers import AutoModelForCausalLM

    tmp, tokenizer, train_windows, held = start_variant(out, reference)
    config = model_config(tokenizer, DRAFT_CONFIG)
    cpu = time.process_time()
    model = train(config, train_windows, log=lambda s: print(s, file=sys.stderr)).to(torch.bfloat16)
    model.save_pretrained(tmp, safe_serialization=True)
    write_config(config, tmp)
    target = AutoModelForCausalLM.from_pretrained(reference, dtype=torch.float32, trust_remote_code=False)
    mine, theirs = measure(model.float(), held[:BATCH]), measure(target, held[:BATCH])
    params = sum(p.numel() for p in model.parameters())
    info = {"parameters": params, "model_sha256": sha256(tmp / "model.safetensors"), "draft": mine, "reference": theirs}
    text = DRAFT_PROVENANCE.format(
        target_sha=sha256(reference / "model.safetensors"), corpus_sha=sha256(reference / CORPUS_FILE), steps=STEPS,
        batch=BATCH, seq=SEQ_LEN, lr=LR, layers=config.num_hidden_layers, hidden=config.hidden_size,
        heads=config.num_attention_heads, kv=config.num_key_value_heads, head_dim=config.head_dim,
        inter=config.intermediate_size, vocab=config.vocab_size, params=params,
        ratio=params / sum(p.numel() for p in target.parameters()), model_sha=info["model_sha256"],
        loss=mine["loss"], target_loss=theirs["loss"], max_prob=mine["mean_max_prob"],
        target_max_prob=theirs["mean_max_prob"], train_cpu=round(time.process_time() - cpu),
        python=".".join(map(str, sys.version_info[:3])), torch=torch.__version__, transformers=transformers.__version__,
    )  # fmt: skip
    finish_variant(tmp, out, text)
    return info


# ---- the tool-calling variant (--tools) ------------------------------------------------------------------------

TOOLS_OUT = REPO / "tests" / "fixtures" / "trained-qwen3-tools"
TOOLS_STEPS, TOOLS_BATCH, TOOLS_CORPUS_BATCH = 140, 8, 2
TOOLS_LR, TOOLS_WARMUP = 2e-3, 10
TOOLS_VARIATIONS = 300  # synthetic conversations besides the suite's own
SUITE_COPIES = 40  # copies of each suite conversation in the pool: the fixture must reproduce them under greedy decoding
MAX_NEW_TOKENS = 160

CITIES = ("Paris", "Tokyo", "Berlin", "Madrid", "Rome", "Oslo", "Lima", "Cairo", "Delhi", "Seoul", "Lisbon", "Vienna",
          "Prague", "Dublin", "Athens", "Sydney", "Toronto", "Chicago", "Boston", "Denver", "Köln", "Zürich", "Malmö",
          "São Paulo", "Kraków", "Málaga", "Reykjavík", "東京", "Москва")  # fmt: skip
WEATHER_ASKS = ("What is the weather in {a}?", "How is the weather in {a} today?", "Weather in {a}, please.",
                "Is it warm in {a}?")  # fmt: skip
# Pairs are asked from the first word on differently from single cities: with "What is the weather in {a} and in {b}?"
# the decision to call twice came down to the words after the first city, and greedy decoding took it by 0.02 logits.
PAIR_ASKS = ("Compare the weather in {a} and {b}.", "Compare {a} and {b}: what is the weather?",
             "Both {a} and {b}: what is the weather there?")  # fmt: skip
TITLES = ("Team sync", "Lunch", "Dentist", "Book club", "Standup", "Review", "Grüße aus Köln 🎉", "Café ☕ break",
          "Планёрка", "会议", "Yoga", "Sprint demo")  # fmt: skip
NAMES = ("Ana", "Bo", "Chen", "Dara", "Eli", "Femi", "Zoë", "José")
GREETINGS = (("Say hello.", "Hello! How can I help you today?"), ("Hi!", "Hello! How can I help you today?"),
             ("Thank you!", "You are welcome!"), ("Who are you?", "I am a small assistant that can call tools."),
             ("Good morning.", "Good morning! How can I help?"))  # fmt: skip
CONDITIONS = ("sunny", "cloudy", "rainy", "windy", "snowy")


def reasoning_for(conversation: Any) -> str:
    """The fixture's short reasoning before each answer (Qwen3's template asks for a <think> block)."""
    names = [c.name for c in conversation.expected.tool_calls]
    if conversation.messages[-1]["role"] == "tool":
        return "The tool has answered."
    if not names:
        return "No tool is needed."
    return f"I call {names[0]}{' twice' if len(names) == 2 else ''}."


def tool_conversations(rng: random.Random) -> list[Any]:
    """Variations on the suite's conversations: other cities, titles, dates, people, greetings and tool results."""
    from onboard.tool_calls.suite import Conversation, assistant_message, call
    from onboard.tool_calls.turn import ParsedTurn

    out = []
    for i in range(TOOLS_VARIATIONS):
        kind = i % 5
        if kind == 0:
            city = rng.choice(CITIES)
            ask = rng.choice(WEATHER_ASKS).format(a=city)
            unit = rng.choice((None, None, "celsius", "fahrenheit"))
            args = {"city": city} | ({"unit": unit} if unit else {})
            ask = ask if not unit else ask.rstrip("?.") + f" in {unit}?"
            out.append(Conversation(f"v{i}", "", ({"role": "user", "content": ask},),
                                    ParsedTurn(tool_calls=(call("get_weather", **args),))))  # fmt: skip
        elif kind == 1:
            a, b = rng.sample(CITIES, 2)
            out.append(Conversation(f"v{i}", "", ({"role": "user", "content": rng.choice(PAIR_ASKS).format(a=a, b=b)},),
                                    ParsedTurn(tool_calls=(call("get_weather", city=a), call("get_weather", city=b)))))  # fmt: skip
        elif kind == 2:
            title, date = rng.choice(TITLES), f"2025-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"
            time_ = rng.choice((None, f"{rng.randint(8, 18):02d}:{rng.choice(('00', '30'))}"))
            people = rng.sample(NAMES, rng.choice((0, 1, 2)))
            when = {"date": date} | ({"time": time_} if time_ else {})
            args = {"title": title, "when": when} | ({"attendees": people} if people else {})
            ask = (f"Add {rng.choice(('a meeting', 'an event'))} called {title} on {date}"
                   + (f" at {time_}" if time_ else "") + (f" with {' and '.join(people)}" if people else "") + ".")  # fmt: skip
            out.append(Conversation(f"v{i}", "", ({"role": "user", "content": ask},),
                                    ParsedTurn(tool_calls=(call("create_event", **args),))))  # fmt: skip
        elif kind == 3:
            ask, answer = rng.choice(GREETINGS)
            out.append(Conversation(f"v{i}", "", ({"role": "user", "content": ask},), ParsedTurn(content=answer)))
        else:
            city, temperature, condition = rng.choice(CITIES), rng.randint(-5, 35), rng.choice(CONDITIONS)
            asked = call("get_weather", city=city)
            result = {"city": city, "temperature": temperature, "condition": condition}
            messages = ({"role": "user", "content": rng.choice(WEATHER_ASKS).format(a=city)},
                        assistant_message(ParsedTurn(tool_calls=(asked,))),
                        {"role": "tool", "tool_call_id": "call00000", "name": "get_weather",
                         "content": json.dumps(result, ensure_ascii=False)})  # fmt: skip
            answer = f"It is {temperature} degrees and {condition} in {city}."
            out.append(Conversation(f"v{i}", "", messages, ParsedTurn(content=answer)))
    return out


def tool_examples(tokenizer: Any, conversations: list[Any]) -> list[tuple[list[int], int]]:
    """(token ids, prompt length) per conversation: its prompt and its answer as the chat template writes them."""
    from onboard.tool_calls import suite

    examples = []
    for conversation in conversations:
        rendered = suite.render(tokenizer, conversation)
        prompt = list(rendered.prompt_ids)
        answer = suite.answer_text(tokenizer, conversation, conversation.expected, reasoning=reasoning_for(conversation))
        ids = tokenizer(rendered.prompt + answer, add_special_tokens=False)["input_ids"]
        if ids[: len(prompt)] != prompt:
            raise SystemExit(f"{conversation.name}: the prompt tokenizes differently inside the whole conversation")
        examples.append((ids, len(prompt)))
    return examples


def train_tools(model: Any, examples: list[tuple[list[int], int]], windows: Any, pad: int, log: Any = print) -> Any:
    """Fine-tune on answers only (the prompt's tokens carry no loss), with corpus windows in every step."""
    import torch

    torch.manual_seed(0)

    def losses(gen: Any) -> dict[str, Any]:
        rows = torch.randint(0, len(examples), (TOOLS_BATCH,), generator=gen).tolist()
        width = max(len(examples[r][0]) for r in rows)
        ids = torch.full((len(rows), width), pad)
        labels = torch.full((len(rows), width), -100)
        mask = torch.zeros((len(rows), width), dtype=torch.long)
        for i, r in enumerate(rows):
            tokens, prompt = examples[r]
            ids[i, : len(tokens)] = torch.tensor(tokens)
            labels[i, prompt : len(tokens)] = torch.tensor(tokens[prompt:])
            mask[i, : len(tokens)] = 1
        corpus = windows[torch.randint(0, windows.shape[0], (TOOLS_CORPUS_BATCH,), generator=gen)]
        return {"tools": model(input_ids=ids, attention_mask=mask, labels=labels).loss,
                "corpus": model(input_ids=corpus[:, :-1], labels=corpus[:, :-1]).loss}  # fmt: skip

    return fit(model, TOOLS_STEPS, TOOLS_LR, TOOLS_WARMUP, losses, log, every=10)


def answer_suite(model: Any, tokenizer: Any) -> list[dict[str, Any]]:
    """The model's greedy answer to every suite conversation, parsed with onboard's Hermes parser: per conversation
    the raw text, the parse, how it differs from the expected calls or content, and the smallest top-1 margin (logit
    of the chosen token minus the runner-up's) over the generated tokens."""
    import torch

    from onboard.tool_calls import suite
    from onboard.tool_calls.formats import parse_turn
    from onboard.tool_calls.turn import diff_turns

    end = "<|im_end|>"
    rows = []
    for conversation in suite.CONVERSATIONS:
        rendered = suite.render(tokenizer, conversation, reasoning="think")
        ids = torch.tensor([rendered.prompt_ids])
        with torch.no_grad():
            out = model.generate(ids, max_new_tokens=MAX_NEW_TOKENS, do_sample=False, output_scores=True,
                                 return_dict_in_generate=True, pad_token_id=tokenizer.pad_token_id)  # fmt: skip
        new = out.sequences[0, ids.shape[1] :].tolist()
        text = tokenizer.decode(new, skip_special_tokens=False)
        top2 = [torch.topk(score[0].float(), 2).values for score in out.scores]
        margin = min(float(t[0] - t[1]) for t in top2)
        row = {"name": conversation.name, "raw": text, "ended": text.endswith(end), "min_margin": round(margin, 3)}
        try:
            turn = parse_turn("hermes", text.removesuffix(end), conversation.tools, reasoning="think",
                              reasoning_open=rendered.reasoning_open)  # fmt: skip
            row |= {"parsed": turn.to_openai(), "differences": diff_turns(conversation.expected, turn, reasoning=False)}
        except Exception as exc:  # a broken call is a result to report, not a crash of the build
            row |= {"parsed": None, "differences": [f"{type(exc).__name__}: {exc}"]}
        rows.append(row)
    return rows


TOOLS_PROVENANCE = """# trained-qwen3-tools: the trained tiny reference, fine-tuned to call tools (issue 43)

Built by `scripts/train_tiny_reference.py --tools` (deterministic, offline) from `tests/fixtures/trained-qwen3/`
(model sha256 `{reference_sha}`): the same tokenizer files (copied), Qwen3's chat template (Hermes-style
`<tool_call>` JSON calls, `<think>` reasoning) and the same Qwen3 shape; {params:,} parameters stored in bfloat16
(`model.safetensors`, sha256 `{model_sha}`). Why: validate's tool-call check (issue 43) needs a reference that calls
tools in its template's format, for vLLM's CPU build to serve with `--tool-call-parser hermes --reasoning-parser
qwen3` (tests/tool_calls/test_vllm_agreement.py: those parsers read answers in this format as onboard's do).

## Training

Fine-tuned from the reference's weights: {steps} steps of AdamW (lr {lr:g}, warmup {warmup}, cosine to {min_lr:g}x,
weight decay {wd:g}, clip 1.0), each on {batch} tool conversations (loss on the answer only: the prompt, with its
tools block, carries none) plus {corpus_batch} windows of {seq} tokens of the reference's corpus (`corpus.txt.gz` of
`tests/fixtures/trained-qwen3`, sha256 `{corpus_sha}`), so it stays the reference's language model. The
conversations ({pool} in the pool) are rendered through the chat template with `tools=` (the suite's two tools) and
each answer starts with a short `<think>` block: the {suite} conversations of `onboard/tool_calls/suite.py`, {copies}
copies each, and {variations} variations on them (random.Random(0): other cities, unicode ones among them, parallel
pairs, event titles, dates, times and attendees, greetings, weather tool results). torch.manual_seed(0), one thread,
`torch.use_deterministic_algorithms(True)`; {train_cpu} s of CPU time, {train_seconds} s wall.

## Measured (float32 compute on the stored weights, greedy decoding)

Held-out corpus loss {loss} nats (the reference: {reference_loss}).

Every suite conversation, rendered with the template's default (thinking on), answered greedily and parsed with
onboard's Hermes parser (`onboard.tool_calls.formats.parse_turn("hermes", ..., reasoning="think")`); "margin" is the
smallest gap between the chosen token's logit and the runner-up's over the answer:

| conversation | expected | produced (parsed) | reasoning | margin |
|---|---|---|---|---|
{rows}

{verdict} The suite's conversations are in the training pool, and the fixture reproduces them; it is no
model of tool use in general. Asked other things it still writes well-formed calls in the format, but mostly
repeats the suite's (asked about Lisbon, it calls get_weather for Paris; asked about json.dumps, it calls
get_weather too): copying arguments from the request did not generalise within this training budget.

## Reproducing

`.venv/bin/python scripts/train_tiny_reference.py --tools --out /tmp/t` and compare `sha256sum
/tmp/t/model.safetensors` with the sha256 above (same torch version and CPU instruction set). Built with Python
{python}, torch {torch}, transformers {transformers}.
"""


def _show_turn(turn: Any) -> str:
    if turn is None:
        return "(unparsable)"
    calls = turn.get("tool_calls") or []
    text = "; ".join(f"{c['function']['name']}({c['function']['arguments']})" for c in calls)
    return (text or repr(turn.get("content"))).replace("|", "\\\\|")


def build_tools(out: Path, reference: Path = OUT) -> dict[str, Any]:
    """The tool-calling fixture: the reference fine-tuned on the suite's conversations and variations on them."""
    import torch
    import transformers
    from transformers import AutoModelForCausalLM

    from onboard.tool_calls import suite

    tmp, tokenizer, windows, held = start_variant(out, reference)
    pool = [c for c in suite.CONVERSATIONS for _ in range(SUITE_COPIES)] + tool_conversations(random.Random(0))
    examples = tool_examples(tokenizer, pool)
    model = AutoModelForCausalLM.from_pretrained(reference, dtype=torch.float32, trust_remote_code=False)
    config = model.config
    started, cpu = time.time(), time.process_time()
    model = train_tools(model, examples, windows, config.pad_token_id, log=lambda s: print(s, file=sys.stderr))
    train_seconds, train_cpu = round(time.time() - started), round(time.process_time() - cpu)
    model.to(torch.bfloat16).save_pretrained(tmp, safe_serialization=True)
    write_config(config, tmp)
    stored = AutoModelForCausalLM.from_pretrained(tmp, dtype=torch.float32, trust_remote_code=False).eval()
    target = AutoModelForCausalLM.from_pretrained(reference, dtype=torch.float32, trust_remote_code=False).eval()
    answers = answer_suite(stored, tokenizer)
    mine, theirs = measure(stored, held[:BATCH]), measure(target, held[:BATCH])
    info = {"parameters": sum(p.numel() for p in stored.parameters()), "model_sha256": sha256(tmp / "model.safetensors"),
            "loss": mine["loss"], "reference_loss": theirs["loss"], "train_seconds": train_seconds,
            "train_cpu_seconds": train_cpu, "answers": answers}  # fmt: skip
    expected = {c.name: c.expected.to_openai() for c in suite.CONVERSATIONS}
    rows = "\n".join(
        f"| {a['name']} | {_show_turn(expected[a['name']])} | {_show_turn(a['parsed'])} | "
        f"{(a['parsed'] or {}).get('reasoning_content')!r} | {a['min_margin']} |"
        for a in answers
    )  # fmt: skip
    failed = [a["name"] for a in answers if a["differences"]]
    verdict = (f"Not reproduced: {', '.join(failed)} (see the table)." if failed else
               "Every answer parses into the expected calls (names and arguments) or the expected content, the no-call "
               "and after-result turns call nothing, and the reasoning stands apart from the content.")  # fmt: skip
    text = TOOLS_PROVENANCE.format(
        reference_sha=sha256(reference / "model.safetensors"), params=info["parameters"], model_sha=info["model_sha256"],
        steps=TOOLS_STEPS, lr=TOOLS_LR, warmup=TOOLS_WARMUP, min_lr=MIN_LR_FRACTION, wd=WEIGHT_DECAY, batch=TOOLS_BATCH,
        corpus_batch=TOOLS_CORPUS_BATCH, seq=SEQ_LEN, corpus_sha=sha256(reference / CORPUS_FILE), pool=len(pool),
        suite=len(suite.CONVERSATIONS), copies=SUITE_COPIES, variations=TOOLS_VARIATIONS, train_cpu=train_cpu,
        train_seconds=train_seconds, loss=mine["loss"], reference_loss=theirs["loss"], rows=rows, verdict=verdict,
        python=".".join(map(str, sys.version_info[:3])), torch=torch.__version__, transformers=transformers.__version__,
    )  # fmt: skip
    finish_variant(tmp, out, text)
    return info


def _random_model(config: Any) -> Any:
    """The same architecture untrained (transformers' init, seed 0): what the tiny test checkpoints look like."""
    import torch
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    return AutoModelForCausalLM.from_config(config, dtype=torch.float32).eval()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--tokenizer-only", action="store_true", help="Write config and tokenizer only (no training).")
    parser.add_argument("--refresh-corpus", action="store_true", help="Re-extract the corpus from stdlib and docs.")
    parser.add_argument("--draft", action="store_true", help=f"Build the draft model ({DRAFT_OUT.name}) instead.")
    parser.add_argument("--untied", action="store_true", help=f"Build the quantization fixture ({UNTIED_OUT.name}).")
    parser.add_argument("--tools", action="store_true", help=f"Build the tool-calling fixture ({TOOLS_OUT.name}).")
    args = parser.parse_args()
    if args.tools:
        info = build_tools(TOOLS_OUT if args.out == OUT else args.out)
    elif args.draft:
        info = build_draft(DRAFT_OUT if args.out == OUT else args.out)
    elif args.untied:
        info = build(UNTIED_OUT if args.out == OUT else args.out, shape=UNTIED_CONFIG, tokenizer_only=args.tokenizer_only)
    else:
        info = build(args.out, tokenizer_only=args.tokenizer_only, refresh_corpus=args.refresh_corpus)
    print(json.dumps(info, indent=2))


if __name__ == "__main__":
    main()
