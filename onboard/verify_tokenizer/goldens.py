"""Goldens: `golden_outputs/<org>__<name>/tokenizer.json` records ids, renders, fingerprint and stop set; a later run
(new revision, new tokenizers/transformers release) diffs against it and names the first drift precisely."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec

from onboard import serde
from onboard.checkpoint_id import golden_key
from onboard.comparator import first_difference
from onboard.errors import InputError
from onboard.findings import Finding, error, info
from onboard.fsutil import atomic_write, read_json
from onboard.verify_tokenizer.repo import TokenizerRepo
from onboard.versions import TOKENIZER_LIBRARIES, library_versions

GOLDEN_FILE = "tokenizer.json"
FORMAT = 1


@dataclass(frozen=True)
class GoldenStatus:
    path: str
    action: str
    """recorded | compared | missing"""
    drift: int = 0


def golden_path_for(
    repo: TokenizerRepo, source: str, golden_dir: Path | None, name: str | None, *, required: bool, record_first: str
) -> Path:
    """`<golden_dir>/<key>/tokenizer.json`, the key from --name or the repo (onboard/checkpoint_id.py golden_key).
    `required`: a missing golden is an InputError saying to run `record_first` (checked before any work starts)."""
    key = golden_key(source, name) if name else repo.golden_name
    path = (golden_dir or Path("golden_outputs")) / key / GOLDEN_FILE
    if path.resolve().parent == repo.root.resolve():
        raise InputError(
            f"golden file {path} would be the source's own tokenizer.json",
            "give --golden a folder that is not the parent of the checkpoint folder",
        )
    if required and not path.is_file():
        raise InputError(
            f"no tokenizer golden recorded for {repo.display} (looked for {path})", f"record one first: {record_first}"
        )
    return path


def record_or_compare(path: Path, doc: dict, record: bool, findings: list[Finding]) -> GoldenStatus:
    """Write the golden, or append its drift (or its absence) to `findings`."""
    if record:
        write_golden(path, doc)
        return GoldenStatus(str(path), "recorded")
    if not path.is_file():
        findings.append(info("golden-missing", f"no golden at {path}", "run with --record to create it"))
        return GoldenStatus(str(path), "missing")
    drift = diff_golden(read_golden(path), doc, str(path))
    findings += drift
    return GoldenStatus(str(path), "compared", sum(f.severity == "error" for f in drift))


def golden_document(
    display: str,
    revision: str | None,
    texts: list[str],
    ids: list[list[int]],
    renders: dict[str, Any],
    fingerprint: str,
    family: str | None,
    stop_ids: list[int],
) -> dict[str, Any]:
    return {
        "format": FORMAT,
        "source": display,
        "revision": revision,
        "libraries": library_versions(TOKENIZER_LIBRARIES, python=False),
        "fingerprint": {"chkhsh": fingerprint, "family": family},
        "stop_ids": stop_ids,
        "renders": renders,
        "corpus": [{"text": t, "ids": i} for t, i in zip(texts, ids)],
    }


def write_golden(path: Path, doc: dict[str, Any]) -> None:
    """Atomic write; one corpus case per line so a drift shows up as a one-line git diff."""
    head = {k: v for k, v in doc.items() if k != "corpus"}
    body = json.dumps(head, ensure_ascii=False, indent=1)[:-2]
    cases = ",\n".join("  " + json.dumps(c, ensure_ascii=False) for c in doc["corpus"])
    text = body + ',\n "corpus": [\n' + cases + "\n ]\n}\n"
    atomic_write(path, text)


class _Case(msgspec.Struct):
    text: str
    ids: list[int]


class _Fingerprint(msgspec.Struct, frozen=True):
    chkhsh: str | None = None
    family: str | None = None


class _GoldenShape(msgspec.Struct):
    """What diff_golden reads (the document stays a dict: it is compared key by key with the current run)."""

    format: int
    corpus: list[_Case]
    revision: str | None = None
    libraries: dict[str, str | None] = {}
    fingerprint: _Fingerprint = _Fingerprint()
    stop_ids: list[int] = []
    renders: dict[str, dict[str, Any]] = {}


def read_golden(path: Path) -> dict[str, Any]:
    """The golden as a dict, its shape checked by msgspec: errors name the file and the field."""
    redo = "re-record it with --record"
    doc = read_json(path, dict[str, Any], redo)
    if doc.get("format") != FORMAT:
        raise InputError(f"{path}: not a format-{FORMAT} tokenizer golden", redo)
    serde.convert(doc, _GoldenShape, f"{path}: malformed golden file", redo)
    return doc


def diff_golden(golden: dict[str, Any], current: dict[str, Any], file: str) -> list[Finding]:
    """Findings for every kind of drift, each naming the first difference with both sides."""
    out: list[Finding] = []
    then, now = golden.get("libraries", {}), current["libraries"]
    changed = {k: (then.get(k), v) for k, v in now.items() if then.get(k) != v and k != "onboard"}
    if changed or golden.get("revision") != current["revision"]:
        what = ", ".join(f"{k} {a} -> {b}" for k, (a, b) in changed.items())
        out.append(
            info(
                "golden-context",
                f"golden recorded at revision {golden.get('revision')} "
                f"(now {current['revision']}){'; ' + what if what else ''}",
                file=file,
            )
        )
    old_fp, new_fp = golden.get("fingerprint", {}), current["fingerprint"]
    if old_fp.get("chkhsh") != new_fp["chkhsh"]:
        out.append(
            error(
                "golden-drift-fingerprint",
                f"pre-tokenizer fingerprint changed: {old_fp.get('family') or old_fp.get('chkhsh')} "
                f"-> {new_fp['family'] or new_fp['chkhsh']}",
                "the tokenizer changed; review, then --record",
                file=file,
            )
        )
    if sorted(golden.get("stop_ids", [])) != sorted(current["stop_ids"]):
        out.append(
            error(
                "golden-drift-stop-set",
                f"stop ids changed: {golden.get('stop_ids')} -> {current['stop_ids']}",
                "check generation_config.json / the tokenizer's EOS; then --record",
                file=file,
            )
        )
    recorded = {c["text"]: c["ids"] for c in golden["corpus"]}
    drift = [
        (c["text"], recorded[c["text"]], c["ids"])
        for c in current["corpus"]
        if c["text"] in recorded and recorded[c["text"]] != c["ids"]
    ]
    if drift:
        text, old, new = drift[0]
        at = first_difference(old, new) or 0
        out.append(
            error(
                "golden-drift-ids",
                f"{len(drift)} corpus strings tokenize differently than the golden; "
                f"first: {text[:80]!r} at token {at}: golden {old[max(0, at - 2) : at + 6]} now {new[max(0, at - 2) : at + 6]}",
                "a tokenizer or library change: review, then --record",
                file=file,
            )
        )
    for name, old_render in golden.get("renders", {}).items():
        new_render = current["renders"].get(name)
        if new_render is not None and new_render != old_render:
            out.append(
                error(
                    "golden-drift-render",
                    f"render {name!r} changed: {_render_diff(old_render, new_render)}",
                    "the chat template changed: review, then --record",
                    file=file,
                )
            )
    return out


def _render_diff(old: dict[str, Any], new: dict[str, Any]) -> str:
    a, b = old.get("text"), new.get("text")
    if a is None or b is None:
        return f"{old.get('error') or 'ok'} -> {new.get('error') or 'ok'}"
    at = first_difference(a, b) or 0
    return (
        f"first difference at char {at}: golden {a[max(0, at - 20) : at + 20]!r} now {b[max(0, at - 20) : at + 20]!r}"
    )
