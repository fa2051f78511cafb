"""`python -m onboard` and the `onboard` command (pyproject's entry point)."""

from onboard.collector import paused


def main() -> None:
    # click and the command's modules import with the collector paused (onboard/collector.py; cli.LazyGroup pauses
    # it for the command's modules); onboard.cli.main freezes what is still alive when the command ends.
    with paused():
        from onboard import cli
    cli.main()


if __name__ == "__main__":
    main()
