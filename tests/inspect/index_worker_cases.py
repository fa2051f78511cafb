"""Run by test_index_worker.py in a fresh, single-threaded interpreter: inspect every case with index_worker's
forked worker and without it, and print what each gave (JSON on stdout).

    python -m tests.inspect.index_worker_cases TMPDIR
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from pathlib import Path

import msgspec

from onboard.errors import OnboardError
from onboard.inspect_checkpoint import index_worker, inspect
from tests import malformed as M

FIRST, SECOND = "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"


def _index(root: Path, mutate: Callable[[dict], object]) -> Path:
    index = json.loads((root / "model.safetensors.index.json").read_text())
    mutate(index["weight_map"])
    (root / "model.safetensors.index.json").write_text(json.dumps(index))
    return root


def _swap(wm: dict) -> None:  # one tensor of each shard listed under the other: the counts still add up
    wm["model.embed_tokens.weight"], wm["lm_head.weight"] = SECOND, FIRST


def _stale(root: Path) -> Path:
    M.valid(root)
    M.write_safetensors(root / "stale.safetensors", M.header_dict({"x": ("F32", [2])}))
    (root / "original").mkdir()
    M.write_safetensors(root / "original" / "consolidated.safetensors", M.header_dict({"x": ("F32", [2])}))
    return root


def _in_subfolder(root: Path) -> Path:
    shards = M.split_two()
    sub = {"weights/" + name: tensors for name, tensors in shards.items()}
    (root / "weights").mkdir(parents=True)
    return M.write_repo(root, sub, index=True)


def _second_truncated(root: Path) -> Path:
    M.valid(root)
    with open(root / SECOND, "r+b") as f:
        f.truncate(20)
    return root


def _index_order(root: Path) -> Path:
    """Layer 0 in b.safetensors, listed first by the index; layer 1 in a.safetensors. Inspect reads the shards in
    the index's order, whatever order the folder lists them in."""
    layer0 = {n: spec for n, spec in M.TENSORS.items() if ".layers.0." in n}
    layer1 = {n.replace(".layers.0.", ".layers.1."): spec for n, spec in layer0.items()}
    rest = {n: spec for n, spec in M.TENSORS.items() if n not in layer0}
    shards = {"b.safetensors": {**rest, **layer0}, "a.safetensors": layer1}
    M.write_repo(root, shards, index=True)
    (root / "config.json").write_text(json.dumps({**M.CONFIG, "num_hidden_layers": 2}))
    return root


CASES: dict[str, Callable[[Path], Path]] = {
    "valid": M.valid,
    "index_order": _index_order,
    "ghost_tensor": lambda r: _index(M.valid(r), lambda wm: wm.__setitem__("model.ghost.weight", SECOND)),
    "unlisted_tensor": lambda r: _index(M.valid(r), lambda wm: wm.pop("lm_head.weight")),
    "moved_tensor": lambda r: _index(M.valid(r), lambda wm: wm.__setitem__("lm_head.weight", FIRST)),
    "swapped_tensors": lambda r: _index(M.valid(r), _swap),
    "stale_extra_shard": _stale,
    "missing_shard": M.missing_shard,
    "duplicate_tensor": M.duplicate_tensor,
    "path_traversal": M.path_traversal,
    "absolute_path": M.absolute_path,
    "shards_in_a_subfolder": _in_subfolder,
    "truncated_shard": _second_truncated,
    "index_not_a_map": lambda r: _write(M.valid(r), {"weight_map": ["a", "b"]}),
    "index_not_json": lambda r: _write(M.valid(r), "{not json"),
}


def _write(root: Path, index: object) -> Path:
    text = index if isinstance(index, str) else json.dumps(index)
    (root / "model.safetensors.index.json").write_text(text)
    return root


def run(path: Path) -> dict[str, object]:
    seen: dict[str, object] = {"worker": False, "matched": False}
    start, read = index_worker._Worker.start, index_worker.read_shard_headers

    def counting_start(src):  # type: ignore[no-untyped-def]
        worker = start(src)
        seen["worker"] = seen["worker"] or worker is not None
        return worker

    def recording_read(src):  # type: ignore[no-untyped-def]
        result = read(src)
        seen["matched"] = result.index_matches
        seen["shards"] = [result.shards, list(result.headers)]  # the order inspect reads them in
        return result

    index_worker._Worker.start, index_worker.read_shard_headers = counting_start, recording_read  # type: ignore[method-assign]
    try:
        seen["result"] = msgspec.json.decode(msgspec.json.encode(inspect(str(path))))
    except OnboardError as exc:
        seen["result"] = f"{type(exc).__name__}: {exc.message}"
    finally:
        index_worker._Worker.start, index_worker.read_shard_headers = start, read  # type: ignore[method-assign]
    return seen


def main(tmp: Path) -> None:
    index_worker.FORK_FROM_BYTES = 0  # the cases' indexes are tiny
    index_worker.spare_cpu = lambda: True  # exercise the worker on a one-CPU runner too
    out: dict[str, dict[str, object]] = {}
    for name, build in CASES.items():
        root = build(tmp / name)
        os.environ["ONBOARD_INSPECT_FORK"] = "0"
        without = run(root)
        os.environ.pop("ONBOARD_INSPECT_FORK")
        out[name] = {"with": run(root), "without": without}
    try:
        os.waitpid(-1, os.WNOHANG)
        out["_children_left"] = True  # type: ignore[assignment]
    except ChildProcessError:
        out["_children_left"] = False  # type: ignore[assignment]
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
