#!/usr/bin/env bash
# Creates .venv-llamacpp with llama-cpp-python (llama.cpp's engine, its OpenAI server extra) built from its PyPI
# sdist for the CPU (on x86-64: the portable AVX2 baseline, see BUILD_FLAGS), for `onboard convert gguf` and `onboard validate --engine llama.cpp` and the
# `@pytest.mark.llamacpp` tests. Its own virtualenv, like .venv-vllm: a C++ build the project's .venv does not need.
# The sdist also vendors llama.cpp's converter (convert_hf_to_gguf.py, conversion/, gguf-py/): kept under
# $VENV/share/llama.cpp and run with the project's .venv python (torch, transformers already there; no second torch).
# Idempotent: a stamp file records a finished install and its build flags. The compiled wheel is kept in a cache
# folder named by version and flags (pip's own wheel cache ignores CMAKE_ARGS, so it would hand back a wheel built
# with other flags), so a rebuild on the same machine reuses it (the first build is the slow part: see
# benchmarks/README.md, "llama.cpp").
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
# Build flags. llama.cpp's default (GGML_NATIVE) compiles for the build machine's CPU: on a Sapphire Rapids VM that
# means AVX-512 and AMX kernels, and there llama-cpp-python 0.3.36 crashed decoding a Q8_0 GGUF of the trained fixture
# (hidden 192; segfault in llama_decode) and its F16 tiny Qwen3-MoE missed logit parity, while the AVX2 baseline build
# of the same sdist passed every test on the same machine. On x86-64 we build that baseline: the same kernels on
# every CI machine. LLAMA_CPP_CMAKE_ARGS overrides (e.g. "-DGGML_NATIVE=ON" for the fastest local engine).
# -DLLAVA_BUILD=OFF: the sdist also builds the multimodal library (libmtmd: clip, audio, image), which the bindings
# load only for image chat formats and onboard never uses; leaving it out shortens the cold build.
if [ -n "${LLAMA_CPP_CMAKE_ARGS+set}" ]; then
    BUILD_FLAGS="$LLAMA_CPP_CMAKE_ARGS"
elif [ "$(uname -m)" = x86_64 ] && grep -qw avx2 /proc/cpuinfo 2>/dev/null; then
    BUILD_FLAGS="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON -DLLAVA_BUILD=OFF"
elif [ "$(uname -m)" = x86_64 ]; then
    BUILD_FLAGS="-DGGML_NATIVE=OFF -DLLAVA_BUILD=OFF"
else
    BUILD_FLAGS="-DLLAVA_BUILD=OFF"  # other architectures: llama.cpp's own default for that CPU
fi
WANT="$LLAMA_CPP_PYTHON_VERSION $BUILD_FLAGS"

if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$WANT" ] && [ -f "$SHARE/convert_hf_to_gguf.py" ] \
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
# Built from the same sdist, once per version and flags; the server extra's pure-Python dependencies from the index.
FLAGS_KEY="$(printf '%s' "$BUILD_FLAGS" | sha256sum | cut -c1-12)"
WHEELS="${XDG_CACHE_HOME:-$HOME/.cache}/onboard/wheels/llama-cpp-python-$LLAMA_CPP_PYTHON_VERSION-$FLAGS_KEY"
if ! ls "$WHEELS"/llama_cpp_python-*.whl >/dev/null 2>&1; then
    mkdir -p "$WHEELS"
    CMAKE_ARGS="$BUILD_FLAGS" "$VENV/bin/python" -m pip wheel -q --no-deps --no-cache-dir \
        --no-binary llama-cpp-python -w "$WHEELS" "llama-cpp-python==$LLAMA_CPP_PYTHON_VERSION"
fi
"$VENV/bin/python" -m pip uninstall -q -y llama-cpp-python >/dev/null 2>&1 || true  # another build's wheel
"$VENV/bin/python" -m pip install -q --only-binary llama-cpp-python --find-links "$WHEELS" \
    "llama-cpp-python[server]==$LLAMA_CPP_PYTHON_VERSION"
# Smoke: the bindings load the shared library, and the quantize parameters carry tensor-type overrides.
"$VENV/bin/python" -c "import llama_cpp.llama_cpp as c; assert 'tt_overrides' in dict(c.llama_model_quantize_params._fields_)"
"$VENV/bin/python" -c "import llama_cpp.server.app" >/dev/null
printf '%s' "$WANT" > "$STAMP"
echo "llama-cpp-python $("$VENV/bin/python" -c "import llama_cpp; print(llama_cpp.__version__)") installed in $VENV" \
    "(build flags: ${BUILD_FLAGS:-llama.cpp defaults}; converter in $SHARE)"
