"""Run llama.cpp's converter (convert_hf_to_gguf.py from the sdist) unchanged, except that `--pre-tokenizer NAME` is
written as tokenizer.ggml.pre where the converter does not know the tokenizer's chkhsh (the fix the
`gguf-unknown-pre-tokenizer` finding describes, for this run only); `validate --engine llama.cpp` checks the result.
Usage: python llamacpp_convert.py CONVERTER_DIR [--pre-tokenizer NAME] -- CONVERTER_ARGS...
"""

from __future__ import annotations

import sys


def main(argv: list[str]) -> None:
    converter_dir, rest = argv[0], argv[1:]
    pre = None
    if rest[:1] == ["--pre-tokenizer"]:
        pre, rest = rest[1], rest[2:]
    rest = rest[1:] if rest[:1] == ["--"] else rest
    sys.path.insert(0, converter_dir)
    sys.argv = [f"{converter_dir}/convert_hf_to_gguf.py", *rest]
    import convert_hf_to_gguf  # noqa: PLC0415 (found on the path set above)

    if pre:
        from conversion.base import TextModel  # noqa: PLC0415

        original = TextModel.get_vocab_base_pre

        def named(self, tokenizer) -> str:  # noqa: ANN001
            try:
                return original(self, tokenizer)
            except NotImplementedError:
                print(f"onboard: unknown pre-tokenizer hash, written as {pre!r} (--pre-tokenizer)", file=sys.stderr)
                return pre

        TextModel.get_vocab_base_pre = named
    convert_hf_to_gguf.main()


if __name__ == "__main__":
    main(sys.argv[1:])
