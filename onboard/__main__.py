"""`python -m onboard` and the `onboard` command (pyproject's entry point)."""

import gc


def main() -> None:
    # Start-up imports (click, then the command's modules: onboard.cli.LazyGroup pauses the collector for those)
    # allocate thousands of objects and free almost none; the cyclic collector's passes over them cost an
    # `onboard inspect` process about 5 ms of its 0.2 s (benchmarks/bench_inspect_local.py). onboard.cli.main
    # freezes what is still alive when the command ends.
    gc.disable()
    from onboard import cli

    gc.enable()
    cli.main()


if __name__ == "__main__":
    main()
