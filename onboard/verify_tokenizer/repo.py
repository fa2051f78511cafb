"""The tokenizer side of a SOURCE: its tokenizer files in a local folder (a hub source downloads only those, never
weights; a local folder is used in place)."""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from onboard.checkpoint_id import golden_key
from onboard.errors import InputError
from onboard.fsutil import json_object
from onboard.lfs import LfsPointer, LfsPointerError, find_pointers, pointer_findings, repo_id_for

# Files the tokenizer checks read. Globs; matched against repo-relative paths. *.py: a tokenizer that is repository
# code (auto_map) runs from them, only ever in the sandbox worker (--trust-remote-code).
TOKENIZER_FILES = (
    "config.json", "generation_config.json", "tokenizer_config.json", "special_tokens_map.json", "added_tokens.json",
    "tokenizer.json", "*.model", "original/tokenizer.model", "*.tiktoken", "vocab.json", "merges.txt", "vocab.txt",
    "tekken.json", "tokenizer.model.v*", "chat_template.jinja", "chat_template.json", "*.gguf", "*.py",
)  # fmt: skip
# A vocabulary-only GGUF is a few MB; anything larger is a weights file and is not downloaded for a tokenizer check.
MAX_GGUF_BYTES = 64 * 2**20


@dataclass(frozen=True)
class TokenizerRepo:
    display: str
    golden_name: str
    """The golden_outputs/ subfolder (onboard/checkpoint_id.py golden_key)."""
    revision: str | None
    root: Path
    """A local folder holding the tokenizer files with the repo's layout."""
    files: tuple[str, ...]
    pointers: tuple[LfsPointer, ...] = ()
    """Tokenizer files of a local folder that are Git LFS pointers (never parsed)."""
    repo_id: str | None = None

    def json(self, name: str) -> dict[str, Any] | None:
        text = self.text(name)
        if text is None:
            return None
        return json_object(text, name, InputError, f"fix or re-download {name} (a JSON validator shows the spot)")

    def text(self, name: str) -> str | None:
        path = self.root / name
        if not path.is_file():
            return None
        pointer = next((p for p in self.pointers if p.file == name), None)
        if pointer is not None:  # before any parse: a pointer read as JSON would only be "malformed JSON"
            raise LfsPointerError([pointer], self.root, self.repo_id)
        try:
            return path.read_text(encoding="utf-8")
        except UnicodeDecodeError as exc:
            raise InputError(f"{name}: not UTF-8 text", f"re-save {name} as UTF-8") from exc


def open_tokenizer_repo(source: str, revision: str | None = None) -> TokenizerRepo:
    from onboard.inspect_checkpoint.source import open_source

    # Only the tokenizer files: no index, no safetensors headers, no speculative GET beside the listing.
    src = open_source(source, revision, prefetch=False, speculate=False)
    wanted = [
        f.path
        for f in src.files
        if any(fnmatch.fnmatch(f.path, pattern) for pattern in TOKENIZER_FILES)
        and not (f.path.endswith(".gguf") and (f.size or 0) > MAX_GGUF_BYTES)
    ]
    if src.local_dir is not None:
        root = src.local_dir
    else:
        root = None
        src.fetch(wanted)  # in parallel; each path_of below waits for its own
        for name in wanted:
            path = src.path_of(name)
            if path is not None and root is None:
                # The snapshot folder: strip the file's relative path from its local path.
                root = Path(str(path)[: -len(name)]) if str(path).endswith(name) else path.parent
        if root is None:
            raise InputError(f"{src.display}: no tokenizer files found", "is this a model repo with a tokenizer?")
    golden = golden_key(src.repo_id or str(src.local_dir or root))  # the repo id when known, else the folder name
    # Hub downloads are real files; a local folder may be a clone without git-lfs.
    pointers = find_pointers(Path(root), wanted) if src.local_dir is not None else []
    repo_id = src.repo_id or repo_id_for(Path(root))
    return TokenizerRepo(src.display, golden, src.revision, Path(root), tuple(wanted), tuple(pointers), repo_id)


def pointer_notes(repo: TokenizerRepo) -> list[str]:
    """stderr lines naming the repo's tokenizer files that are Git LFS pointers, for a command that ran without them
    (`onboard tokenize`, `onboard render-template`)."""
    findings = pointer_findings(repo.pointers, repo.root, repo.repo_id, severity="warning")
    return [f"warning: [{f.code}] {f.message}; fix: {f.hint}" for f in findings]
