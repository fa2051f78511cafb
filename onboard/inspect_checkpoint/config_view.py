"""A read-only view over config.json: the text section first (multimodal wrappers nest the language model), every
key read recorded so the config lint can tell used keys from unknown ones. Spellings: names.config.ALIASES.
"""

from __future__ import annotations

from typing import Any

from onboard.names.config import spellings
from onboard.names.config_keys import MODEL_SECTIONS, TEXT_SECTIONS, TOWER_SECTIONS

__all__ = ["MODEL_SECTIONS", "TEXT_SECTIONS", "TOWER_SECTIONS", "ConfigView"]


def text_section(raw: dict[str, Any]) -> str | None:
    """The nested section holding the language model's hyperparameters (None: config.json is the text model's)."""
    return next((section for section in TEXT_SECTIONS if isinstance(raw.get(section), dict)), None)


def tie_word_embeddings(raw: dict[str, Any]) -> bool | None:
    """Whether the LM head is the embedding, as transformers decides it; None when config.json does not say. A
    wrapper's own top-level flag or its text_config's (older saves; Llava and Qwen2.5-VL honour it) ties."""
    section = text_section(raw)
    flags = [
        v
        for v in (raw.get("tie_word_embeddings"), raw[section].get("tie_word_embeddings") if section else None)
        if isinstance(v, bool)
    ]
    return any(flags) if flags else None


def language_model_config(raw: dict[str, Any]) -> dict[str, Any]:
    """The language model's config as a text model's config.json would say it: config.json itself, or a wrapper's
    text section with the head tied as transformers ties the wrapper's."""
    section = text_section(raw)
    if section is None:
        return raw
    tied = tie_word_embeddings(raw)
    return {**raw[section], **({} if tied is None else {"tie_word_embeddings": tied})}


class ConfigView:
    """Lookups over the text config first, then the top level; remembers every key read."""

    def __init__(self, raw: dict[str, Any]) -> None:
        self.raw = raw
        self.text_section = text_section(raw)
        self.text: dict[str, Any] = raw[self.text_section] if self.text_section else {}
        self.used: set[str] = set()
        self.type_errors: dict[str, str] = {}  # field -> what was expected (reported as findings)
        # spelling -> the spelling read instead, where two spellings of one fact hold different values
        self.conflicts: dict[str, str] = {}

    def _lookup(self, name: str) -> tuple[bool, Any]:
        if name in self.text:
            return True, self.text[name]
        if name in self.raw:
            return True, self.raw[name]
        for section in MODEL_SECTIONS:  # DBRX's and MPT's attn_config / ffn_config: the model's own keys
            nested = self.raw.get(section)
            if isinstance(nested, dict) and name in nested:
                return True, nested[name]
        return False, None

    def where(self, name: str) -> str:
        """`name` as config.json nests it: `attn_config.rope_theta` for a model section's key."""
        if name in self.text or name in self.raw:
            return name
        section = next((s for s in MODEL_SECTIONS if isinstance(self.raw.get(s), dict) and name in self.raw[s]), None)
        return f"{section}.{name}" if section else name

    def value(self, section: str, key: str) -> Any:
        """The value of `key` as all_keys lists it (section "" for the top level)."""
        if not section:
            return self.raw.get(key)
        nested = self.text if section == self.text_section else self.raw.get(section)
        return nested.get(key) if isinstance(nested, dict) else None

    def get(self, *names: str, default: Any = None, same_fact: bool = False) -> Any:
        """First non-null value among `names` (text config before top level); every name present counts as read.
        With `same_fact` (spellings of one fact, not fallbacks), a later one holding another value is a conflict."""
        read: str | None = None
        result = default
        for name in names:
            found, value = self._lookup(name)
            if not found:
                continue
            self.used.add(name)
            if value is None:
                continue
            if read is None:
                read, result = name, value
            elif same_fact and value != result:
                self.conflicts.setdefault(name, read)
        return result

    def conflict(self, name: str, read: str) -> None:
        self.used.add(name)
        self.conflicts.setdefault(name, read)

    def quantity(self, name: str) -> Any:
        """A quantity by its canonical name (names.config.ALIASES), for names.config's derived rules."""
        return self.model_type if name == "model_type" else self.get(*spellings(name))

    def has(self, name: str) -> bool:
        return self._lookup(name)[0]

    def peek(self, name: str) -> Any:
        """`name`'s value without counting it as read (a modelled key the lint still reports as a kernel fact)."""
        return self._lookup(name)[1]

    def mark_used(self, *names: str) -> None:
        self.used.update(names)

    def _found_name(self, names: tuple[str, ...]) -> str:
        return next((n for n in names if self._lookup(n)[1] is not None), names[0])

    def int(self, *names: str, default: int | None = None, same_fact: bool = False) -> int | None:
        value = self.get(*names, default=default, same_fact=same_fact)
        if isinstance(value, bool):
            return int(value)
        if isinstance(value, float) and value.is_integer():
            return int(value)
        if isinstance(value, int):
            return value
        if value is not None and value is not default:
            self.type_errors[self._found_name(names)] = "an integer"
        return default

    def period(self, *names: str, default: int | None = None) -> int | None:
        """A layer period ("every n-th layer"): zero or less is a type error and gives `default`."""
        value = self.int(*names, default=default)
        if value is not None and value < 1 and value is not default:
            self.type_errors[self._found_name(names)] = "a positive integer (every n-th layer)"
            return default
        return value

    def float(self, *names: str, default: float | None = None) -> float | None:
        value = self.get(*names, default=default)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            if value is not None and value is not default:
                self.type_errors[self._found_name(names)] = "a number"
            return default
        return float(value)

    def numbers(self, name: str, count: int) -> tuple[float, ...] | None:
        """A list of `count` numbers (transformers' tagged floats read) as floats; None when absent, a type error
        when it is something else (NaN included)."""
        from onboard.serde import decode_special_floats

        value = decode_special_floats(self.get(name))
        if value is None:
            return None
        if isinstance(value, list) and len(value) == count and all(_is_number(v) for v in value):
            return tuple(float(v) for v in value)
        self.type_errors[name] = f"a list of {count} numbers"
        return None

    def bool(self, *names: str, default: bool = False) -> bool:
        value = self.get(*names, default=default)
        return bool(value) if value is not None else default

    @property
    def model_type(self) -> str:
        top = self.raw.get("model_type")
        inner = self.text.get("model_type")
        self.used.add("model_type")
        return str(inner or top or "unknown")

    def all_keys(self) -> list[tuple[str, str]]:
        """(section, key) for every key, "" for the top level; a text or model section's keys under its name."""
        sections = [s for s in MODEL_SECTIONS if isinstance(self.raw.get(s), dict)]
        keys = [("", k) for k in self.raw if k != self.text_section and k not in sections]
        if self.text_section:
            keys += [(self.text_section, k) for k in self.text]
        return keys + [(s, k) for s in sections for k in self.raw[s]]


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value == value  # not NaN
