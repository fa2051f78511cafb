"""`onboard validate … --speculative CONFIG`: greedy decoding with speculation on must give the goldens' tokens.

Speculation verifies the draft's proposals with the target, so greedy output must equal plain greedy decoding token
for token; a difference is a fidelity bug (a verify step at the wrong position, a KV cache polluted by rejected
tokens, a draft/target vocabulary mismatch). Beside it: vLLM's acceptance counters (/metrics `spec_decode_*`, read
around each request) and, for `ngram`, ours (`vllm_ngram_proposal`: a port of vLLM's ngram proposer replayed along
the golden continuation). Drafts and draft tokens must equal the engine's; accepted tokens may exceed ours by up to
k-1 per request, since the engine verifies a last window past `max_tokens` before truncating. Why vLLM's CPU build is
no reference for `mtp`: docs/speculative.md.
"""

from __future__ import annotations

import dataclasses
import json
import re
import urllib.request
from collections.abc import Sequence
from itertools import zip_longest
from pathlib import Path
from typing import Any

from onboard.checks import Check
from onboard.comparator import first_difference
from onboard.errors import InputError

CHECK = "speculative_equivalence"
DEFAULT_K = 3
NGRAM_MIN, NGRAM_MAX = 1, 3  # vLLM's prompt_lookup_min / prompt_lookup_max as onboard starts it
COUNTERS = {
    "drafts": "vllm:spec_decode_num_drafts_total",
    "draft_tokens": "vllm:spec_decode_num_draft_tokens_total",
    "accepted": "vllm:spec_decode_num_accepted_tokens_total",
}
PER_POSITION = "vllm:spec_decode_num_accepted_tokens_per_pos_total"


def speculative_config(spec: str, k: int = DEFAULT_K) -> dict[str, Any]:
    """vLLM's --speculative-config for CONFIG: `ngram`, `mtp` (the checkpoint's own MTP layers) or a draft folder."""
    if spec == "ngram":
        return {
            "method": "ngram",
            "num_speculative_tokens": k,
            "prompt_lookup_min": NGRAM_MIN,
            "prompt_lookup_max": NGRAM_MAX,
        }
    if spec == "mtp":
        return {"method": "mtp", "num_speculative_tokens": k}
    if Path(spec).is_dir() and (Path(spec) / "config.json").is_file():
        return {"model": str(Path(spec).resolve()), "num_speculative_tokens": k}
    raise InputError(
        f"--speculative {spec!r}: not `ngram`, `mtp` or a draft checkpoint folder with config.json",
        "pass --speculative ngram, --speculative mtp, or the draft model's local folder",
    )


def vllm_ngram_proposal(
    context: Sequence[int], k: int, n_min: int = NGRAM_MIN, n_max: int = NGRAM_MAX, max_model_len: int | None = None
) -> list[int]:
    """What vLLM's ngram proposer drafts after `context`: the longest suffix of n_max..n_min tokens found earlier
    in the context (the earliest such occurrence; it may overlap the suffix), then up to k tokens that followed it
    (never past the context's end, nor past max_model_len)."""
    total = len(context)
    if max_model_len is not None:
        k = min(k, max_model_len - total)
    if total < n_min or k <= 0:
        return []
    tokens = list(context)
    for n in range(min(n_max, total - 1), n_min - 1, -1):
        suffix = tokens[total - n :]
        for start in range(total - n):
            if tokens[start : start + n] == suffix:
                return tokens[start + n : start + n + k]
    return []


def expected_ngram(prompt: Sequence[int], continuation: Sequence[int], k: int) -> dict[str, Any]:
    """Our replay of greedy ngram speculation along `continuation`: the engine samples one token after prefill,
    then each step drafts from the context and the target keeps the agreeing prefix plus one token of its own."""
    drafts = draft_tokens = accepted = 0
    per_position = [0] * k
    t, n = 1, len(continuation)
    while t < n:
        proposal = vllm_ngram_proposal(list(prompt) + list(continuation[:t]), k)
        run = 0
        if proposal:
            drafts, draft_tokens = drafts + 1, draft_tokens + len(proposal)
            while run < len(proposal) and t + run < n and proposal[run] == continuation[t + run]:
                per_position[run] += 1
                run += 1
        accepted, t = accepted + run, t + run + 1
    return {"drafts": drafts, "draft_tokens": draft_tokens, "accepted": accepted, "per_position": per_position}


def engine_counters(url: str, timeout_s: float = 10.0) -> dict[str, Any] | None:
    """vLLM's spec-decode counters from /metrics (summed over engines), or None when it exports none."""
    try:
        with urllib.request.urlopen(url.rstrip("/").removesuffix("/v1") + "/metrics", timeout=timeout_s) as resp:
            text = resp.read().decode()
    except OSError:
        return None
    out: dict[str, Any] = {key: 0.0 for key in COUNTERS}
    positions: dict[int, float] = {}
    seen = False
    for line in text.splitlines():
        name, _, value = line.partition("{")[0], None, line.rsplit(" ", 1)[-1]
        for key, metric in COUNTERS.items():
            if name == metric:
                out[key], seen = out[key] + float(value), True
        if name == PER_POSITION:
            pos = int(re.search(r'position="(\d+)"', line).group(1))  # type: ignore[union-attr]
            positions[pos] = positions.get(pos, 0.0) + float(value)
    out["per_position"] = [positions[p] for p in sorted(positions)]
    return out if seen else None


def _delta(after: dict[str, Any], before: dict[str, Any]) -> dict[str, Any]:
    out = {key: int(after[key] - before[key]) for key in COUNTERS}
    pairs = zip_longest(after["per_position"], before["per_position"], fillvalue=0.0)
    return out | {"per_position": [int(a - b) for a, b in pairs]}


def _total(rows: list[dict[str, Any]]) -> dict[str, Any]:
    total = {key: sum(r[key] for r in rows) for key in COUNTERS}
    total["per_position"] = [sum(column) for column in zip_longest(*(r["per_position"] for r in rows), fillvalue=0)]
    total["acceptance_rate"] = total["accepted"] / total["draft_tokens"] if total["draft_tokens"] else 0.0
    total["mean_accepted_per_draft"] = total["accepted"] / total["drafts"] if total["drafts"] else 0.0
    return total


def speculative_check(golden: Any, candidate: Any, url: str, spec: str, k: int = DEFAULT_K) -> Check:
    """Greedy continuation of every golden prompt with speculation on == the golden continuation; the engine's
    acceptance counters per request, and ours for ngram."""
    differing, engine_rows, ours_rows = [], [], []
    for prompt in golden.prompts:
        want = list(prompt.generated_ids)
        if not want:
            continue
        before = engine_counters(url)
        got = list(candidate.generate([list(prompt.prompt_ids)], len(want), 1)[0].ids)
        after = engine_counters(url)
        if got[: len(want)] != want:
            first = first_difference(got, want)
            differing.append(
                f"{prompt.name}: token {first} is {got[first] if first < len(got) else 'missing'}, golden {want[first]}"
            )
        if before is not None and after is not None:
            engine_rows.append(_delta(after, before))
        if spec == "ngram":
            ours_rows.append(expected_ngram(prompt.prompt_ids, want, k))
    data: dict[str, Any] = {
        "speculative": spec,
        "k": k,
        "prompts": len(golden.prompts),
        "differing": differing,
        "engine": _total(engine_rows) if engine_rows else None,
        "ours": _total(ours_rows) if ours_rows else None,
    }
    problems = list(differing)
    if data["engine"] is None:
        problems.append("the endpoint exports no spec_decode counters on /metrics: is speculation on?")
    elif data["engine"]["drafts"] == 0:
        problems.append("the engine drafted nothing on the prompt suite: speculation was not exercised")
    if data["engine"] and data["ours"]:
        problems += _against_ours(data["engine"], data["ours"], k, len(ours_rows))
    return Check(CHECK, not problems, False, _detail(data, problems), data=data)


def _against_ours(engine: dict[str, Any], ours: dict[str, Any], k: int, requests: int) -> list[str]:
    """Drafts and draft tokens equal; accepted within the engine's verified tail past max_tokens."""
    out = [
        f"engine {key} {engine[key]} != ours {ours[key]}"
        for key in ("drafts", "draft_tokens")
        if engine[key] != ours[key]
    ]
    if not ours["accepted"] <= engine["accepted"] <= ours["accepted"] + (k - 1) * requests:
        out.append(
            f"engine accepted {engine['accepted']} tokens, ours {ours['accepted']} (+ at most {k - 1} per "
            "request past max_tokens)"
        )
    return out


def _detail(data: dict[str, Any], problems: list[str]) -> str:
    engine, ours = data["engine"], data["ours"]
    parts = [
        f"{data['prompts']} prompts, greedy, speculation {data['speculative']} k={data['k']}: "
        + ("tokens equal the goldens" if not data["differing"] else f"{len(data['differing'])} differ")
    ]
    if engine:
        parts.append(
            f"engine: {engine['drafts']} drafts, {engine['accepted']}/{engine['draft_tokens']} draft tokens "
            f"accepted ({engine['acceptance_rate']:.2f}), by position {engine['per_position']}"
        )
    if ours:
        parts.append(
            f"ours: {ours['drafts']} drafts, {ours['accepted']}/{ours['draft_tokens']} accepted, "
            f"by position {ours['per_position']}"
        )
    elif data["speculative"] != "ngram":
        parts.append("ours: see `onboard draft-check` (draft-check.json) for this draft's measured acceptance")
    return "; ".join(parts + problems[:3])


def speculative_args(spec: str | None, k: int, engine_name: str | None, endpoint: str | None) -> list[str]:
    """validate --speculative: the arguments `--engine vllm` starts vLLM with ([] for an --endpoint, which must
    already run speculation; refused in process, where no engine speculates)."""
    if spec is None:
        return []
    if engine_name is None and not endpoint:
        raise InputError(
            "--speculative checks a serving engine",
            "add --engine vllm, or --endpoint URL of a server started with --speculative-config",
        )
    config = speculative_config(spec, k)  # refuses a CONFIG that is not ngram, mtp or a draft folder
    return ["--speculative-config", json.dumps(config)] if engine_name else []


def add_speculative_check(result: dict[str, Any], golden: Any, candidate: Any, url: str, spec: str, k: int) -> None:
    """Append the speculative_equivalence check to a validate result (required: --speculative asked for it)."""
    from onboard.validate_serving.report import add_checks

    check = speculative_check(golden, candidate, url, spec, k)
    add_checks(result, [dataclasses.replace(check, required=True)])
