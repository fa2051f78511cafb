"""Find a repo's chat template(s) where transformers looks: chat_template.jinja, chat_template.json, then
tokenizer_config.json's `chat_template` (a string, or a list of {name, template} for named templates)."""

from __future__ import annotations

import json
from pathlib import Path

from onboard.errors import InputError
from onboard.lfs import LfsPointerError, read_pointer
from onboard.verify_tokenizer.repo import TokenizerRepo, open_tokenizer_repo, pointer_notes


def templates_in(repo: TokenizerRepo) -> tuple[dict[str, str], str | None]:
    """name -> template text ("default" for the unnamed one), and the file it came from (None if there is none)."""
    text = repo.text("chat_template.jinja")
    if text is not None:
        return {"default": text}, "chat_template.jinja"
    for name in ("chat_template.json", "tokenizer_config.json"):
        doc = repo.json(name)
        if doc and doc.get("chat_template") is not None:
            return _parse(doc["chat_template"], name), name
    return {}, None


def default_template(repo: TokenizerRepo) -> tuple[str | None, str | None]:
    """The repo's unnamed chat template (else its first named one) and its file; None when there is none."""
    templates, file = templates_in(repo)
    return templates.get("default", next(iter(templates.values()), None)), file


def _parse(value: object, file: str) -> dict[str, str]:
    if isinstance(value, str):
        return {"default": value}
    if isinstance(value, list):
        out: dict[str, str] = {}
        for item in value:
            if not (
                isinstance(item, dict) and isinstance(item.get("name"), str) and isinstance(item.get("template"), str)
            ):
                raise InputError(f"{file}: chat_template list entries need string 'name' and 'template'", f"fix {file}")
            out[item["name"]] = item["template"]
        return out
    raise InputError(f"{file}: chat_template must be a string or a list, found {type(value).__name__}", f"fix {file}")


def load_template(
    template_or_source: str, name: str | None = None, revision: str | None = None
) -> tuple[str, list[str]]:
    """A template file (.jinja/.j2/.txt, or a JSON file with `chat_template`) or a SOURCE folder / hub id; and notes
    for stderr (tokenizer files of the folder that are Git LFS pointers, which rendering does not need)."""
    path = Path(template_or_source)
    if path.is_file():
        pointer = read_pointer(path)
        if pointer is not None:  # before any parse
            raise LfsPointerError([pointer], path.parent)
        try:
            raw = path.read_text(encoding="utf-8")
        except UnicodeDecodeError as exc:
            raise InputError(f"{path}: not UTF-8 text", "re-save the template as UTF-8") from exc
        if path.suffix != ".json":
            return raw, []
        try:
            doc = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise InputError(f"{path}: malformed JSON at line {exc.lineno}: {exc.msg}", f"fix {path}") from exc
        if not isinstance(doc, dict) or "chat_template" not in doc:
            raise InputError(f"{path}: no 'chat_template' key", "give a .jinja file or a tokenizer_config.json")
        return _pick(_parse(doc["chat_template"], path.name), name, str(path)), []
    repo = open_tokenizer_repo(template_or_source, revision)
    found, _ = templates_in(repo)  # a pointer holding the template: LfsPointerError
    if not found:
        raise InputError(
            f"{repo.display}: no chat template (looked in chat_template.jinja, chat_template.json, tokenizer_config.json)",
            "base models often ship none; pass a .jinja file instead",
        )
    return _pick(found, name, repo.display), pointer_notes(repo)


def _pick(found: dict[str, str], name: str | None, where: str) -> str:
    key = name or ("default" if "default" in found else next(iter(found)))
    if key not in found:
        raise InputError(f"{where}: no chat template named {key!r}", f"available: {', '.join(sorted(found))}")
    return found[key]
