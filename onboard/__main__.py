"""`python -m onboard` and the `onboard` command (pyproject's entry point)."""

from onboard.collector import paused


def main() -> None:
    # imports with the collector paused (onboard/collector.py)
    with paused():
        from onboard import cli
    cli.main()


if __name__ == "__main__":
    main()
