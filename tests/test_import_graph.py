"""The `onboard/` import graph has no cycles (issue 12 §3).

The graph is built statically with ast from every import statement that can run: module level and inside functions
(a function-level import only hides a cycle until the function is called). Imports under `if TYPE_CHECKING:` are
left out: they never execute, and they are the way to name a type without a runtime dependency.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "onboard"


def _module_names(package: Path) -> dict[str, Path]:
    names = {}
    for file in package.rglob("*.py"):
        parts = list(file.relative_to(package.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        names[".".join(parts)] = file
    return names


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _runtime_imports(tree: ast.AST) -> list[ast.Import | ast.ImportFrom]:
    found: list[ast.Import | ast.ImportFrom] = []
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            stack.extend(node.orelse)
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            found.append(node)
        stack.extend(ast.iter_child_nodes(node))
    return found


def _targets(module: str, is_package: bool, node: ast.Import | ast.ImportFrom, known: dict[str, Path]) -> set[str]:
    """The package modules an import statement loads (the deepest known module of each imported name)."""
    if isinstance(node, ast.Import):
        names = [alias.name for alias in node.names]
    else:
        base = node.module or ""
        if node.level:
            parts = module.split(".") if is_package else module.split(".")[:-1]
            parts = parts[: len(parts) - (node.level - 1)]
            base = ".".join([*parts, *([node.module] if node.module else [])])
        names = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base for alias in node.names]
    out = set()
    for name in names:
        while name and name not in known:
            name = name.rpartition(".")[0]
        if name and name != module:
            out.add(name)
    return out


def import_graph(package: Path) -> dict[str, set[str]]:
    known = _module_names(package)
    graph = {}
    for module, file in known.items():
        tree = ast.parse(file.read_text(encoding="utf-8"), filename=str(file))
        graph[module] = set().union(
            *(_targets(module, file.name == "__init__.py", node, known) for node in _runtime_imports(tree))
        )
    return graph


def find_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One shortest cycle through each module that is on one, as the import path `a -> b -> a`."""
    cycles, seen = [], set()
    for start in sorted(graph):
        if start in seen:
            continue
        paths, visited = [[start]], {start}
        while paths:  # breadth-first: the first path back to `start` is a shortest cycle
            next_paths = []
            for path in paths:
                for nxt in sorted(graph[path[-1]]):
                    if nxt == start:
                        cycle = [*path, start]
                        seen.update(cycle)
                        cycles.append(cycle)
                        next_paths = []
                        break
                    if nxt not in visited:
                        visited.add(nxt)
                        next_paths.append([*path, nxt])
                else:
                    continue
                break
            paths = next_paths
    return cycles


def test_onboard_has_no_import_cycles():
    cycles = find_cycles(import_graph(PACKAGE))
    assert not cycles, "import cycles in onboard/ (function-level imports count):\n" + "\n".join(
        " -> ".join(c) for c in cycles
    )


def test_detector_sees_a_cycle_hidden_in_a_function(tmp_path):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from pkg.b import helper\n")
    (pkg / "b.py").write_text("def helper():\n    from . import a\n")
    (pkg / "c.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.a import x\n")
    graph = import_graph(pkg)
    assert graph["pkg.a"] == {"pkg.b"} and graph["pkg.b"] == {"pkg.a"} and graph["pkg.c"] == set()
    assert find_cycles(graph) == [["pkg.a", "pkg.b", "pkg.a"]]


LAYERS: tuple[tuple[str, ...], ...] = (
    ("core",),
    ("names",),
    ("inspect_checkpoint",),
    ("generate_adapter", "verify_tokenizer", "tool_calls"),
    ("adapters",),
    ("validate_serving",),
    ("quantize", "speculative"),
    ("engines",),
    ("promote",),
    ("pipeline",),
    ("watch",),
    ("cli",),
)
"""The layer order of onboard's sub-packages, lowest first. A module may import its own sub-package and those of
lower layers only; sub-packages sharing a layer do not import each other.

- core: the top-level modules (errors, serde, fsutil, findings, comparator, checks, environment, svg, ...), blocks,
  kernels and sandbox: what every stage may use, depending on no stage.
- names: the one table of config spellings, ignored keys and tensor-name roles that inspect and generate both read.
- inspect_checkpoint reads a checkpoint; generate_adapter and verify_tokenizer read its profile; tool_calls reads
  a model's tool-call text in its chat template's format.
- adapters are generate_adapter's output: they import its runtime and the blocks.
- validate_serving runs adapters and references (generate_adapter.runtime, divergence) against the goldens.
- quantize and speculative plan on top of validate's goldens and runtime.
- engines sit above quantize, not beside it as issue 44 sketched: llama.cpp's conversion and quantization take
  quantize's plan file and formats, while quantize needs nothing of an engine (it only reads where llama.cpp's venv
  lives, a core fact).
- promote reads every stage's results (its report draws quantize's and speculative's); pipeline runs the stages
  and then promote; watch queues pipeline runs and reads promote's registry; cli wraps them all.
"""
CORE_PACKAGES = ("blocks", "kernels", "sandbox")
ENTRY_POINTS = {"onboard.__main__": "cli"}
"""`python -m onboard` is the command line's entry point, not a core module."""


def unit_of(module: str, package: Path = PACKAGE) -> str:
    """The LAYERS unit of a module: its sub-package, or `core` for top-level modules and CORE_PACKAGES."""
    if module in ENTRY_POINTS:
        return ENTRY_POINTS[module]
    parts = module.split(".")
    if len(parts) == 1 or not (package / parts[1]).is_dir() or parts[1] in CORE_PACKAGES:
        return "core"
    return parts[1]


def layer_violations(graph: dict[str, set[str]], layers: tuple[tuple[str, ...], ...], package: Path) -> list[str]:
    level = {unit: i for i, names in enumerate(layers) for unit in names}
    problems = []
    for module in sorted(graph):
        here = unit_of(module, package)
        for target in sorted(graph[module]):
            there = unit_of(target, package)
            if here == there or level[there] < level[here]:
                continue
            lower = [u for names in layers[: level[here]] for u in names]
            problems.append(
                f"{module} imports {target}: {here} (layer {level[here]}) may import only its own package and the "
                f"layers below it ({', '.join(lower) or 'none'}); {there} is layer {level[there]}"
            )
    return problems


def test_every_sub_package_has_a_layer():
    units = {unit_of(m) for m in import_graph(PACKAGE)}
    placed = {u for names in LAYERS for u in names}
    assert units <= placed, f"sub-packages missing from LAYERS in {__file__}: {sorted(units - placed)}"


def test_sub_packages_import_only_lower_layers():
    problems = layer_violations(import_graph(PACKAGE), LAYERS, PACKAGE)
    assert not problems, "imports against the layer order (tests/test_import_graph.py LAYERS):\n" + "\n".join(problems)


def test_layer_rule_names_the_offending_import(tmp_path):
    pkg = tmp_path / "pkg"
    for sub in ("low", "high", "side"):
        (pkg / sub).mkdir(parents=True)
        (pkg / sub / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "low" / "a.py").write_text("from pkg.high import b\n")
    (pkg / "high" / "b.py").write_text("from pkg.low import a\n")
    (pkg / "side" / "c.py").write_text("def f():\n    from pkg.high import b\n")
    layers = (("core",), ("low",), ("high", "side"))
    problems = layer_violations(import_graph(pkg), layers, pkg)
    assert len(problems) == 2
    assert problems[0].startswith("pkg.low.a imports pkg.high.b: low (layer 1) may import only")
    assert problems[1].startswith("pkg.side.c imports pkg.high.b: side (layer 2)") and "high is layer 2" in problems[1]
