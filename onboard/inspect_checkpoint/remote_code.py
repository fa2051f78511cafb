"""Remote code (`auto_map`): report the repo's own Python files and the classes they define (`ast.parse` only:
nothing is imported or executed), so people see what `trust_remote_code=True` would run.
"""

from __future__ import annotations

import ast
from typing import Any

from onboard.findings import Finding, info, warning
from onboard.inspect_checkpoint.source import Source
from onboard.profile import RemoteCode

MAX_PY_BYTES = 2 * 2**20  # a modeling file is ~100 KB; bigger ones are not parsed (and are suspicious)


def find_remote_code(source: Source, config: dict[str, Any]) -> RemoteCode | None:
    """auto_map entries (config.json and tokenizer_config.json), the repo's .py files and their classes; None when
    the repo has neither."""
    auto_map = _flatten(config.get("auto_map"))
    if source.has_file("tokenizer_config.json"):
        tok = source.read_json("tokenizer_config.json") or {}
        for key, value in _flatten(tok.get("auto_map")).items():
            auto_map.setdefault(key, value)
    py_files = sorted(f.path for f in source.files if f.path.endswith(".py"))
    if not auto_map and not py_files:
        return None
    small = [p for p in py_files if (source.file_size(p) or 0) <= MAX_PY_BYTES]
    # Hub sources download each file: concurrently. Imported here: most checkpoints have no .py file.
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=min(16, max(1, len(small)))) as pool:
        texts = dict(zip(small, pool.map(_read_quietly, [source] * len(small), small)))
    classes: list[str] = []
    for path in small:
        text = texts.get(path)
        if text is not None:
            classes += classes_in(text, _module_name(path))
    return RemoteCode(auto_map=auto_map, files=tuple(py_files), classes=tuple(classes))


def classes_in(text: str, module: str) -> list[str]:
    """`module.Class` for every top-level class of a Python source text (parsed, never executed)."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):  # ValueError: null bytes
        return []
    return [f"{module}.{node.name}" for node in tree.body if isinstance(node, ast.ClassDef)]


def remote_code_findings(rc: RemoteCode | None, natively_supported: bool) -> list[Finding]:
    """`natively_supported`: the installed transformers implements the model_type, so the repo's code is not needed;
    otherwise it is the only reference (a warning: the reference stages then need --trust-remote-code)."""
    if rc is None:
        return []
    files = ", ".join(rc.files) or "none"
    where = f"auto_map: {', '.join(f'{k} -> {v}' for k, v in rc.auto_map.items())}; files: {files}"
    findings: list[Finding] = []
    if rc.auto_map and not natively_supported:
        findings.append(
            warning(
                "remote-code-required",
                f"the architecture exists only as repository code ({where}): profiled from "
                "config.json and the safetensors headers; the reference (parity, goldens, validate) is that code",
                "review the repo's .py files; onboard runs them only with --trust-remote-code, in a sandboxed worker "
                "(e.g. onboard new-model SOURCE --trust-remote-code)",
            )
        )
    elif rc.auto_map:
        findings.append(
            info(
                "remote-code",
                f"repository ships its own code, not needed here ({where})",
                "loaders should use the built-in implementation: do not pass trust_remote_code=True",
            )
        )
    defined = {c.rsplit(".", 1)[-1] for c in rc.classes}
    named = {ref.rsplit(".", 1)[-1] for v in rc.auto_map.values() for ref in v.split(", ") if "--" not in ref}
    missing = sorted(named - defined - {""})
    if missing and rc.files:
        findings.append(
            warning(
                "remote-code-missing-class",
                f"auto_map names classes no repo file defines: {', '.join(missing)}",
                "the repo is incomplete or the auto_map is stale",
            )
        )
    return findings


def _flatten(auto_map: object) -> dict[str, str]:
    """auto_map values are 'module.Class', 'other/repo--module.Class', or [slow, fast] lists for tokenizers."""
    if not isinstance(auto_map, dict):
        return {}
    out: dict[str, str] = {}
    for key, value in auto_map.items():
        if isinstance(value, str):
            out[str(key)] = value
        elif isinstance(value, (list, tuple)):
            parts = [v for v in value if isinstance(v, str)]
            if parts:
                out[str(key)] = ", ".join(parts)
    return out


def _module_name(path: str) -> str:
    return path[: -len(".py")].replace("/", ".")


def _read_quietly(source: Source, path: str) -> str | None:
    try:
        return source.read_text(path)
    except Exception:  # noqa: BLE001 - an unreadable .py file only loses its class names in the report
        return None
