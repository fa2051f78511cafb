"""Our GGUF metadata stream reads what the `gguf` package's own reader reads, for every value type."""

from __future__ import annotations

from pathlib import Path

import gguf
import pytest

from onboard.errors import InputError
from onboard.verify_tokenizer.gguf_vocab import read_gguf_metadata, read_gguf_vocab

TOKENS = ["<s>", "</s>", "▁a", "b", "<|im_end|>"]


def _write(path: Path) -> None:
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_uint8("t.u8", 200)
    writer.add_int8("t.i8", -3)
    writer.add_uint16("t.u16", 60000)
    writer.add_int16("t.i16", -30000)
    writer.add_uint32("t.u32", 4_000_000_000)
    writer.add_int32("t.i32", -2_000_000_000)
    writer.add_float32("t.f32", 0.5)
    writer.add_uint64("t.u64", 2**63 + 5)
    writer.add_int64("t.i64", -(2**62))
    writer.add_float64("t.f64", 1e-300)
    writer.add_bool("t.bool", True)
    writer.add_string("t.str", "héllo")
    writer.add_array("t.ints", [1, -2, 3])
    writer.add_tokenizer_model("llama")
    writer.add_token_list(TOKENS)
    writer.add_token_scores([0.0, 0.0, -1.5, -2.25, 0.0])
    writer.add_token_types([3, 3, 1, 1, 4])
    writer.add_add_space_prefix(False)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def test_every_value_type_reads_as_gguf_reads_it(tmp_path: Path) -> None:
    path = tmp_path / "v.gguf"
    _write(path)
    ours = read_gguf_metadata(path)
    theirs = {name: field.contents() for name, field in gguf.GGUFReader(path).fields.items()}
    assert {k: theirs[k] for k in ours} == ours
    assert ours["t.u64"] == 2**63 + 5 and ours["t.str"] == "héllo" and ours["tokenizer.ggml.tokens"] == TOKENS
    vocab = read_gguf_vocab(path)
    assert (vocab.model, vocab.token_types, vocab.add_space_prefix) == ("llama", [3, 3, 1, 1, 4], False)


def test_truncated_and_foreign_files_are_clear_errors(tmp_path: Path) -> None:
    path = tmp_path / "v.gguf"
    _write(path)
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(path.read_bytes()[:200])
    with pytest.raises(InputError, match="ends early"):
        read_gguf_metadata(cut)
    foreign = tmp_path / "x.gguf"
    foreign.write_bytes(b"PK\x03\x04" + bytes(60))
    with pytest.raises(InputError, match="not a GGUF file"):
        read_gguf_metadata(foreign)
