"""Reasoning split from the answer: `<think>…</think>` (Qwen3, DeepSeek, Kimi K2, GLM) and Mistral's `[THINK]…[/THINK]`.
Templates that open the reasoning in the generation prompt leave the model's text starting inside it: `open_at_start`.
"""

from __future__ import annotations

MARKERS = {"think": ("<think>", "</think>"), "mistral_think": ("[THINK]", "[/THINK]")}


def split_reasoning(text: str, style: str | None, *, open_at_start: bool = False) -> tuple[str | None, str]:
    """(reasoning, the rest of the text). Without a closing marker, reasoning runs to the end (a generation cut
    short while thinking); text before an opening marker stays with the rest."""
    if style is None:
        return None, text
    start, end = MARKERS[style]
    before = ""
    if open_at_start and not text.lstrip().startswith(start):
        inner = text
    else:
        at = text.find(start)
        if at == -1:
            return None, text
        before, inner = text[:at], text[at + len(start) :]
    stop = inner.find(end)
    if stop == -1:
        return inner, before
    return inner[:stop], before + inner[stop + len(end) :]


def reasoning_open(prompt: str, style: str | None) -> bool:
    """Whether a rendered generation prompt ends inside reasoning."""
    if style is None:
        return False
    start, end = MARKERS[style]
    return prompt.rfind(start) > prompt.rfind(end)
