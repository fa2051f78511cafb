"""Checkpoint integrity from the file listing, the index and the safetensors headers (never the tensor data).

Index against shards (missing or extra files and tensors, duplicates, paths leaving the repo), header problems, and
pickle-only checkpoints (reported, never unpickled). Set and dict comparisons do the work, not a step per tensor.
"""

from __future__ import annotations

from operator import itemgetter

from onboard.errors import CheckpointError
from onboard.findings import Finding, error, fatal, warning
from onboard.inspect_checkpoint.checkpoint_types import SafetensorsHeader
from onboard.inspect_checkpoint.source import INDEX_FILE, Source, is_safe_relpath
from onboard.lfs import CODE as LFS_CODE

PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".ckpt", ".pkl", ".pickle")
# Pickles that are not weights (training state): their presence alone does not make a pickle checkpoint.
NON_WEIGHT_PICKLES = {"training_args.bin", "optimizer.pt", "scheduler.pt", "rng_state.pth", "scaler.pt"}
MAX_LISTED = 5  # name at most this many tensors per finding; the count says how many there are in all
_HINT_INDEX = "re-save the checkpoint (save_pretrained writes a matching index), or fix the index's weight_map"


def check_integrity(source: Source, headers: dict[str, SafetensorsHeader | CheckpointError]) -> list[Finding]:
    """Integrity findings; the source's listing findings (`source.findings`) are not repeated here."""
    findings: list[Finding] = _weights_present(source)
    index = source.index()
    for name, result in headers.items():
        if isinstance(result, CheckpointError):
            if result.code == "missing-shard" and index is not None:
                continue  # reported once, from the index, below
            if result.code == LFS_CODE:
                continue  # reported once, from the listing (source.findings), with size, oid and the fetch command
            tensor = getattr(result, "tensor", None)
            findings.append(Finding(result.code, "fatal", result.message, result.hint, file=name, tensor=tensor))
    good = {name: h for name, h in headers.items() if isinstance(h, SafetensorsHeader)}
    weight_map = index.get("weight_map") if index is not None else None
    shards = _distinct_values(weight_map)
    if index is not None and (shards is None or not set(map(type, shards)) <= {str}):
        findings.append(
            fatal(
                "index-invalid",
                f"{INDEX_FILE}: 'weight_map' must map tensor names to file names",
                _HINT_INDEX,
                file=INDEX_FILE,
            )
        )
        weight_map = None
    if weight_map is not None:
        findings += _index_paths(source, weight_map, shards)  # type: ignore[arg-type]
        if _consistent(weight_map, good):
            return findings
    owner: dict[str, str] = {}  # tensor -> shard holding it (the last one, if duplicated)
    total = 0
    for name, h in good.items():
        owner.update(dict.fromkeys(h.tensors, name))
        total += len(h.tensors)
    if len(owner) != total:
        findings += _duplicates(good)
    if weight_map is not None:
        findings += _index_vs_headers(weight_map, good, owner)
    return findings


def _consistent(weight_map: dict[str, str], headers: dict[str, SafetensorsHeader]) -> bool:
    """The common case, quickly: every shard was read, each of its tensors maps to it in the index, and the counts
    add up (so nothing is missing or duplicated)."""
    if len(headers) != len(set(weight_map.values())):
        return False
    total = 0
    for shard, h in headers.items():
        names = list(h.tensors)
        if not names:
            continue
        try:
            owners = itemgetter(*names)(weight_map)
        except KeyError:
            return False
        if len(names) == 1:
            owners = (owners,)
        if owners.count(shard) != len(names):
            return False
        total += len(names)
    return total == len(weight_map)


def _weights_present(source: Source) -> list[Finding]:
    paths = [f.path for f in source.files]
    if any(p.endswith(".safetensors") for p in paths) or source.has_file(INDEX_FILE):
        return []  # an index without its shards: missing-shard says exactly which
    pickles = [p for p in paths if p.endswith(PICKLE_SUFFIXES) and p.rsplit("/", 1)[-1] not in NON_WEIGHT_PICKLES]
    if pickles:
        return [
            fatal(
                "pickle-only",
                f"pickle-only checkpoint: convert to safetensors ({', '.join(pickles[:MAX_LISTED])})",
                "pickle files can run arbitrary code when loaded, so onboard never opens them; convert them with "
                "a trusted tool in a sandbox (e.g. load with torch.load(weights_only=True), save with safetensors)",
                file=pickles[0],
            )
        ]
    if any(p.endswith(".gguf") for p in paths):
        return [
            warning(
                "gguf-only",
                "only GGUF weights: parameter counts and integrity need safetensors",
                "point onboard at the original safetensors repo",
            )
        ]
    return [
        warning(
            "no-weights",
            "no weight files: profile from config.json only",
            "parameter counts and integrity checks need the safetensors files (or their headers)",
        )
    ]


def _distinct_values(weight_map: object) -> dict | None:
    """The weight_map's distinct values in order (None if it is not a dict or a value is not hashable)."""
    if not isinstance(weight_map, dict):
        return None
    try:
        return dict.fromkeys(weight_map.values())
    except TypeError:  # a list or an object as a value
        return None


def _index_paths(source: Source, weight_map: dict[str, str], shards: dict[str, None]) -> list[Finding]:
    findings: list[Finding] = []
    for shard in shards:
        if not is_safe_relpath(shard) or not shard.endswith(".safetensors"):
            tensors = [t for t, s in weight_map.items() if s == shard]
            findings.append(
                fatal(
                    "path-traversal",
                    f"{INDEX_FILE}: shard path {shard!r} (for {_names(tensors)}) is not a relative "
                    ".safetensors path inside the repo",
                    "shard paths must be relative, without '..': fix the index",
                    file=INDEX_FILE,
                    tensor=tensors[0],
                )
            )
        elif not source.has_file(shard):
            findings.append(
                fatal(
                    "missing-shard",
                    f"{INDEX_FILE} lists {shard} but the repo has no such file",
                    "the download is incomplete: fetch every shard the index lists (or fix the index)",
                    file=shard,
                )
            )
    listed = set(shards)
    # Top-level extras are likely stale shards; files in sub-folders (e.g. original/) are other formats.
    for path in source.top_level_shards():
        if path not in listed:
            findings.append(
                warning(
                    "extra-shard",
                    f"{path} is not listed in {INDEX_FILE}: its tensors are ignored by loaders",
                    "delete the stale file or add its tensors to the index",
                    file=path,
                )
            )
    return findings


def _duplicates(headers: dict[str, SafetensorsHeader]) -> list[Finding]:
    seen: dict[str, str] = {}
    findings = []
    for name, h in headers.items():
        for tensor in h.tensors:
            first = seen.setdefault(tensor, name)
            if first != name:
                findings.append(
                    fatal(
                        "duplicate-tensor",
                        f"tensor {tensor!r} is stored in both {first} and {name}",
                        "loaders would silently pick one copy: remove it from one shard and fix the index",
                        file=name,
                        tensor=tensor,
                    )
                )
    return findings


def _index_vs_headers(
    weight_map: dict[str, str], headers: dict[str, SafetensorsHeader], actual: dict[str, str]
) -> list[Finding]:
    if actual == weight_map:  # the common case, compared at C speed
        return []
    expected = {t: s for t, s in weight_map.items() if s in headers}  # only the shards we could read
    if actual == expected:
        return []
    findings = []
    absent: dict[str, list[str]] = {}
    unlisted: dict[str, list[str]] = {}
    for tensor, shard in expected.items():
        if tensor not in headers[shard].tensors:
            absent.setdefault(shard, []).append(tensor)
    for tensor, shard in actual.items():
        listed = weight_map.get(tensor)
        if listed != shard and tensor not in getattr(headers.get(listed or ""), "tensors", ()):
            unlisted.setdefault(shard, []).append(tensor)
    for shard, tensors in absent.items():
        findings.append(
            fatal(
                "tensor-missing",
                f"{INDEX_FILE} lists {len(tensors)} tensor(s) in {shard} that it does not hold: {_names(tensors)}",
                "the shard is stale or the index is wrong: re-download or re-save",
                file=shard,
                tensor=tensors[0],
            )
        )
    for shard, tensors in unlisted.items():
        findings.append(
            error(
                "tensor-not-indexed",
                f"{shard} holds {len(tensors)} tensor(s) not listed for it in {INDEX_FILE}: {_names(tensors)}",
                "loaders follow the index and will not load them: " + _HINT_INDEX,
                file=shard,
                tensor=tensors[0],
            )
        )
    return findings


def _names(tensors: list[str]) -> str:
    shown = ", ".join(repr(t) for t in tensors[:MAX_LISTED])
    return shown + (f" and {len(tensors) - MAX_LISTED} more" if len(tensors) > MAX_LISTED else "")
