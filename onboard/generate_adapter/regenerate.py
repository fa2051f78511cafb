"""Regenerate (or check) the committed adapters: `python -m onboard.generate_adapter.regenerate [--check]`.

adapters/<model_type>.py for every supported family is exactly what the generator renders for that family with
no kernel stubs; tests/generate/test_committed_adapters.py fails when they drift.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from onboard.generate_adapter.adapter_source import adapter_source
from onboard.generate_adapter.plan import plan_for_family, supported_model_types

ADAPTERS_DIR = Path(__file__).resolve().parents[2] / "adapters"


def expected_adapters() -> dict[str, str]:
    """{file name: text} of every committed adapter, as the generator renders it now."""
    return {f"{mt}.py": adapter_source(plan_for_family(mt)) for mt in supported_model_types()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="report drift, write nothing (exit 1 on drift)")
    args = parser.parse_args(argv)
    drift = []
    for name, text in expected_adapters().items():
        path = ADAPTERS_DIR / name
        if path.is_file() and path.read_text() == text:
            continue
        drift.append(name)
        if not args.check:
            tmp = path.with_suffix(".py.tmp")
            tmp.write_text(text)
            tmp.replace(path)
    verb = "out of date" if args.check else "rewritten"
    print(f"{len(drift)} adapter(s) {verb}: {', '.join(drift) or '-'}", file=sys.stderr)
    return 1 if args.check and drift else 0


if __name__ == "__main__":
    sys.exit(main())
