"""Run by test_index_worker.py in a fresh, single-threaded interpreter: inspect every case with index_worker's
forked worker (as it runs, left all but one shard, failing) and without it, and print what each gave (JSON on
stdout).

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
from onboard.inspect_checkpoint.tensor_index import TensorIndex
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
    sorted order, whatever order the index names them in."""
    layer0 = {n: spec for n, spec in M.TENSORS.items() if ".layers.0." in n}
    layer1 = {n.replace(".layers.0.", ".layers.1."): spec for n, spec in layer0.items()}
    rest = {n: spec for n, spec in M.TENSORS.items() if n not in layer0}
    shards = {"b.safetensors": {**rest, **layer0}, "a.safetensors": layer1}
    M.write_repo(root, shards, index=True)
    (root / "config.json").write_text(json.dumps({**M.CONFIG, "num_hidden_layers": 2}))
    return root


def _many_shards(root: Path) -> Path:
    """Twelve layers over six shards, the index's tensor names sorted as save_pretrained writes them (so it names
    the shards out of order: layers.10 before layers.2). Layer 10's q_proj is BF16 (one masked name, two dtypes, in
    different shards), layer 11's MLP is wider than the others (shapes unlike their group's first), and layers 9 and
    10 mask to different keys (one group merged from two, across shards)."""
    layer0 = {n: spec for n, spec in M.TENSORS.items() if ".layers.0." in n}
    layers: dict[int, M.TensorSpec] = {}
    for i in range(12):
        layers[i] = {}
        for name, (dtype, shape) in layer0.items():
            if i == 10 and "q_proj" in name:
                dtype = "BF16"
            if i == 11 and ".mlp." in name:
                shape = [8, 24] if "down_proj" in name else [24, 8]
            layers[i][name.replace(".layers.0.", f".layers.{i}.")] = (dtype, shape)
    ends = {n: spec for n, spec in M.TENSORS.items() if ".layers." not in n}
    shards = {f"model-{k + 1:05d}-of-00006.safetensors": {**layers[2 * k], **layers[2 * k + 1]} for k in range(6)}
    shards["model-00001-of-00006.safetensors"] = {"model.embed_tokens.weight": ends.pop("model.embed_tokens.weight"),
                                                  **shards["model-00001-of-00006.safetensors"]}  # fmt: skip
    shards["model-00006-of-00006.safetensors"].update(ends)
    index = M.make_index(shards)
    index["weight_map"] = dict(sorted(index["weight_map"].items()))  # type: ignore[call-overload]
    M.write_repo(root, shards, index=index)
    (root / "config.json").write_text(json.dumps({**M.CONFIG, "num_hidden_layers": 12}))
    return root


CASES: dict[str, Callable[[Path], Path]] = {
    "valid": M.valid,
    "index_order": _index_order,
    "many_shards": _many_shards,
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
        seen["shards"] = result.shards  # the order inspect groups them in
        seen["read_here"] = list(result.headers)  # the shards this process read itself
        return result

    index_worker._Worker.start, index_worker.read_shard_headers = counting_start, recording_read  # type: ignore[method-assign]
    try:
        seen["result"] = msgspec.json.decode(msgspec.json.encode(inspect(str(path))))
    except OnboardError as exc:
        seen["result"] = f"{type(exc).__name__}: {exc.message}"
    finally:
        index_worker._Worker.start, index_worker.read_shard_headers = start, read  # type: ignore[method-assign]
    return seen


def _failing_part(self: TensorIndex) -> object:
    raise RuntimeError("the worker fails before it hands its part over")


def claims_race(n: int = 20_000) -> dict[str, object]:
    """This process claims positions from the front while a forked child claims from the back, both as fast as
    they can (GROUP_SHARE 0: the front never stops early): each position must go to exactly one of them. The child
    takes ten before this process starts, so both claim some however the two are scheduled."""
    share, index_worker.GROUP_SHARE = index_worker.GROUP_SHARE, 0
    claims = index_worker._Claims(n)
    read_end, write_end = os.pipe()
    ready_read, ready_write = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(read_end)
            taken = [claims.back() for _ in range(10)]
            os.write(ready_write, b"go")
            while (i := claims.back()) is not None:
                taken.append(i)
            with os.fdopen(write_end, "w") as out:
                json.dump(taken, out)
        finally:
            os._exit(0)
    os.close(write_end)
    os.close(ready_write)  # the child's end alone: its exit ends the wait below even if it fails first
    os.read(ready_read, 2)
    os.close(ready_read)
    front = []
    while (i := claims.front()) is not None:
        front.append(i)
    with os.fdopen(read_end) as pipe:
        back = json.load(pipe)
    os.waitpid(pid, 0)
    claims.close()
    index_worker.GROUP_SHARE = share
    return {"front": len(front), "back": len(back), "each_once": sorted(front + back) == list(range(n)),
            "front_first": front == list(range(len(front))), "back_last": back == list(range(n - 1, len(front) - 1, -1))}  # fmt: skip


def main(tmp: Path) -> None:
    """Each case four ways: without the worker; with it; with it left every shard but the first (GROUP_SHARE so
    large that this process stops claiming after one); with a worker that fails once it has read its shards."""
    index_worker.FORK_FROM_BYTES = 0  # the cases' indexes are tiny
    index_worker.spare_cpu = lambda: True  # exercise the worker on a one-CPU runner too
    share, to_part = index_worker.GROUP_SHARE, TensorIndex.to_part
    out: dict[str, dict[str, object]] = {}
    for name, build in CASES.items():
        root = build(tmp / name)
        os.environ["ONBOARD_INSPECT_FORK"] = "0"
        without = run(root)
        os.environ.pop("ONBOARD_INSPECT_FORK")
        with_worker = run(root)
        index_worker.GROUP_SHARE = 1e9
        split = run(root)
        TensorIndex.to_part = _failing_part  # type: ignore[method-assign,assignment]
        failing = run(root)
        index_worker.GROUP_SHARE, TensorIndex.to_part = share, to_part  # type: ignore[method-assign]
        out[name] = {"with": with_worker, "without": without, "split": split, "failing": failing}
    try:
        os.waitpid(-1, os.WNOHANG)
        out["_children_left"] = True  # type: ignore[assignment]
    except ChildProcessError:
        out["_children_left"] = False  # type: ignore[assignment]
    out["_claims_race"] = claims_race()  # type: ignore[assignment]
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
