"""Regenerate (or check) the committed adapters from their reference profiles:
`python -m onboard.generate_adapter.regenerate [--check]`.
"""

from __future__ import annotations

import argparse
import sys

from onboard.fsutil import atomic_write
from onboard.generate_adapter.adapter_source import adapter_source
from onboard.generate_adapter.families import ADAPTERS_DIR, PROFILES_DIR, committed_families, family_profile
from onboard.generate_adapter.plan import plan


def expected_adapters() -> dict[str, str]:
    """{file name: text} of every committed adapter, as composition renders it now from its reference profile."""
    out = {}
    for model_type in committed_families():
        the_plan = plan(family_profile(model_type))  # type: ignore[arg-type]
        if the_plan.stubs:
            raise SystemExit(f"{PROFILES_DIR / model_type}.json: composition needs kernel stubs {the_plan.stubs}")
        out[f"{model_type}.py"] = adapter_source(the_plan)
    return out


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
            atomic_write(path, text)
    verb = "out of date" if args.check else "rewritten"
    print(f"{len(drift)} adapter(s) {verb}: {', '.join(drift) or '-'}", file=sys.stderr)
    return 1 if args.check and drift else 0


if __name__ == "__main__":
    sys.exit(main())
