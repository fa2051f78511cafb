"""The trained tiny models (the reference, and the untied quantization fixture trained the same way): rebuilt
identically by their script, and as peaked as PROVENANCE.md says."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "train_tiny_reference.py"
FIXTURE = REPO / "tests" / "fixtures" / "trained-qwen3"
UNTIED = REPO / "tests" / "fixtures" / "trained-qwen3-untied"
TOKENIZER_FILES = ("vocab.json", "merges.txt", "tokenizer_config.json", "added_tokens.json", "special_tokens_map.json",
                   "generation_config.json")  # fmt: skip


def _script():
    spec = importlib.util.spec_from_file_location("train_tiny_reference", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_script_rebuilds_the_committed_config_and_tokenizer(tmp_path: Path) -> None:
    """Weights are not retrained here (minutes); PROVENANCE.md says how to check them bit for bit."""
    out = tmp_path / "rebuilt"
    r = subprocess.run([sys.executable, str(SCRIPT), "--tokenizer-only", "--out", str(out)], capture_output=True,
                       text=True, timeout=300)  # fmt: skip
    assert r.returncode == 0, r.stderr
    for name in TOKENIZER_FILES:
        assert (out / name).read_bytes() == (FIXTURE / name).read_bytes(), name
    rebuilt, committed = (json.loads((d / "config.json").read_text()) for d in (out, FIXTURE))
    for config in (rebuilt, committed):
        config.pop("transformers_version")
    assert rebuilt == committed
    assert _script().read_corpus(out / "corpus.txt.gz") == _script().read_corpus(FIXTURE / "corpus.txt.gz")


def test_the_untied_fixture_is_the_reference_recipe_at_k_quant_widths(tmp_path: Path) -> None:
    out = tmp_path / "rebuilt"
    r = subprocess.run([sys.executable, str(SCRIPT), "--untied", "--tokenizer-only", "--out", str(out)],
                       capture_output=True, text=True, timeout=300)  # fmt: skip
    assert r.returncode == 0, r.stderr
    for name in TOKENIZER_FILES:  # the reference's tokenizer, byte for byte
        assert (UNTIED / name).read_bytes() == (FIXTURE / name).read_bytes() == (out / name).read_bytes(), name
    rebuilt, committed, reference = (json.loads((d / "config.json").read_text()) for d in (out, UNTIED, FIXTURE))
    for config in (rebuilt, committed, reference):
        config.pop("transformers_version")
    assert rebuilt == committed
    changed = {k for k in committed if committed[k] != reference[k]}
    assert changed == {"hidden_size", "head_dim", "tie_word_embeddings"}, changed
    assert committed["tie_word_embeddings"] is False and committed["hidden_size"] % 256 == 0
    widths = (committed["intermediate_size"], committed["num_attention_heads"] * committed["head_dim"])
    assert all(w % 256 == 0 for w in widths), widths
    assert not (UNTIED / "corpus.txt.gz").exists()  # trained on the reference's copy


@pytest.mark.parametrize("fixture", [FIXTURE, UNTIED], ids=lambda p: p.name)
def test_the_fixture_is_peaked_attends_and_has_outliers_unlike_a_random_checkpoint(fixture: Path) -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    script = _script()
    tokenizer = AutoTokenizer.from_pretrained(fixture, trust_remote_code=False)
    _, held = script.token_batches(script.read_corpus(FIXTURE / "corpus.txt.gz"), tokenizer)
    model = AutoModelForCausalLM.from_pretrained(fixture, dtype=torch.float32, trust_remote_code=False).eval()
    trained = script.measure(model, held[:4])
    random_ = script.measure(script._random_model(model.config), held[:4])
    assert trained["mean_max_prob"] > 0.15 > 0.01 > random_["mean_max_prob"]
    assert trained["attention_entropy"] < random_["attention_entropy"] - 0.15
    assert trained["mlp_outlier_ratio"] > 2 * random_["mlp_outlier_ratio"]
    assert trained["loss"] < random_["loss"] - 3.0


def test_it_answers_a_chat_turn_in_words_and_stops_at_the_end_of_turn() -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(FIXTURE, trust_remote_code=False)
    model = AutoModelForCausalLM.from_pretrained(FIXTURE, dtype=torch.float32, trust_remote_code=False).eval()
    text = tokenizer.apply_chat_template([{"role": "user", "content": "What does json.dumps do?"}], tokenize=False,
                                         add_generation_prompt=True)  # fmt: skip
    ids = tokenizer(text, return_tensors="pt", add_special_tokens=False).input_ids
    out = model.generate(ids, max_new_tokens=40, do_sample=False)[0, ids.shape[1] :].tolist()
    assert tokenizer.convert_tokens_to_ids("<|im_end|>") in out
    answer = tokenizer.decode(out, skip_special_tokens=True)
    words = [w for w in answer.replace(".", " ").replace(":", " ").split() if w.isalpha()]
    assert len(words) >= 4 and "Return" in answer, answer


@pytest.mark.parametrize(
    ("fixture", "name"),
    [(FIXTURE, "model.safetensors"), (FIXTURE, "PROVENANCE.md"), (FIXTURE, "corpus.txt.gz"),
     (UNTIED, "model.safetensors"), (UNTIED, "PROVENANCE.md")],
    ids=lambda v: v.name if isinstance(v, Path) else v,
)  # fmt: skip
def test_the_fixture_files_are_committed_and_small(fixture: Path, name: str) -> None:
    size = (fixture / name).stat().st_size
    assert 0 < size <= 9 * 1024 * 1024
    if name == "model.safetensors":
        assert _script().sha256(fixture / name) in (fixture / "PROVENANCE.md").read_text()
