"""Build the bundled demo checkpoint: the trained tiny reference model, copied into examples/demo-qwen3/.

The demo is tests/fixtures/trained-qwen3 (a Qwen3-shaped model of 2.3M parameters trained for a few CPU minutes on
the Python standard library's docstrings; its PROVENANCE.md says how, and scripts/train_tiny_reference.py rebuilds
it): every stage runs on a real architecture, a real byte-level BPE tokenizer and Qwen3's chat template and special
tokens, and the greedy continuations in the report are recognisable text ("Return a copy of the string."). Random
weights would talk nonsense and leave every distribution near-uniform. Output: examples/demo-qwen3/ (git-ignored;
the training corpus is left out).

    .venv/bin/python scripts/make_demo_checkpoint.py [--out DIR] [--force]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TRAINED = REPO / "tests" / "fixtures" / "trained-qwen3"
DEFAULT_OUT = REPO / "examples" / "demo-qwen3"
LEFT_OUT = ("corpus.txt.gz",)  # training data, not part of a release


def build(out: Path, force: bool = False) -> Path:
    if out.exists() and (out / "model.safetensors").exists() and not force:
        print(f"demo checkpoint already at {out} (use --force to rebuild)", file=sys.stderr)
        return out
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.copytree(TRAINED, tmp, ignore=shutil.ignore_patterns(*LEFT_OUT))
    shutil.rmtree(out, ignore_errors=True)
    os.replace(tmp, out)  # the folder appears whole or not at all
    print(f"demo checkpoint written to {out}", file=sys.stderr)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--force", action="store_true")
    args = parser.parse_args()
    build(args.out, args.force)


if __name__ == "__main__":
    main()
