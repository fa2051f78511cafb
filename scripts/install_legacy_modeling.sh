#!/usr/bin/env bash
# Fetches the legacy modeling files the reference-soundness tests build checkpoints from (tests/dayzero/legacy.py):
# transformers 4.30.2's Llama and GPT-NeoX modeling and configuration files (Apache-2.0), from its wheel on PyPI.
# That release's rotary embeddings compute cos_cached/sin_cached in __init__ (Llama's as buffers, GPT-NeoX's as plain
# attributes) and store inv_freq in the checkpoint: loaded as repository code under today's transformers,
# from_pretrained leaves those tensors uninitialised or on the meta device (issue 41).
# Only the files are kept, never committed: ONBOARD_LEGACY_MODELING (default ~/.cache/onboard/legacy-modeling).
# Idempotent: the wheel is checked against its sha256, and a stamp written last marks a finished fetch of this list
# of files (.fetched-2: a cache with only the Llama files, stamped .fetched, is fetched again; .fetched is still
# written, for checkouts from before GPT-NeoX sharing the cache).
# Usage: scripts/install_legacy_modeling.sh
set -euo pipefail
cd "$(dirname "$0")/.."
CACHE="${ONBOARD_LEGACY_MODELING:-$HOME/.cache/onboard/legacy-modeling}"
VERSION=4.30.2
WHEEL="transformers-$VERSION-py3-none-any.whl"
SHA256=c332e3a3097f9ed89ce556b403251235931c00237b8bc2d7adaa19d226c13f1d
DEST="$CACHE/transformers-$VERSION"
STAMP="$DEST/.fetched-2"
PYTHON="${PYTHON:-python3}"
[ -x .venv/bin/python ] && PYTHON=.venv/bin/python
if [ -f "$STAMP" ]; then
    exit 0
fi
mkdir -p "$CACHE"
if ! echo "$SHA256  $CACHE/$WHEEL" | sha256sum --check --status 2>/dev/null; then
    PIP_DISABLE_PIP_VERSION_CHECK=1 "$PYTHON" -m pip download --quiet --no-deps --only-binary=:all: \
        "transformers==$VERSION" -d "$CACHE"
fi
echo "$SHA256  $CACHE/$WHEEL" | sha256sum --check --status || {
    echo "Error: $CACHE/$WHEEL does not match its sha256 $SHA256; delete it and rerun" >&2
    exit 1
}
rm -rf "$DEST"
"$PYTHON" - "$CACHE/$WHEEL" "$DEST" <<'PY'
import sys
import zipfile

wheel, dest = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(wheel) as zf:
    for name in ("llama/modeling_llama.py", "llama/configuration_llama.py", "gpt_neox/modeling_gpt_neox.py",
                 "gpt_neox/configuration_gpt_neox.py"):
        zf.extract(f"transformers/models/{name}", dest)
PY
echo "transformers $VERSION from PyPI ($WHEEL, sha256 $SHA256)" > "$DEST/.fetched"
echo "transformers $VERSION from PyPI ($WHEEL, sha256 $SHA256)" > "$STAMP"
