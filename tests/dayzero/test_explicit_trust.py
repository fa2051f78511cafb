"""Every transformers load in onboard/ passes trust_remote_code explicitly (issue 11): with the argument left out,
transformers asks "Do you wish to run the custom code? [y/N]" on a terminal and runs the repository's code on "y".
A static check, so a new call site cannot slip in without it."""

from __future__ import annotations

import ast
from pathlib import Path

ONBOARD = Path(__file__).resolve().parents[2] / "onboard"
LOADERS = ("from_pretrained", "from_config", "for_model")


def _transformers_loads(tree: ast.AST) -> list[tuple[ast.Call, ast.AST | None]]:
    """Calls `Auto*.<loader>(...)` and `pipeline(...)`, each with the innermost function it is in."""
    enclosing: dict[ast.AST, ast.AST | None] = {}
    for parent in ast.walk(tree):
        for child in ast.iter_child_nodes(parent):
            is_func = isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef))
            enclosing[child] = parent if is_func else enclosing.get(parent)
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        auto = isinstance(f, ast.Attribute) and f.attr in LOADERS and isinstance(f.value, ast.Name) and (
            f.value.id.startswith("Auto") or f.value.id == "auto")  # fmt: skip
        if auto or (isinstance(f, ast.Name) and f.id == "pipeline"):
            found.append((node, enclosing.get(node)))
    return found


def test_every_transformers_load_says_trust_remote_code() -> None:
    missing, seen = [], 0
    for path in sorted(ONBOARD.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        for call, func in _transformers_loads(ast.parse(text)):
            seen += 1
            named = any(k.arg == "trust_remote_code" for k in call.keywords)
            # `**kwargs` counts when the enclosing function puts trust_remote_code into them.
            spread = any(k.arg is None for k in call.keywords) and func is not None and (
                "trust_remote_code" in ast.get_source_segment(text, func))  # fmt: skip
            if not (named or spread):
                missing.append(f"{path.relative_to(ONBOARD.parent)}:{call.lineno}")
    # One loader each (issue 12): the reference model (reference.py), the tokenizer (verify_tokenizer/subject.py), the
    # meta-device estimate (inspect_checkpoint/weight_estimate.py), the sandbox probes' causal LM (sandbox/probes.py).
    assert seen >= 4, "the scan found too few transformers loads: it no longer recognises them"
    assert not missing, f"transformers loads without an explicit trust_remote_code: {missing}"


def test_the_scan_sees_a_load_without_it() -> None:
    text = "def f(p):\n    AutoTokenizer.from_pretrained(p)\n    AutoConfig.from_pretrained(p, trust_remote_code=False)\n"
    calls = _transformers_loads(ast.parse(text))
    assert [any(k.arg == "trust_remote_code" for k in c.keywords) for c, _ in calls] == [False, True]
