"""Golden outputs: the reference's answers, recorded once per checkpoint revision and diffed in review.

golden_outputs/<org>__<name>/ holds MANIFEST.json (source, weights fingerprint, reference, versions, generation
settings, stop set, boundaries, the long prompt's plan, per-dtype noise, activation max-abs; see `record`) and
prompts.jsonl (one line per prompt: ids, and per position the top-k ids and logprobs and the next token's logprob;
see `prompt_line`). Users' documentation: golden_outputs/README.md. Logprobs are rounded to LOGPROB_DECIMALS places
(error 5e-7, far below the tightest tolerance floor: float32's 2e-5).
"""

from __future__ import annotations

import json
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Annotated, Any

import msgspec

from onboard import reference as references
from onboard import serde
from onboard.comparator import CALIBRATION, NoiseStats, PositionMetrics, compare_rows, pooled_noise
from onboard.errors import InputError, NonFiniteValue, OnboardError, ReferenceUnusable
from onboard.fsutil import atomic_write, atomic_write_json, first_non_finite, output_folder, read_json
from onboard.reference import REPO_CODE, Reference, RemoteCodePolicy
from onboard.validate_serving.candidates import TopK
from onboard.validate_serving.prompts import PromptSpec

FORMAT = "onboard-golden/1"
GOLDEN_FILES = ("MANIFEST.json", "prompts.jsonl")
LOGPROB_DECIMALS = 6
DEFAULT_TOP_K = 10
DEFAULT_NEW_TOKENS = 16


@dataclass(frozen=True)
class GoldenPrompt:
    name: str
    kind: str
    text: str | None
    prompt_ids: tuple[int, ...]
    generated_ids: tuple[int, ...]
    rows: tuple[TopK, ...]
    """Teacher-forced distributions at positions 0..len(sequence)-2 of prompt_ids + generated_ids."""
    boundaries: dict[str, int] = field(default_factory=dict)

    @property
    def sequence(self) -> tuple[int, ...]:
        return self.prompt_ids + self.generated_ids


@dataclass(frozen=True)
class GoldenSet:
    folder: Path
    manifest: dict[str, Any]
    prompts: tuple[GoldenPrompt, ...]

    @property
    def top_k(self) -> int:
        return int(self.manifest["generation"]["top_k"])

    def noise(self, dtype: str) -> NoiseStats | None:
        entry = self.manifest.get("noise", {}).get(dtype)
        return NoiseStats(**entry) if entry else None


def prompt_line(prompt: GoldenPrompt) -> str:
    """One prompt as one compact JSON line (keys in a fixed order so diffs are line-stable)."""
    r = LOGPROB_DECIMALS
    doc = {
        "name": prompt.name,
        "kind": prompt.kind,
        "text": prompt.text,
        "boundaries": prompt.boundaries,
        "prompt_ids": list(prompt.prompt_ids),
        "generated_ids": list(prompt.generated_ids),
        "top_ids": [list(row.ids) for row in prompt.rows],
        "top_logprobs": [[round(v, r) for v in row.logprobs] for row in prompt.rows],
        "token_logprobs": [
            round(row.token_logprob, r) if row.token_logprob is not None else None for row in prompt.rows
        ],
    }
    found = first_non_finite(doc)
    if found is not None:  # the reference computed NaN/inf: never written (no JSON reader accepts it)
        raise ReferenceUnusable(
            f"prompt {prompt.name!r} {found[0]}",
            f"the reference's output for golden prompt {prompt.name!r} is {found[1]} at {found[0]}: goldens refused",
            "the reference model is not sound (onboard generate CHECKPOINT --parity reports which tensor); "
            "record goldens from a reference that computes finite outputs",
        )
    return json.dumps(doc, ensure_ascii=False, separators=(",", ":"))


def write_golden(out: Path, manifest: dict[str, Any], prompts: list[GoldenPrompt]) -> None:
    """Write prompts.jsonl then MANIFEST.json atomically; nothing else (the folder holds other stages' goldens).
    A non-finite number in either is refused with a named error, before anything is written."""
    lines = "".join(prompt_line(p) + "\n" for p in prompts)
    found = first_non_finite(manifest)
    if found is not None:
        raise NonFiniteValue(str(out / "MANIFEST.json"), *found, "re-record from a sound reference")
    atomic_write(out / "prompts.jsonl", lines)
    atomic_write_json(out / "MANIFEST.json", manifest)


class _Generation(msgspec.Struct):
    top_k: int
    max_new_tokens: int


class _ManifestShape(msgspec.Struct):
    """The MANIFEST.json fields other code reads (the manifest itself stays a dict: it is also a record)."""

    format: str
    generation: _Generation | None = None  # absent: an error where it is used, not before an earlier check
    weights_fingerprint: str | None = None
    stop_token_ids: list[int] = []
    boundaries: dict[str, int] = {}
    noise: dict[str, dict[str, Any]] = {}
    activation_max_abs: dict[str, float] = {}
    long_prompt: dict[str, Any] | None = None


# A token id is never negative; a log-probability is never above 0 (the comparator exponentiates them); each
# position's top-k lists at least one token.
_TokenId = Annotated[int, msgspec.Meta(ge=0)]
_LogProb = Annotated[float, msgspec.Meta(le=0.0)]


class _PromptLine(msgspec.Struct):
    """One line of prompts.jsonl, as prompt_line writes it."""

    name: str
    kind: str
    prompt_ids: list[_TokenId]
    generated_ids: list[_TokenId]
    top_ids: list[Annotated[list[_TokenId], msgspec.Meta(min_length=1)]]
    top_logprobs: list[list[_LogProb]]
    token_logprobs: list[_LogProb | None]
    text: str | None = None
    boundaries: dict[str, int] = {}


def read_golden(folder: Path) -> GoldenSet:
    """Load and validate a golden folder (msgspec structs); malformed content is an InputError naming the file,
    the line and the field."""
    manifest_file, prompts_file = folder / "MANIFEST.json", folder / "prompts.jsonl"
    if not manifest_file.is_file() or not prompts_file.is_file():
        raise InputError(
            f"{folder}: not a golden folder (needs MANIFEST.json and prompts.jsonl)",
            "record goldens first: onboard golden record SOURCE [--out DIR]",
        )
    redo = "re-record the goldens"
    manifest = read_json(manifest_file, dict[str, Any], redo)
    if manifest.get("format") != FORMAT:
        raise InputError(
            f"{manifest_file}: format {manifest.get('format')!r}, expected {FORMAT!r}",
            "re-record the goldens with this version of onboard",
        )
    serde.convert(manifest, _ManifestShape, str(manifest_file), redo)
    prompts = []
    for number, line in enumerate(prompts_file.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{prompts_file}:{number}"
        doc = serde.decode_json(line, _PromptLine, f"{where}: malformed golden line", redo)
        if not len(doc.top_ids) == len(doc.top_logprobs) == len(doc.token_logprobs):
            raise InputError(
                f"{where}: malformed golden line (top_ids, top_logprobs and token_logprobs differ in length)", redo
            )
        uneven = next(
            (j for j, (ids, lps) in enumerate(zip(doc.top_ids, doc.top_logprobs)) if len(ids) != len(lps)), None
        )
        if uneven is not None:
            raise InputError(
                f"{where}: malformed golden line (top_ids[{uneven}] and top_logprobs[{uneven}] differ in length)", redo
            )
        rows = tuple(
            TopK(tuple(ids), tuple(lps), tok)
            for ids, lps, tok in zip(doc.top_ids, doc.top_logprobs, doc.token_logprobs)
        )
        prompt = GoldenPrompt(
            doc.name, doc.kind, doc.text, tuple(doc.prompt_ids), tuple(doc.generated_ids), rows, dict(doc.boundaries)
        )
        if len(rows) != len(prompt.sequence) - 1:
            raise InputError(f"{where}: {len(rows)} positions for a sequence of {len(prompt.sequence)}")
        prompts.append(prompt)
    if not prompts:
        raise InputError(f"{prompts_file}: no prompts", redo)
    return GoldenSet(folder, manifest, tuple(prompts))


def assert_same_checkpoint(golden: GoldenSet, checkpoint: Path) -> str:
    """The checkpoint's fingerprint when the goldens were recorded from it; InputError when they were not."""
    from onboard.checkpoint_id import checkpoint_fingerprint

    manifest = golden.folder / "MANIFEST.json"
    recorded = golden.manifest.get("weights_fingerprint")
    current = checkpoint_fingerprint(checkpoint)
    redo = f"record goldens of this checkpoint (onboard golden record {checkpoint} --out DIR) and pass --golden DIR"
    if not recorded:
        raise InputError(
            f"{manifest}: no weights_fingerprint: cannot tell which checkpoint these goldens belong to", redo
        )
    if recorded != current:
        raise InputError(
            f"{golden.folder}: goldens of another checkpoint: recorded from {golden.manifest.get('source')} "
            f"(weights_fingerprint {recorded}), but {checkpoint} has fingerprint {current} (weights, config or "
            "tokenizer files differ; goldens recorded before onboard's content fingerprint also differ)",
            redo,
        )
    return current


def record(
    source: str,
    out: Path | None = None,
    *,
    revision: str | None = None,
    max_new_tokens: int = DEFAULT_NEW_TOKENS,
    top_k: int = DEFAULT_TOP_K,
    dtype: str = "float32",
    calibrate: tuple[str, ...] = tuple(CALIBRATION),
    max_long_tokens: int | None = None,
    policy: RemoteCodePolicy | None = None,
    rerun: str | None = None,
) -> GoldenSet:
    """Run the reference on the prompt suite and write goldens; returns what was written.

    The reference is transformers (eager), or, when the model_type exists only as the repository's code and
    `policy` trusts it, that code in the sandbox worker (record_in_worker); refused otherwise, naming `rerun`.
    """
    from onboard.checkpoint_id import checkpoint_fingerprint
    from onboard.environment import hardware, resolve_local, slug
    from onboard.validate_serving.prompts import DEFAULT_MAX_LONG, boundaries_of, build_suite, plan_long
    from onboard.validate_serving.runtime import InProcessCandidate
    from onboard.verify_tokenizer.special_tokens import checkpoint_stop_set
    from onboard.verify_tokenizer.subject import load_tokenizer
    from onboard.versions import library_versions

    started = time.time()
    folder = resolve_local(source, revision)
    policy = policy or RemoteCodePolicy()
    ref = references.reference_for(folder)
    with output_folder(out or Path("golden_outputs") / slug(source)) as target:  # before the reference runs
        if ref.kind == REPO_CODE and not references.trust_remote_code():  # this process never imports the repo's code
            options = {
                "revision": revision,
                "max_new_tokens": max_new_tokens,
                "top_k": top_k,
                "dtype": dtype,
                "calibrate": list(calibrate),
                "max_long_tokens": max_long_tokens,
            }
            rerun = rerun or references.rerun_command("golden", "record", source, "--out", str(target), policy=policy)
            return record_in_sandbox(source, target, folder, ref, policy, rerun, options)
        profile = _profile(str(folder))
        tokenizer = load_tokenizer(folder)
        model = references.load_transformers(folder, dtype)
        reference = InProcessCandidate(model, folder, dtype, kind="reference", hf=True)
        vocab = int(model.get_output_embeddings().weight.shape[0])
        cap = max_long_tokens or DEFAULT_MAX_LONG
        suite = build_suite(tokenizer, profile, vocab_size=vocab, max_new_tokens=max_new_tokens, max_long_tokens=cap)
        max_positions = profile.dims.max_position_embeddings if profile else None
        long_plan = plan_long(boundaries_of(profile), max_positions, max_new_tokens, cap)
        prompts = [_record_prompt(reference, spec, max_new_tokens, top_k) for spec in suite]
        longest = max(prompts, key=lambda p: len(p.sequence))
        activations = reference.scan_activations(longest.sequence) or []
        from onboard.validate_serving.tool_golden import record_tool_suite, write_tool_golden

        tools = record_tool_suite(reference, folder)
        reference.close()
        noise = {
            cand: asdict(_calibrate(folder, prompts, cand, base, top_k))
            for cand, base in CALIBRATION.items()
            if cand in calibrate
        }
        manifest = {
            "format": FORMAT,
            "source": source,
            "revision": revision or (profile.revision if profile else None),
            "weights_fingerprint": checkpoint_fingerprint(folder),
            "model_type": profile.model_type if profile else None,
            "reference": {
                **references.describe(ref, policy, folder),
                "attn_implementation": "eager",
                "dtype": dtype,
                "device": "cpu",
                **_repaired(model),
            },
            "versions": library_versions(),
            "hardware": hardware(),
            "generation": {"greedy": True, "max_new_tokens": max_new_tokens, "top_k": top_k, "ignore_eos": True},
            "logprob_decimals": LOGPROB_DECIMALS,
            "stop_token_ids": checkpoint_stop_set(folder),
            "boundaries": boundaries_of(profile),
            "long_prompt": asdict(long_plan),
            "noise": noise,
            "activation_max_abs": {s.name: s.max_abs for s in activations},
            "prompts": [
                {
                    "name": p.name,
                    "kind": p.kind,
                    "prompt_tokens": len(p.prompt_ids),
                    "generated_tokens": len(p.generated_ids),
                }
                for p in prompts
            ],
            "tool_calls": {"declared": tools.declared, "format": tools.tool_format, "answers": len(tools.answers)},
            "recorded_seconds": round(time.time() - started, 2),
        }
        write_golden(target, manifest, prompts)
        write_tool_golden(target, tools)
        return GoldenSet(target, manifest, tuple(prompts))


def _repaired(model: Any) -> dict[str, Any]:
    """{"soundness": …} when the reference had to be repaired before recording (onboard/reference_health.py); a
    reference sound as loaded adds nothing."""
    health = getattr(model, "onboard_reference_health", None)
    return {"soundness": health} if health and health.get("verdict") != "sound" else {}


def _profile(source: str) -> Any | None:
    """The ModelProfile when inspect can build one (it sizes the long prompt); None keeps recording possible."""
    try:
        from onboard.inspect_checkpoint import inspect

        return inspect(source)
    except Exception:  # inspect problems are inspect's to report; goldens fall back to default sizes
        return None


def _record_prompt(reference: Any, spec: PromptSpec, max_new_tokens: int, top_k: int) -> GoldenPrompt:
    generation = reference.generate([spec.ids], max_new_tokens, top_k, ignore_eos=True)[0]
    sequence = spec.ids + generation.ids
    rows = reference.score([sequence], top_k)[0]
    return GoldenPrompt(spec.name, spec.kind, spec.text, spec.ids, generation.ids, tuple(rows), dict(spec.boundaries))


def _calibrate(folder: Path, prompts: list[GoldenPrompt], dtype: str, baseline: str, top_k: int) -> NoiseStats:
    """The float32 reference against itself at another precision: what a correct implementation may differ by.

    In bfloat16/float16 it runs with eager and with sdpa attention (two real kernels) and pools both, since one run
    under-samples rare large events such as MoE routing flips. sdpa is skipped where the model refuses it.
    """
    from onboard.validate_serving.runtime import InProcessCandidate

    metrics: list[list[PositionMetrics]] = []
    for attn in ("eager", "sdpa") if baseline in ("bfloat16", "float16") else ("eager",):
        try:
            other = InProcessCandidate(
                references.load_transformers(folder, baseline, attn=attn), folder, baseline, kind="reference", hf=True
            )
            runs = [other.score([prompt.sequence], top_k * 2)[0] for prompt in prompts]
            other.close()
        except (InputError, ValueError, NotImplementedError):
            if attn == "eager":
                raise
            continue  # e.g. sdpa has no attention soft-cap (Gemma 2)
        except Exception as exc:  # noqa: BLE001 - the reference's own code failing: named, not an internal error
            if attn != "eager":
                continue
            raise OnboardError(
                f"the reference model's own {baseline} run (transformers, eager attention) raised "
                f"{type(exc).__name__}: {exc}; it is the calibration that {dtype} candidates are judged by",
                f"record the goldens without it (onboard golden record SOURCE --calibrate with the dtypes other than "
                f"{dtype}), and check {dtype} against the reference another way; the failure is in the reference's "
                "code, not in the checkpoint",
            ) from exc
        metrics += [compare_rows(p.rows, rows, p.sequence[1:], prompt=p.name) for p, rows in zip(prompts, runs)]
    return pooled_noise(dtype, baseline, metrics)


# A repository-code reference records in the sandbox worker: this function, named for the worker by module path.
WORKER = "onboard.validate_serving.golden:record_in_worker"


def record_in_worker(folder: str, options: dict[str, Any], unsafe_no_sandbox: bool) -> dict[str, Any]:
    """Worker side: `record` on `folder` with the repository's code as the reference, inside remote_code_allowed(),
    writing into the worker's temp dir and returning the two files' content as data."""
    out = Path(tempfile.mkdtemp(prefix="golden-")) / "golden"
    options = {**options, "calibrate": tuple(options.get("calibrate", ()))}
    with references.remote_code_allowed():
        record(folder, out, policy=RemoteCodePolicy(True, unsafe_no_sandbox), **options)
    return golden_texts(out)


def golden_texts(folder: Path) -> dict[str, str]:
    """A golden folder's files as text: how goldens cross the sandbox boundary."""
    return {name: (folder / name).read_text(encoding="utf-8") for name in GOLDEN_FILES}


def golden_from_texts(files: dict[str, Any], folder: Path) -> GoldenSet:
    """Golden files that crossed the sandbox boundary, written into `folder` and checked like any on disk."""
    for name, text in files.items():
        if name not in GOLDEN_FILES or not isinstance(text, str):
            raise InputError(f"unexpected golden file {name!r} from the sandbox", "this is a bug in onboard")
        (folder / name).write_text(text, encoding="utf-8")
    return read_golden(folder)


def record_in_sandbox(
    source: str, out: Path, folder: Path, ref: Reference, policy: RemoteCodePolicy, rerun: str, options: dict[str, Any]
) -> GoldenSet:
    """Parent side of `record` for a repository-code reference; refuses unless `policy` trusts it. What comes back
    is checked exactly as a golden folder on disk is checked (read_golden), and the manifest names the source and
    how the repository's code was isolated."""
    refused = ref.refusal(policy, rerun)
    if refused:
        raise InputError(
            f"{folder}: cannot record goldens: {refused}",
            f"review the repository's .py files in {folder}, then: {rerun}",
        )
    started = time.time()
    args = {"folder": str(folder), "options": options, "unsafe_no_sandbox": policy.unsafe_no_sandbox}
    files = references.run_in_sandbox(WORKER, args, folder, policy)  # looked up per call: tests stand in for it
    with tempfile.TemporaryDirectory(prefix="onboard-golden-") as tmp:
        golden = golden_from_texts(files, Path(tmp))
    identity = references.describe(ref, policy, folder)  # computed here: the worker cannot tell how it was isolated
    manifest = {
        **golden.manifest,
        "source": source,
        "reference": {**golden.manifest["reference"], **identity},
        "recorded_seconds": round(time.time() - started, 2),
    }
    write_golden(out, manifest, list(golden.prompts))
    return GoldenSet(out, manifest, golden.prompts)
