"""A repo cloned with git but without git-lfs: every command names the pointer files (size, oid, the fetch command),
exits 2 where it needs them, never shows a traceback or a header-size error, and claims nothing it could not read.

The clones are written byte by byte (tests/malformed.py's tiny checkpoint, the committed Qwen3 tokenizer files),
then chosen files are replaced by real Git LFS pointers to their own content.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest

from onboard.cli import main
from onboard.findings import Finding, group_findings, span
from onboard.lfs import find_pointers, hub_repo_of_clone, parse_pointer
from tests import malformed as M

QWEN3_TOKENIZER = Path(__file__).resolve().parents[1] / "examples" / "tokenizer-qwen3"
SHARDS = ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"]
# What a header parse of a pointer used to print ("header claims 2,336,927,755,350,992,246 bytes").
PARSE_ERRORS = ("header-length-invalid", "header claims", "JSONDecodeError", "malformed JSON", "Traceback")


def pointerize(path: Path) -> tuple[str, int]:
    """Replace `path` by a Git LFS pointer to its own content (what `git clone` without git-lfs leaves)."""
    data = path.read_bytes()
    oid = hashlib.sha256(data).hexdigest()
    path.write_text(f"version https://git-lfs.github.com/spec/v1\noid sha256:{oid}\nsize {len(data)}\n")
    return oid, len(data)


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as info:
        main(list(argv))
    out, err = capsys.readouterr()
    assert not any(e in out + err for e in PARSE_ERRORS), err[-2000:]
    return int(info.value.code or 0), out, err


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.delenv("ONBOARD_DEBUG", raising=False)


@pytest.fixture
def clone(tmp_path: Path) -> Path:
    """Two shards (index listed) and vocab.json are pointers; the repo is a clone of org/tiny on the hub."""
    root = M.valid(tmp_path / "clone")
    for f in QWEN3_TOKENIZER.iterdir():
        if f.name != "PROVENANCE.md":
            shutil.copyfile(f, root / f.name)
    for name in [*SHARDS, "vocab.json"]:
        pointerize(root / name)
    (root / ".git").mkdir()
    (root / ".git" / "config").write_text('[remote "origin"]\n\turl = https://huggingface.co/org/tiny\n')
    return root


def test_pointer_parsing(tmp_path: Path) -> None:
    oid = "a" * 64
    assert parse_pointer(f"version https://git-lfs.github.com/spec/v1\noid sha256:{oid}\nsize 42\n".encode()) == (
        f"sha256:{oid}",
        42,
    )
    assert parse_pointer(b'{"version": "https://git-lfs.github.com/spec/v1"}') is None
    assert parse_pointer(b"version https://git-lfs.github.com/spec/v1\noid md5:abc\nsize 1\n") is None
    (tmp_path / "config.json").write_text("{}")
    (tmp_path / "model.safetensors").write_bytes(b"x" * 500)
    pointerize(tmp_path / "model.safetensors")
    shutil.copyfile(tmp_path / "model.safetensors", tmp_path / "tokenizer.model.lfs-pointer")  # kept on purpose
    assert [p.file for p in find_pointers(tmp_path)] == ["model.safetensors"]
    assert find_pointers(tmp_path)[0].size == 500
    (tmp_path / ".git").mkdir()
    for url, repo in [("https://huggingface.co/org/m.git", "org/m"), ("git@hf.co:org/m", "org/m"),
                      ("https://huggingface.co/datasets/org/d", None), ("https://github.com/org/m", None)]:  # fmt: skip
        (tmp_path / ".git" / "config").write_text(f'[remote "origin"]\n\turl = {url}\n')
        assert hub_repo_of_clone(tmp_path) == repo, url


def test_inspect_names_every_pointer_once_and_claims_nothing(clone: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = _run(capsys, "inspect", str(clone), "--json", "--target", "h100")
    profile = json.loads(out)
    assert rc == 2 and "Error:" in err
    assert profile["findings"][0]["severity"] == "fatal"  # fatal findings lead
    pointers = [f for f in profile["findings"] if f["code"] == "lfs-pointer"]
    assert len(pointers) == 1 and pointers[0]["severity"] == "fatal"  # one grouped finding for the three files
    members = pointers[0]["members"]
    assert sorted(m["file"] for m in members) == sorted([*SHARDS, "vocab.json"])
    for m in members:
        oid, size = pointerize_stats(clone, m["file"])
        assert f"oid sha256:{oid}" in m["message"] and f"{size:,} bytes" in m["message"]
        assert f"git lfs pull --include {m['file']}" in m["hint"] and f"hf download org/tiny {m['file']}" in m["hint"]
    assert "git lfs pull --include" in pointers[0]["hint"] and "hf download org/tiny" in pointers[0]["hint"]
    for field in ("layers", "features", "parameters", "memory", "closest_family", "mlp_gated"):
        assert profile[field] == "unknown", field
    assert set(profile["unknown"]) >= {"layers", "features", "parameters", "memory"}
    from onboard.inspect_checkpoint import inspect
    from onboard.profile import ModelProfile

    p = inspect(str(clone), target="h100")
    assert ModelProfile.from_json(p.to_json()) == p and p.layers == () and p.memory is None

    rc, _, err = _run(capsys, "inspect", str(clone), "--target", "h100")
    lines = err.splitlines()
    assert rc == 2 and lines[1].startswith("UNUSABLE [lfs-pointer] 3 files are Git LFS pointers")
    assert not any(line.startswith(("layers:", "features:", "memory:", "target ", "parameters:")) for line in lines)


def pointerize_stats(root: Path, name: str) -> tuple[str, int]:
    """(oid, size) a pointer file in `root` records."""
    text = (root / name).read_text()
    oid = text.split("oid sha256:")[1].split()[0]
    return oid, int(text.split("size ")[1].split()[0])


def test_single_pointer_without_a_clone_or_repo_id(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = M.write_repo(tmp_path / "single")
    oid, size = pointerize(root / "model.safetensors")
    rc, out, err = _run(capsys, "inspect", str(root), "--json")
    [finding] = [f for f in json.loads(out)["findings"] if f["code"] == "lfs-pointer"]
    assert rc == 2 and finding["file"] == "model.safetensors" and not finding["members"]
    pointer_bytes = (root / "model.safetensors").stat().st_size
    assert f"model.safetensors is a Git LFS pointer ({pointer_bytes} bytes)" in finding["message"]
    assert f"the real file is {size:,} bytes, oid sha256:{oid}" in finding["message"]
    assert "git lfs pull --include model.safetensors" in finding["hint"] and "hf download" not in finding["hint"]
    # The repo id recorded in config.json: the fix is the hub download (no git clone to pull into).
    config = json.loads((root / "config.json").read_text())
    (root / "config.json").write_text(json.dumps({**config, "_name_or_path": "org/single"}))
    _, out, _ = _run(capsys, "inspect", str(root), "--json")
    [finding] = [f for f in json.loads(out)["findings"] if f["code"] == "lfs-pointer"]
    assert finding["hint"].startswith("hf download org/single model.safetensors --local-dir ")


def test_verify_tokenizer_on_pointers_reports_only_what_it_can(clone: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = _run(capsys, "verify-tokenizer", str(clone), "--json")
    report = json.loads(out)
    codes = [(f["code"], f["severity"]) for f in report["findings"]]
    assert rc == 2 and ("lfs-pointer", "fatal") in codes
    [pointer] = [f for f in report["findings"] if f["code"] == "lfs-pointer"]
    assert pointer["file"] == "vocab.json" and "oid sha256:" in pointer["message"]  # shards are not its files
    assert not any(c.startswith(("eos-", "bos-", "roundtrip-", "no-tokenizer-vocabulary")) for c, _ in codes)
    checks = {c["name"]: c for c in report["checks"]}
    assert checks["chat_template_parity"]["passed"]  # the template needs no vocabulary: it still ran
    assert report["template"]["renders"] and report["template"]["generation_prompt"] == "<|im_start|>assistant\n"
    assert not checks["tokenizer_parity"]["passed"] and checks["tokenizer_parity"]["detail"].startswith("not run")
    assert report["tokenizer_length"] == "unknown" and report["stop_set"] == "unknown"
    assert "UNUSABLE [lfs-pointer] vocab.json" in err


def test_tokenize_and_render_template(clone: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = _run(capsys, "tokenize", str(clone), "--text", "Hello")
    assert rc == 2 and out == "" and "Error: [lfs-pointer] vocab.json is a Git LFS pointer" in err
    assert f"Hint: in {clone}: git lfs pull --include vocab.json" in err
    # The template lives in tokenizer_config.json: it renders; the pointer is named as a warning.
    context = tmp_path / "ctx.json"
    context.write_text(json.dumps({"messages": [{"role": "user", "content": "Hi"}], "add_generation_prompt": True}))
    rc, out, err = _run(capsys, "render-template", str(clone), "--context", str(context))
    assert rc == 0 and out.endswith("<|im_start|>assistant\n") and "warning: [lfs-pointer] vocab.json" in err
    template = tmp_path / "chat_template.jinja"
    template.write_text("{{ messages[0].content }}")
    pointerize(template)
    rc, out, err = _run(capsys, "render-template", str(template), "--context", str(context))
    assert rc == 2 and out == "" and "[lfs-pointer] chat_template.jinja is a Git LFS pointer" in err


def test_golden_validate_new_model_refuse_pointers(
    clone: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from onboard.validate_serving.golden import FORMAT

    rc, out, err = _run(capsys, "golden", "record", str(clone), "--out", str(tmp_path / "new"))
    assert rc == 2 and "Error: [lfs-pointer] model-00001-of-00002.safetensors is a Git LFS pointer" in err
    assert "hf download org/tiny" in err and not (tmp_path / "new").exists()
    # Goldens recorded earlier (from the real files): validate names the pointers before it loads anything.
    goldens = tmp_path / "goldens"
    goldens.mkdir()
    (goldens / "MANIFEST.json").write_text(json.dumps({"format": FORMAT}))
    line = {"name": "p", "kind": "short", "prompt_ids": [1], "generated_ids": [2], "top_ids": [[2]],
            "top_logprobs": [[0.0]], "token_logprobs": [0.0]}  # fmt: skip
    (goldens / "prompts.jsonl").write_text(json.dumps(line) + "\n")
    rc, out, err = _run(capsys, "validate", str(clone), "--golden", str(goldens), "--out", str(tmp_path / "v.json"))
    assert rc == 2 and "Error: [lfs-pointer] model-00001-of-00002.safetensors is a Git LFS pointer" in err
    assert not (tmp_path / "v.json").exists()
    rc, _, err = _run(capsys, "new-model", str(clone), "--workspace", str(tmp_path / "ws"))
    assert rc == 2 and "the checkpoint is unusable: lfs-pointer: 3 files are Git LFS pointers" in err


@pytest.mark.parametrize(
    "argv",
    [
        ["generate", "{clone}", "--out", "{tmp}/gen", "--parity"],
        ["quantize-plan", "{clone}", "--budget-kl", "0.1", "--out", "{tmp}/plan"],
        ["draft-check", "{clone}", "ngram", "--out", "{tmp}/draft"],
    ],
)
def test_commands_that_load_the_weights_name_pointers(
    clone: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    # Before: `generate --parity` loaded the pointer ("SafetensorError: header too large") and told the user to fix
    # the adapter.
    rc, _, err = _run(capsys, *(a.format(clone=clone, tmp=tmp_path) for a in argv))
    assert rc == 2 and "Error: [lfs-pointer] model-00001-of-00002.safetensors is a Git LFS pointer" in err, err
    assert "fix the adapter" not in err and "internal error" not in err


def test_tokenizer_files_gguf_and_pickle_pointers(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for vocabulary in ("tokenizer.model", "tokenizer.json"):
        root = M.write_repo(tmp_path / vocabulary.replace(".", "_"))
        (root / "tokenizer_config.json").write_text(json.dumps({"tokenizer_class": "LlamaTokenizer"}))
        (root / vocabulary).write_bytes(b"\x0a" * 4096)
        pointerize(root / vocabulary)
        for argv in (["verify-tokenizer", str(root), "--json"], ["tokenize", str(root), "--text", "Hi"]):
            rc, out, err = _run(capsys, *argv)
            assert rc == 2 and f"[lfs-pointer] {vocabulary} is a Git LFS pointer" in err, argv
            assert "no-tokenizer-vocabulary" not in out + err  # the vocabulary is there, only not downloaded
    for name in ("model.gguf", "pytorch_model.bin"):
        root = M.write_repo(tmp_path / name.replace(".", "_"), {})
        (root / name).write_bytes(b"\0" * 2048)
        pointerize(root / name)
        rc, out, _ = _run(capsys, "inspect", str(root), "--json")
        profile = json.loads(out)
        assert rc == 2 and [f["file"] for f in profile["findings"] if f["code"] == "lfs-pointer"] == [name]
        assert profile["layers"] == "unknown" and profile["memory"] == "unknown"
    # A GGUF is also a tokenizer reference: verify-tokenizer names its pointer (fatal for that file) too.
    rc, out, err = _run(capsys, "verify-tokenizer", str(tmp_path / "model_gguf"), "--json")
    assert rc == 2 and "[lfs-pointer] model.gguf is a Git LFS pointer" in err


def test_repeated_findings_are_grouped() -> None:
    shards = [f"model-{i:05d}-of-00019.safetensors" for i in range(1, 20)]
    missing = [Finding("missing-shard", "fatal", f"index lists {s}", "fetch it", file=s) for s in reversed(shards)]
    other = Finding("no-config", "info", "x")
    [grouped, kept] = group_findings([*missing, other])
    assert kept is other and grouped.file is None and len(grouped.members) == 19
    assert grouped.message == f"19 shards missing: {shards[0]} … {shards[-1]}"
    assert [m.file for m in grouped.members] == shards
    lint = [Finding("config-unknown-field", "warning", f"field {k}", file="config.json") for k in "ab"]
    assert group_findings(lint) == lint  # two things said about one file: not a repeat
    assert span(["model-00001.safetensors", "model-00003.safetensors", "model-00004.safetensors"]) == (
        "model-00001.safetensors, model-00003.safetensors, model-00004.safetensors"
    )
