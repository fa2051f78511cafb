"""Mutation score of the core checks (issue 16): mutmut, one core module at a time, with its own test selection.

    .venv/bin/python scripts/mutation.py                      # every module in scripts/mutation.toml
    .venv/bin/python scripts/mutation.py webhook inspect_params --jobs 1
    .venv/bin/python scripts/mutation.py --report-only        # the table from the results already on disk

Each module runs in its own work folder (.mutation/<module>/: links to the checkout and a pyproject.toml whose
[tool.mutmut] is the checkout's plus the module's files and tests), so its stats run and its results stay apart and
a rerun only tests the mutants whose code changed. Prints a score per module and every surviving mutant with its
diff. Score = detected / (mutants - listed equivalents), detected = killed, timeout or crashed. Equivalent mutants are
listed in scripts/mutation_equivalent/<module>.toml with a reason and the changed line; an entry whose line no longer matches
the mutant is stale and excludes nothing. Exit 1 when a module scores under --min-score (default 85).
Not part of `make test`: mutants cost minutes per module on 2 cores (figures: docs/mutation.md).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import tomllib

REPO = Path(__file__).resolve().parent.parent
MODULES_FILE = REPO / "scripts" / "mutation.toml"
EQUIVALENTS = REPO / "scripts" / "mutation_equivalent"  # <module>.toml: one list per module
WORK = REPO / ".mutation"
MUTMUT = Path(sys.executable).parent / "mutmut"
# What the mutated copy needs beside the package: onboard.resources finds these next to the package folder.
LINKED = ("onboard", "tests", "templates", "checklists", "adapters", "kernels", "scripts", "examples")
DETECTED = {"killed", "timeout", "segfault", "caught by type check"}
NOT_RUN = {"not checked", "skipped", "check was interrupted by user"}


@dataclass
class ModuleResult:
    name: str
    statuses: dict[str, str] = field(default_factory=dict)
    equivalent: dict[str, str] = field(default_factory=dict)  # mutant -> reason
    stale: list[str] = field(default_factory=list)
    seconds: float = 0.0
    timed_out: bool = False

    def count(self, kinds: set[str]) -> int:
        return sum(1 for m, s in self.statuses.items() if s in kinds and m not in self.equivalent)

    @property
    def judged(self) -> int:
        return sum(1 for m, s in self.statuses.items() if s not in NOT_RUN and m not in self.equivalent)

    @property
    def score(self) -> float | None:
        return 100.0 * self.count(DETECTED) / self.judged if self.judged else None

    @property
    def survivors(self) -> list[str]:
        return sorted(m for m, s in self.statuses.items() if s not in DETECTED | NOT_RUN and m not in self.equivalent)


def _toml_list(values: list[str]) -> str:
    return "[" + ", ".join(f'"{v}"' for v in values) + "]"


def prepare(name: str, spec: dict) -> Path:
    """The module's work folder: links to the checkout, and the merged [tool.mutmut] config."""
    work = WORK / name
    work.mkdir(parents=True, exist_ok=True)
    (WORK / ".gitignore").write_text("*\n")  # work folders and mutants are never committed
    for entry in LINKED:
        link = work / entry
        if not link.is_symlink():
            link.symlink_to(os.path.relpath(REPO / entry, work))
    base = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["mutmut"]
    lines = ["[tool.mutmut]"]
    for key, value in base.items():
        lines.append(
            f"{key} = {_toml_list(value) if isinstance(value, list) else repr(value).lower() if isinstance(value, bool) else repr(value)}"
        )
    lines.append(f"only_mutate = {_toml_list(spec['files'])}")
    # `deselect`: tests of a selected file that run `onboard` in a subprocess (they import the unmutated package, so
    # they kill nothing, yet a fixture's in-process call maps them to a function and every mutant there runs them).
    deselected = [arg for node in spec.get("deselect", []) for arg in ("--deselect", node)]
    lines.append(f"pytest_add_cli_args_test_selection = {_toml_list([*spec['tests'], *deselected])}")
    config = "\n".join(lines).replace("'", '"') + "\n"
    target = work / "pyproject.toml"
    if not target.exists() or target.read_text() != config:
        target.write_text(config)
        shutil.rmtree(work / "mutants", ignore_errors=True)  # another selection: the cached stats are void
    # mutmut copies the package's files but not its symlinked folders (onboard/kernels -> ../kernels): link them.
    for link in (REPO / "onboard").rglob("*"):
        copy = work / "mutants" / link.relative_to(REPO)
        if link.is_symlink() and not copy.is_symlink():
            copy.parent.mkdir(parents=True, exist_ok=True)
            copy.symlink_to(os.readlink(link))
    return work


def run_module(work: Path, jobs: int, limit_s: float) -> tuple[float, bool]:
    # One thread: 2 cores are shared, and mutmut forks workers from a process that has imported torch.
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", TOKENIZERS_PARALLELISM="false")
    # Tests copied into mutants/ would look for shared data beside that copy: point them at the checkout's.
    env.setdefault("ONBOARD_SHARED_DATA", str(REPO.parent / "shared" / "data"))
    start = time.monotonic()
    log = (work / "mutmut.log").open("w")
    proc = subprocess.Popen(["nice", "-n", "10", str(MUTMUT), "run", "--max-children", str(jobs)], cwd=work, env=env,
                            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)  # fmt: skip
    try:
        proc.wait(timeout=limit_s)
        timed_out = False
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, 15)
        proc.wait()
        timed_out = True
    return time.monotonic() - start, timed_out


def statuses(work: Path) -> dict[str, str]:
    if not (work / "mutants").is_dir():
        return {}
    out = subprocess.run([str(MUTMUT), "results", "--all", "true"], cwd=work, capture_output=True, text=True).stdout
    found = {}
    for line in out.splitlines():
        m = re.match(r"\s+(\S+): (.+)$", line)
        if m:
            found[m.group(1)] = m.group(2).strip()
    return found


_DIFFS = """
import json, sys
from mutmut.mutation.diff_apply import get_diff_for_mutant
out = {}
for name in json.load(sys.stdin):
    out[name] = [l for l in get_diff_for_mutant(name).splitlines() if l[:1] in "+-" and l[:3] not in ("---", "+++")]
print(json.dumps(out))
"""


def diffs_of(work: Path, mutants: list[str]) -> dict[str, str]:
    """The changed lines of each mutant (mutmut's own diff), in one process: `mutmut show` per mutant costs ~1 s."""
    names = [m for m in mutants if ".py:" not in m]  # constant mutants carry their change in their name
    if not names:
        return {}
    out = subprocess.run([sys.executable, "-c", _DIFFS], cwd=work, input=json.dumps(names), capture_output=True,
                         text=True, check=True).stdout  # fmt: skip
    return {name: "\n".join(lines) for name, lines in json.loads(out).items()}


def equivalents_of(module: str) -> list[dict]:
    """The module's listed equivalent mutants (scripts/mutation_equivalent/<module>.toml; none when absent)."""
    path = EQUIVALENTS / f"{module}.toml"
    return tomllib.loads(path.read_text()).get("equivalent", []) if path.exists() else []


def apply_equivalents(result: ModuleResult, work: Path, listed: list[dict]) -> None:
    present = [entry for entry in listed if entry["mutant"] in result.statuses]
    diffs = diffs_of(work, [entry["mutant"] for entry in present])
    for entry in present:
        mutant = entry["mutant"]
        if entry["change"].strip() not in diffs.get(mutant, ""):
            result.stale.append(mutant)
            continue
        result.equivalent[mutant] = entry["reason"]


def constant_mutants(work: Path, spec: dict) -> dict[str, str]:
    """Module-level constants mutmut never mutates (it mutates function bodies only): each match of a module's
    `constants` patterns, its number x`scale`, tested with the module's tests on the mutants/ copy (no mutmut
    mutant active there, so the trampolines call the original functions)."""
    found: dict[str, str] = {}
    base = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["mutmut"]
    env = dict(os.environ, MUTANT_UNDER_TEST="", OMP_NUM_THREADS="1", TOKENIZERS_PARALLELISM="false",
               PYTHONPATH=str(work / "mutants"))  # fmt: skip
    env.setdefault("ONBOARD_SHARED_DATA", str(REPO.parent / "shared" / "data"))
    for rule in spec.get("constants", []):
        for rel in spec["files"]:
            target = work / "mutants" / rel
            original = target.read_text()
            for match in re.finditer(rule["pattern"], original):
                value = float(match.group(1)) * float(rule["scale"])
                line = original.count("\n", 0, match.start()) + 1
                name = f"{rel}:{line} {match.group(0)} -> x{rule['scale']}"
                start, end = match.span(1)
                target.write_text(original[:start] + repr(value) + original[end:])
                try:
                    rc = subprocess.run(["nice", "-n", "10", sys.executable, "-m", "pytest", "-x", "-q", "--rootdir=.",
                                         *base.get("pytest_add_cli_args", []), *spec["tests"]], cwd=work / "mutants",
                                        env=env, capture_output=True).returncode  # fmt: skip
                finally:
                    target.write_text(original)
                found[name] = {0: "survived", 1: "killed"}.get(rc, f"suspicious (pytest exit {rc})")
    return found


def report(results: list[ModuleResult], work_root: Path, min_score: float) -> int:
    print("\n| module | mutants | equivalent | detected | survived | not run | score |")
    print("|---|---|---|---|---|---|---|")
    failed = False
    for r in results:
        score = r.score
        not_run = r.count(NOT_RUN)
        note = " (partial: stopped at the time limit)" if r.timed_out or not_run else ""
        print(f"| {r.name} | {len(r.statuses)} | {len(r.equivalent)} | {r.count(DETECTED)} | {len(r.survivors)} "
              f"| {not_run} | {'-' if score is None else f'{score:.1f}%'}{note} |")  # fmt: skip
        failed |= score is None or score < min_score or bool(not_run)
    for r in results:
        diffs = diffs_of(work_root / r.name, r.survivors)
        if r.survivors or r.stale:
            print(f"\n## {r.name}: {len(r.survivors)} surviving")
        for mutant in r.stale:
            print(f"  STALE equivalent entry (its line no longer matches; not excluded): {mutant}")
        for mutant in r.survivors:
            print(f"\n  {mutant} [{r.statuses[mutant]}]")
            for line in diffs.get(mutant, "").splitlines():
                print(f"    {line}")
    return 1 if failed else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("modules", nargs="*", help="default: every module of the modules file")
    parser.add_argument("--modules-file", type=Path, default=MODULES_FILE, help="default: scripts/mutation.toml")
    parser.add_argument("--jobs", type=int, default=2, help="mutants tested at once (default 2)")
    parser.add_argument("--budget-minutes", type=float, default=55.0,
                        help="all modules together (default 55, for the 60-minute bound); each module gets an equal "
                        "share of what is left and is reported partial when stopped")  # fmt: skip
    parser.add_argument("--min-score", type=float, default=85.0)
    parser.add_argument("--report-only", action="store_true", help="run nothing; report the results on disk")
    parser.add_argument("--fresh", action="store_true", help="forget earlier results")
    args = parser.parse_args()
    modules: dict[str, dict] = tomllib.loads(args.modules_file.read_text())["modules"]
    # Another modules file (e.g. an older test selection, to measure a score before) keeps its results apart.
    suffix = "" if args.modules_file.resolve() == MODULES_FILE else f"@{args.modules_file.stem}"
    unknown = set(args.modules) - set(modules)
    if unknown:
        parser.error(f"unknown module(s) {sorted(unknown)}; known: {', '.join(modules)}")
    results = []
    chosen = args.modules or list(modules)
    deadline = time.monotonic() + args.budget_minutes * 60
    for position, name in enumerate(chosen):
        if args.fresh:
            shutil.rmtree(WORK / (name + suffix), ignore_errors=True)
        work = prepare(name + suffix, modules[name])
        listed = equivalents_of(name)
        result = ModuleResult(name + suffix)
        if not args.report_only:
            print(f"== {name}: mutating {', '.join(modules[name]['files'])}", flush=True)
            share = (deadline - time.monotonic()) / (len(chosen) - position)
            result.seconds, result.timed_out = run_module(work, args.jobs, max(60.0, share))
            print(f"   {result.seconds:.0f} s{' (time limit reached)' if result.timed_out else ''}", flush=True)
        result.statuses = statuses(work)
        saved = work / "constants.json"
        if not args.report_only and (work / "mutants").is_dir():
            saved.write_text(json.dumps(constant_mutants(work, modules[name]), indent=1))
        if saved.exists():
            result.statuses.update(json.loads(saved.read_text()))
        apply_equivalents(result, work, listed)
        results.append(result)
    return report(results, WORK, args.min_score)


if __name__ == "__main__":
    sys.exit(main())
