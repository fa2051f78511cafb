#!/usr/bin/env bash
# Creates .venv-llamacpp with llama-cpp-python (llama.cpp's engine, its OpenAI server extra) built from its PyPI
# sdist with CPU defaults, for `onboard convert gguf` and `onboard validate --engine llama.cpp` and the
# `@pytest.mark.llamacpp` tests. Its own virtualenv, like .venv-vllm: a C++ build the project's .venv does not need.
# The sdist also vendors llama.cpp's converter (convert_hf_to_gguf.py, conversion/, gguf-py/): kept under
# $VENV/share/llama.cpp and run with the project's .venv python (torch, transformers already there; no second torch).
# Idempotent: a stamp file records a finished install. pip's wheel cache is used on purpose, so a rebuild on the
# same machine reuses the compiled wheel (the first build is the slow part: see README, "Quantize and serve on
# llama.cpp").
# Usage: scripts/install_llama_cpp.sh [VENV_DIR]   (default .venv-llamacpp in the repository root)
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${1:-.venv-llamacpp}"
STAMP="$VENV/.llamacpp-installed"
PYTHON="${PYTHON:-python3}"
# Pinned: the converter's pre-tokenizer registry, the quantize parameters struct (tensor-type overrides) and the
# server's logprobs format are what the code and tests were written against.
LLAMA_CPP_PYTHON_VERSION="${LLAMA_CPP_PYTHON_VERSION:-0.3.36}"
SHARE="$VENV/share/llama.cpp"
export PIP_DISABLE_PIP_VERSION_CHECK=1

if [ -f "$STAMP" ] && [ -f "$SHARE/convert_hf_to_gguf.py" ] \
    && "$VENV/bin/python" -c "import llama_cpp" >/dev/null 2>&1; then
    echo "llama-cpp-python already installed in $VENV ($(cat "$STAMP"))"
    exit 0
fi

test -x "$VENV/bin/python" || "$PYTHON" -m venv "$VENV"
echo '*' > "$VENV/.gitignore"  # never committed, whatever the repository's .gitignore says (as venv does on 3.13+)
"$VENV/bin/python" -m pip install -q --upgrade pip
# The converter lives only in the sdist: fetch it (pip's HTTP cache makes a second fetch local) and keep its files.
SDIST_DIR="$(mktemp -d)"
trap 'rm -rf "$SDIST_DIR"' EXIT
"$VENV/bin/python" -m pip download -q --no-deps --no-binary :all: -d "$SDIST_DIR" \
    "llama-cpp-python==$LLAMA_CPP_PYTHON_VERSION"
tar -xzf "$SDIST_DIR"/llama_cpp_python-*.tar.gz -C "$SDIST_DIR"
VENDOR="$(echo "$SDIST_DIR"/llama_cpp_python-*/vendor/llama.cpp)"
rm -rf "$SHARE" && mkdir -p "$SHARE"
cp -r "$VENDOR/convert_hf_to_gguf.py" "$VENDOR/conversion" "$VENDOR/gguf-py" "$SHARE/"
# Built from the same sdist (by name from the index, so pip's wheel cache key is stable across checkouts).
"$VENV/bin/python" -m pip install -q --no-binary llama-cpp-python \
    "llama-cpp-python[server]==$LLAMA_CPP_PYTHON_VERSION"
# Smoke: the bindings load the shared library, and the quantize parameters carry tensor-type overrides.
"$VENV/bin/python" -c "import llama_cpp.llama_cpp as c; assert 'tt_overrides' in dict(c.llama_model_quantize_params._fields_)"
"$VENV/bin/python" -c "import llama_cpp.server.app" >/dev/null
"$VENV/bin/python" -c "import llama_cpp; print(llama_cpp.__version__)" > "$STAMP"
echo "llama-cpp-python $(cat "$STAMP") installed in $VENV (converter in $SHARE)"
