"""Dump the transformers-measured ground truth of every tiny checkpoint (tests/tiny) as JSON.

    python scripts/tiny_ground_truth.py                 # all TINY model types, JSON on stdout
    python scripts/tiny_ground_truth.py -o gt.json llama gpt_oss deepseek_v3
    python scripts/tiny_ground_truth.py --keep-dir /tmp/tiny   # also keep the checkpoints

Timings and failures go to stderr; a failing model type is reported as {"error": ...} and the exit code is 1.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_UPDATE_CHECK", "1")


def main(argv: list[str] | None = None) -> int:
    """Build each requested tiny checkpoint, measure it, print or write the JSON table."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model_types", nargs="*", help="TINY keys (default: all)")
    parser.add_argument("-o", "--output", type=Path, help="write JSON here (atomically) instead of stdout")
    parser.add_argument("--keep-dir", type=Path, help="build checkpoints here and keep them")
    parser.add_argument("--dtype", default="float32", help="checkpoint dtype (float32, bfloat16, float16)")
    args = parser.parse_args(argv)

    import transformers

    from tests.tiny.factory import TINY, make_tiny_checkpoint
    from tests.tiny.ground_truth import ground_truth

    transformers.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    unknown = [t for t in args.model_types if t not in TINY]
    if unknown:
        parser.error(f"unknown model types {unknown}; known: {', '.join(sorted(TINY))}")
    result: dict[str, object] = {}
    failed = 0
    with tempfile.TemporaryDirectory() as tmp:
        root = args.keep_dir or Path(tmp)
        start = time.perf_counter()
        for model_type in args.model_types or list(TINY):
            t0 = time.perf_counter()
            try:
                ckpt = make_tiny_checkpoint(model_type, root / model_type, dtype=args.dtype)
                result[model_type] = ground_truth(model_type, ckpt)
                print(f"ok   {model_type:20s} {time.perf_counter() - t0:5.2f}s", file=sys.stderr)
            except Exception as exc:  # noqa: BLE001 - one broken architecture must not hide the others
                failed += 1
                result[model_type] = {"error": f"{type(exc).__name__}: {exc}"}
                print(f"FAIL {model_type:20s} {type(exc).__name__}: {exc}", file=sys.stderr)
        print(f"{len(result) - failed} ok, {failed} failed, {time.perf_counter() - start:.1f}s", file=sys.stderr)
    text = json.dumps(result, indent=1, sort_keys=False, default=str)
    if args.output:
        tmp_path = args.output.with_name(args.output.name + ".tmp")
        tmp_path.write_text(text + "\n")
        os.replace(tmp_path, args.output)
    else:
        print(text)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
