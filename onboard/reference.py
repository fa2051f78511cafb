"""Which implementation is a checkpoint's reference, and whether onboard may run it.

- transformers implements config.json's `model_type`: the reference, loaded in process, trust_remote_code=False;
- only the repository's own code (`auto_map`) does: that code, only with `--trust-remote-code`, and then only in the
  sandbox (`onboard.sandbox.run_isolated`);
- neither: no reference, and the stages that need one say so.

Deciding reads config.json only. `load_transformers` is the one loader of the transformers reference.
"""

from __future__ import annotations

import json
import os
import shlex
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from onboard.errors import InputError, OnboardError

BUILTIN = "transformers"
REPO_CODE = "repository-code"
NONE = "none"
TRUST_FLAG = "--trust-remote-code"
UNSAFE_FLAG = "--unsafe-no-sandbox"
_ALLOWED: ContextVar[bool] = ContextVar("onboard_remote_code_allowed", default=False)


def trust_remote_code() -> bool:
    """What every transformers load passes as `trust_remote_code`: False, except inside `remote_code_allowed()`."""
    return _ALLOWED.get()


@contextmanager
def remote_code_allowed() -> Iterator[None]:
    """Loads in this block may import the repository's code; refused outside the sandbox worker."""
    from onboard.sandbox.protocol import require_worker

    require_worker("a reference load with trust_remote_code=True")
    token = _ALLOWED.set(True)
    try:
        yield
    finally:
        _ALLOWED.reset(token)


@dataclass(frozen=True)
class RemoteCodePolicy:
    """What the user allowed: the repository's code as the reference, and (reported) without the sandbox."""

    trust_remote_code: bool = False
    unsafe_no_sandbox: bool = False

    def to_dict(self) -> dict[str, bool]:
        return {"trust_remote_code": self.trust_remote_code, "unsafe_no_sandbox": self.unsafe_no_sandbox}


@dataclass(frozen=True)
class Reference:
    kind: str  # BUILTIN, REPO_CODE or NONE
    model_type: str | None
    detail: str  # why this kind, in words

    def refusal(self, policy: RemoteCodePolicy, rerun: str) -> str | None:
        """None when the reference may run under `policy`; else why not and the exact command that would run it."""
        if self.kind == BUILTIN or (self.kind == REPO_CODE and policy.trust_remote_code):
            return None
        if self.kind == REPO_CODE:
            return (
                f"no reference: {self.detail}; onboard runs repository code only when asked, in a sandbox "
                f"(review the repo's .py files first), rerun with: {rerun}"
            )
        return f"no reference: {self.detail}"


def classify(model_type: str | None, auto_map: Any) -> Reference:
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES

    if model_type and model_type in CONFIG_MAPPING_NAMES:
        return Reference(BUILTIN, model_type, f"transformers implements model_type {model_type!r}")
    auto_map = auto_map if isinstance(auto_map, dict) else {}
    model_entry = next((v for k, v in auto_map.items() if k.startswith("AutoModel") and isinstance(v, str)), None)
    if model_entry and auto_map.get("AutoConfig"):
        return Reference(
            REPO_CODE,
            model_type,
            f"model_type {model_type!r} exists only as the repository's code (auto_map: AutoConfig -> "
            f"{auto_map['AutoConfig']}, model -> {model_entry})",
        )
    import transformers

    return Reference(
        NONE,
        model_type,
        f"model_type {model_type!r} is unknown to transformers {transformers.__version__} and the repository ships "
        "no modeling code (no auto_map with AutoConfig and AutoModel*): upgrade transformers to a release that "
        "implements it, or compare against an engine with onboard validate --endpoint",
    )


def reference_for(checkpoint: Path | str) -> Reference:
    """The reference of a local checkpoint folder, from its config.json."""
    path = Path(checkpoint) / "config.json"
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        return Reference(NONE, None, f"{path}: unreadable ({exc})")
    if not isinstance(config, dict):
        return Reference(NONE, None, f"{path}: not a JSON object")
    return classify(config.get("model_type"), config.get("auto_map"))


def rerun_command(*words: str, policy: RemoteCodePolicy | None = None) -> str:
    """`onboard WORDS... --trust-remote-code` (plus --unsafe-no-sandbox when it was given), shell-quoted."""
    flags = [TRUST_FLAG] + ([UNSAFE_FLAG] if policy and policy.unsafe_no_sandbox else [])
    return shlex.join(["onboard", *words, *flags])


def describe(reference: Reference, policy: RemoteCodePolicy, checkpoint: Path | str) -> dict[str, Any]:
    """What produced a reference output (goldens, parity): the library and version, or the repository code's
    sha256 and how it was isolated."""
    import transformers

    if reference.kind != REPO_CODE:
        return {
            "library": "transformers",
            "version": transformers.__version__,
            "identity": f"transformers {transformers.__version__}",
        }
    from onboard.sandbox import code_hash

    code_sha256 = code_hash(Path(checkpoint))
    return {
        "library": "repository code",
        "code_sha256": code_sha256,
        "identity": f"repository code sha256:{code_sha256}",
        "loaded_with": f"transformers {transformers.__version__} (trust_remote_code=True)",
        "isolation": _isolation(policy),
    }


def _isolation(policy: RemoteCodePolicy) -> str:
    from onboard.errors import SandboxUnavailable
    from onboard.sandbox import isolation_method
    from onboard.sandbox.protocol import in_worker

    if in_worker():  # the parent, which chose the method, fills this in
        return "sandbox worker"
    try:
        return isolation_method(policy.unsafe_no_sandbox)
    except SandboxUnavailable:
        return "unavailable"


def run_in_sandbox(
    target: str, kwargs: dict[str, Any], checkpoint: Path, policy: RemoteCodePolicy, wall_s: float | None = None
) -> Any:
    """Call `target` ("module:function", our code) in the sandbox worker, where it may load the repo's code: the
    only way onboard runs repository code (tests replace it with an in-process stand-in)."""
    from onboard.sandbox import Limits, run_isolated

    limits = Limits(wall_s=wall_s, cpu_s=wall_s) if wall_s else Limits()
    return run_isolated(
        target, kwargs=kwargs, checkpoint=Path(checkpoint), limits=limits, unsafe_no_sandbox=policy.unsafe_no_sandbox
    )


def tokenizer_needs_code(folder: Path | str) -> str | None:
    """Why a local folder's tokenizer exists only as repository code (an AutoTokenizer auto_map entry and a
    tokenizer_class transformers does not know), else None. Reads tokenizer_config.json only."""
    path = Path(folder) / "tokenizer_config.json"
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None  # no readable tokenizer config: the tokenizer checks report that themselves
    auto_map = config.get("auto_map") if isinstance(config, dict) else None
    entry = auto_map.get("AutoTokenizer") if isinstance(auto_map, dict) else auto_map
    if isinstance(entry, list):
        entry = ", ".join(e for e in entry if isinstance(e, str))
    if not entry:
        return None
    name = config.get("tokenizer_class")
    if isinstance(name, str) and name:
        from transformers.models.auto.tokenization_auto import tokenizer_class_from_name

        if tokenizer_class_from_name(name) is not None:
            return None
    return f"the tokenizer exists only as the repository's code (tokenizer_class {name!r}, auto_map: AutoTokenizer -> {entry})"


def torch_dtype(name: str) -> Any:
    import torch

    dtypes = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16, "float64": torch.float64}
    return dtypes[name]


def _image_text_to_text_only(path: Path) -> bool:
    """A multimodal wrapper transformers maps to an image-text-to-text class only, no causal-LM class (Mistral 3,
    LLaVA, Qwen-VL; Gemma 3, Llama 4 and Qwen3.5 have both)."""
    from transformers.models.auto.modeling_auto import (
        MODEL_FOR_CAUSAL_LM_MAPPING_NAMES,
        MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES,
    )

    try:
        model_type = json.loads((path / "config.json").read_text()).get("model_type")
    except (OSError, ValueError, AttributeError):
        return False  # from_pretrained reports the unreadable config.json
    return (
        model_type in MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES and model_type not in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES
    )


def load_transformers(path: Path, dtype: str, device: str = "cpu", attn: str = "eager") -> Any:
    """transformers' model for a local folder, eager attention and eager experts (the reference implementation),
    checked sound (onboard/reference_health.py: repaired if it can be, else ReferenceUnusable). trust_remote_code
    is passed explicitly (trust_remote_code()), so transformers never prompts."""
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    import transformers
    from transformers import AutoModelForCausalLM

    transformers.utils.logging.disable_progress_bar()
    kwargs: dict[str, Any] = {"dtype": torch_dtype(dtype), "attn_implementation": attn}
    if int(transformers.__version__.split(".")[0]) >= 5:
        # Eager experts: the reference loop, and the only one that runs in float64 (grouped_mm has no double).
        kwargs["experts_implementation"] = "eager"
    auto = AutoModelForCausalLM
    if _image_text_to_text_only(path):  # Mistral 3, LLaVA, Qwen2.5-VL: the wrapper, run on text (no image inputs)
        from transformers import AutoModelForImageTextToText as auto

    def load() -> Any:
        try:
            return auto.from_pretrained(path, trust_remote_code=trust_remote_code(), **kwargs).eval()
        except OnboardError:
            raise
        except Exception as exc:  # noqa: BLE001 - the files' fault: a config the weights contradict (RuntimeError:
            # size mismatch), a value torch cannot allocate (RuntimeError, OverflowError), a missing file (OSError) ...
            lines = str(exc).strip().splitlines()
            raise InputError(
                f"{path}: transformers cannot load this checkpoint ({type(exc).__name__}: "
                f"{lines[0][:300] if lines else ''})",
                f"{reference_for(path).detail}; check that the weights are present and that config.json describes "
                "them (onboard inspect compares the two)",
            ) from exc

    from onboard.reference_health import sound_reference

    # Checked before anything is judged against it: repaired, or ReferenceUnusable naming the tensor.
    options = (dtype, attn, auto.__name__, str(trust_remote_code()))
    model, health = sound_reference(load(), load, Path(path), options)
    model.onboard_reference_health = health.to_dict()  # what parity and goldens report of it
    return model.to(device).eval()
