"""Small output helpers shared by the command modules: JSON to stdout, messages to stderr."""

from __future__ import annotations

import json
from typing import Any

import click

from onboard import serde


def emit_json(obj: Any) -> None:
    click.echo(json.dumps(serde.to_dict(obj), indent=2, ensure_ascii=False))


def say(message: str = "") -> None:
    click.echo(message, err=True)
