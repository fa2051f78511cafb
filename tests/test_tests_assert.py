"""Every test asserts a value: a test that only runs code passes whatever that code returns.

An ast scan of tests/: each `test_*` function must contain an `assert`, a `pytest.raises` / `pytest.warns` /
`pytest.fail`, a call to an `assert*` function (torch.testing.assert_close, np.testing.assert_array_equal, ...),
or a call to a helper (in the same module, or imported from tests.*) that does one of these itself.
"""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
PYTEST_CHECKS = {"raises", "warns", "fail", "deprecated_call"}


def _called_name(call: ast.Call) -> str | None:
    func = call.func
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return None


class Module:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.tree = ast.parse(path.read_text(), filename=str(path))
        self.functions: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = {}
        self.imported: dict[str, tuple[str, str]] = {}  # local name -> (tests module, name there)
        for node in ast.walk(self.tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self.functions.setdefault(node.name, node)
            elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("tests"):
                for alias in node.names:
                    self.imported[alias.asname or alias.name] = (node.module, alias.name)

    def checks(self, function: ast.AST, seen: frozenset[str] = frozenset()) -> bool:
        for node in ast.walk(function):
            if isinstance(node, ast.Assert):
                return True
            if not isinstance(node, ast.Call):
                continue
            name = _called_name(node)
            if name is None:
                continue
            func = node.func
            owner = func.value.id if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) else None
            if name.startswith("assert") or (owner == "pytest" and name in PYTEST_CHECKS):
                return True
            if owner is None and name not in seen and self.helper_checks(name, seen | {name}):
                return True
        return False

    def helper_checks(self, name: str, seen: frozenset[str]) -> bool:
        if name in self.functions:
            return self.checks(self.functions[name], seen)
        if name in self.imported:
            module_name, original = self.imported[name]
            other = _module(module_name)
            return other is not None and other.helper_checks(original, seen)
        return False


@cache
def _module(dotted: str) -> Module | None:
    base = ROOT / dotted.replace(".", "/")
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return Module(path)
    return None


def unchecked_tests(files: list[Path]) -> list[str]:
    missing = []
    for path in files:
        module = Module(path)
        for node in ast.walk(module.tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test"):
                if not module.checks(node):
                    where = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
                    missing.append(f"{where}:{node.lineno} {node.name}")
    return missing


def test_every_test_asserts_a_value() -> None:
    missing = unchecked_tests(sorted(TESTS.rglob("test_*.py")))
    assert not missing, "tests that check nothing (add an assert on a value they produce):\n" + "\n".join(missing)


def test_the_scan_catches_a_test_that_only_runs_code(tmp_path: Path) -> None:
    probe = tmp_path / "test_probe.py"
    probe.write_text(
        "import pytest\n"
        "def helper(x):\n    assert x\n"
        "def runs(x):\n    return x\n"
        "def test_runs_only():\n    runs(1)\n"
        "def test_via_helper():\n    helper(1)\n"
        "def test_raises():\n    with pytest.raises(ValueError):\n        int('x')\n"
        "def test_assert_call():\n    import numpy as np\n    np.testing.assert_array_equal([1], [1])\n"
    )
    assert [line.rsplit(" ", 1)[1] for line in unchecked_tests([probe])] == ["test_runs_only"]
