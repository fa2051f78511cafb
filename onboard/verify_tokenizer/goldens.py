"""Goldens: `golden_outputs/<org>__<name>/tokenizer.json` records ids, renders, fingerprint and stop set; a later run
(new revision, new tokenizers/transformers release) diffs against it and names the first drift precisely."""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from onboard.errors import InputError
from onboard.findings import Finding, error, info

GOLDEN_FILE = "tokenizer.json"
FORMAT = 1


@dataclass(frozen=True)
class GoldenStatus:
    path: str
    action: str
    """recorded | compared | missing"""
    drift: int = 0


def library_versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for name in (
        "onboard",
        "tokenizers",
        "transformers",
        "jinja2",
        "sentencepiece",
        "tiktoken",
        "mistral-common",
        "gguf",
    ):
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            continue
    return out


def golden_document(
    display: str, revision: str | None, texts: list[str], ids: list[list[int]], renders: dict[str, Any],
    fingerprint: str, family: str | None, stop_ids: list[int],
) -> dict[str, Any]:  # fmt: skip
    return {
        "format": FORMAT,
        "source": display,
        "revision": revision,
        "libraries": library_versions(),
        "fingerprint": {"chkhsh": fingerprint, "family": family},
        "stop_ids": stop_ids,
        "renders": renders,
        "corpus": [{"text": t, "ids": i} for t, i in zip(texts, ids)],
    }


def write_golden(path: Path, doc: dict[str, Any]) -> None:
    """Atomic write; one corpus case per line so a drift shows up as a one-line git diff."""
    path.parent.mkdir(parents=True, exist_ok=True)
    head = {k: v for k, v in doc.items() if k != "corpus"}
    body = json.dumps(head, ensure_ascii=False, indent=1)[:-2]
    cases = ",\n".join("  " + json.dumps(c, ensure_ascii=False) for c in doc["corpus"])
    text = body + ',\n "corpus": [\n' + cases + "\n ]\n}\n"
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tokenizer-", suffix=".json")
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(text)
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o666 & ~umask)  # mkstemp creates 0600; goldens are shared files
    os.replace(tmp, path)


def read_golden(path: Path) -> dict[str, Any]:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(f"{path}: malformed golden file ({exc})", "re-record it with --record") from exc
    if not isinstance(doc, dict) or doc.get("format") != FORMAT or not isinstance(doc.get("corpus"), list):
        raise InputError(f"{path}: not a format-{FORMAT} tokenizer golden", "re-record it with --record")
    return doc


def diff_golden(golden: dict[str, Any], current: dict[str, Any], file: str) -> list[Finding]:
    """Findings for every kind of drift, each naming the first difference with both sides."""
    out: list[Finding] = []
    then, now = golden.get("libraries", {}), current["libraries"]
    changed = {k: (then.get(k), v) for k, v in now.items() if then.get(k) != v and k != "onboard"}
    if changed or golden.get("revision") != current["revision"]:
        what = ", ".join(f"{k} {a} -> {b}" for k, (a, b) in changed.items())
        out.append(info("golden-context", f"golden recorded at revision {golden.get('revision')} "
                        f"(now {current['revision']}){'; ' + what if what else ''}", file=file))  # fmt: skip
    old_fp, new_fp = golden.get("fingerprint", {}), current["fingerprint"]
    if old_fp.get("chkhsh") != new_fp["chkhsh"]:
        out.append(error("golden-drift-fingerprint", f"pre-tokenizer fingerprint changed: {old_fp.get('family') or old_fp.get('chkhsh')} "
                         f"-> {new_fp['family'] or new_fp['chkhsh']}", "the tokenizer changed; review, then --record", file=file))  # fmt: skip
    if sorted(golden.get("stop_ids", [])) != sorted(current["stop_ids"]):
        out.append(error("golden-drift-stop-set", f"stop ids changed: {golden.get('stop_ids')} -> {current['stop_ids']}",
                         "check generation_config.json / the tokenizer's EOS; then --record", file=file))  # fmt: skip
    recorded = {c["text"]: c["ids"] for c in golden["corpus"] if isinstance(c, dict) and "text" in c}
    drift = [(c["text"], recorded[c["text"]], c["ids"]) for c in current["corpus"]
             if c["text"] in recorded and recorded[c["text"]] != c["ids"]]  # fmt: skip
    if drift:
        text, old, new = drift[0]
        at = next((i for i, (a, b) in enumerate(zip(old, new)) if a != b), min(len(old), len(new)))
        out.append(error("golden-drift-ids", f"{len(drift)} corpus strings tokenize differently than the golden; "
                         f"first: {text[:80]!r} at token {at}: golden {old[max(0, at - 2):at + 6]} now {new[max(0, at - 2):at + 6]}",
                         "a tokenizer or library change: review, then --record", file=file))  # fmt: skip
    for name, old_render in golden.get("renders", {}).items():
        new_render = current["renders"].get(name)
        if new_render is not None and new_render != old_render:
            out.append(error("golden-drift-render", f"render {name!r} changed: {_render_diff(old_render, new_render)}",
                             "the chat template changed: review, then --record", file=file))  # fmt: skip
    return out


def _render_diff(old: dict[str, Any], new: dict[str, Any]) -> str:
    a, b = old.get("text"), new.get("text")
    if a is None or b is None:
        return f"{old.get('error') or 'ok'} -> {new.get('error') or 'ok'}"
    at = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    return (
        f"first difference at char {at}: golden {a[max(0, at - 20) : at + 20]!r} now {b[max(0, at - 20) : at + 20]!r}"
    )
