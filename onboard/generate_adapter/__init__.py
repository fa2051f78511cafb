"""Stage 2, generate: a ModelProfile -> adapters/<model_type>.py (blocks composed per family, weight map as data),
kernel stubs for what the block library lacks, and vLLM / SGLang launch scripts. `onboard generate` wraps `generate`.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from onboard.checks import Check, all_passed, stage_result
from onboard.errors import InputError
from onboard.fsutil import atomic_write
from onboard.profile import ModelProfile
from onboard.reference import RemoteCodePolicy

__all__ = ["GenerateResult", "default_out_dir", "generate", "load_profile", "render_files"]


@dataclass(frozen=True)
class GenerateResult:
    model_type: str
    out_dir: str
    files: tuple[str, ...]
    stubs: tuple[dict[str, str], ...]
    checks: tuple[Check, ...]
    parity: dict[str, Any] | None = None
    stage: str = field(default="generate")
    closest_family: str | None = None
    overrides: tuple[str, ...] = ()  # family facts applied (compose_knowledge.FAMILY_FACTS)

    @property
    def verification(self) -> str:
        """passed | failed against a reference, or unverified (no reference ran): never "passed" without one."""
        if self.parity is None:
            return "unverified"
        return str(self.parity.get("status") or ("passed" if self.parity["passed"] else "failed"))

    @property
    def passed(self) -> bool:
        return all_passed(self.checks)

    def to_dict(self) -> dict[str, Any]:
        fields = {k: v for k, v in asdict(self).items() if k not in ("stage", "checks")}
        fields["files"], fields["stubs"] = list(self.files), list(self.stubs)
        fields["overrides"], fields["verification"] = list(self.overrides), self.verification
        return stage_result(self.stage, self.checks, **fields)


def load_profile(source_or_profile: ModelProfile | str | os.PathLike) -> ModelProfile:
    if isinstance(source_or_profile, ModelProfile):
        return source_or_profile
    path = Path(source_or_profile)
    if path.is_file() and path.suffix == ".json":
        try:
            return ModelProfile.from_json(path.read_text())
        except (ValueError, KeyError, TypeError) as exc:
            raise InputError(
                f"{path}: not a ModelProfile JSON ({exc})", "write one with `onboard inspect --json`"
            ) from exc
    from onboard.inspect_checkpoint import inspect

    return inspect(str(source_or_profile))


def render_files(profile: ModelProfile) -> tuple[Any, dict[str, str]]:
    """(plan, {relative path: text}) for everything `generate` writes. Pure: same profile, same bytes."""
    from onboard.generate_adapter.adapter_source import adapter_source
    from onboard.generate_adapter.engine_configs import engine_configs
    from onboard.generate_adapter.plan import plan
    from onboard.generate_adapter.render import render

    the_plan = plan(profile)
    files = {f"adapters/{the_plan.model_type}.py": adapter_source(the_plan)}
    for stub in the_plan.stubs:
        ctx = {"op": stub.op, "reason": stub.reason, "model_type": the_plan.model_type}
        files[f"kernels/{stub.op}.py"] = render("kernel.py.j2", **ctx)
        files[f"tests/kernels/test_{stub.op}.py"] = render("test_kernel.py.j2", **ctx)
    configs = engine_configs(profile)
    for cfg in configs:
        files[f"engine/{cfg.engine}.sh"] = render(
            "engine/serve.sh.j2",
            engine=cfg.engine,
            model_type=profile.model_type,
            lines=_shell_lines(cfg.argv),
            notes=cfg.notes,
        )
    engine_json = {cfg.engine: {"argv": list(cfg.argv), "notes": list(cfg.notes)} for cfg in configs}
    files["engine/engine.json"] = json.dumps(engine_json, indent=2, sort_keys=True) + "\n"
    return the_plan, files


def _shell_lines(argv: tuple[str, ...]) -> list[str]:
    """The command on the first line, then one `--flag value` per line (shell-quoted)."""
    import shlex

    lines: list[list[str]] = [[]]
    for token in argv:
        if token.startswith("--"):
            lines.append([])
        lines[-1].append(shlex.quote(token))
    return [" ".join(words) for words in lines if words]


def _imports_cleanly(path: Path) -> tuple[bool, str]:
    name = f"_onboard_generated_{path.stem}"
    previous, sys.dont_write_bytecode = sys.dont_write_bytecode, True  # leave no __pycache__ in the output
    try:
        from onboard.generate_adapter.runtime import import_file

        module = import_file(path, name)
        return hasattr(module, "Model") and hasattr(module, "ModelArgs"), "defines Model and ModelArgs"
    except Exception as exc:  # the check reports any failure to import, whatever it is
        return False, f"{type(exc).__name__}: {exc}"
    finally:
        sys.modules.pop(name, None)
        sys.dont_write_bytecode = previous


def generate(
    source_or_profile: ModelProfile | str | os.PathLike,
    out_dir: str | os.PathLike,
    force: bool = False,
    parity: bool = False,
    policy: RemoteCodePolicy | None = None,
    rerun: str | None = None,
    checkpoint: str | os.PathLike | None = None,
) -> GenerateResult:
    """Write the adapter, kernel stubs and engine configs for a checkpoint, a profile JSON file or a ModelProfile into
    `out_dir` (no overwriting unless `force`). `parity=True` also runs the adapter against the reference on the local
    checkpoint (SOURCE, or `checkpoint` for a profile): transformers, or the repository's code in the sandbox when
    `policy` trusts it ("unverified", naming `rerun`, otherwise)."""
    profile = load_profile(source_or_profile)
    the_plan, files = render_files(profile)
    out = Path(out_dir)
    existing = sorted(rel for rel in files if (out / rel).exists())
    if existing and not force:
        raise InputError(
            f"{out}: would overwrite {', '.join(existing[:5])}{' …' if len(existing) > 5 else ''}",
            "pass --force to replace them (generation is deterministic: unchanged inputs give identical files)",
        )
    for rel, text in files.items():
        atomic_write(out / rel, text, mode=0o755 if rel.endswith(".sh") else None)
    adapter = out / f"adapters/{the_plan.model_type}.py"
    ok, detail = _imports_cleanly(adapter)
    stub_ops = ", ".join(f"kernels/{s.op}.py" for s in the_plan.stubs)
    origin = f"composed from the checkpoint's profile (closest known family: {the_plan.closest_family or 'none'})"
    checks = [
        Check("adapter_rendered", True, True, f"adapters/{the_plan.model_type}.py {origin}"),
        Check("adapter_imports", ok, True, detail),
        Check(
            "kernels_implemented",
            the_plan.runnable,
            True,
            "every feature maps to a block" if the_plan.runnable else f"not runnable until {stub_ops} implemented",
        ),
    ]
    if profile.multimodal:
        checks.append(tower_check(profile))
    local = checkpoint if checkpoint is not None else source_or_profile
    folder = None if isinstance(local, ModelProfile) else Path(local)
    if folder is not None and not (folder / "config.json").is_file():
        folder = None
    if folder is not None:
        from onboard.generate_adapter.reference_config import REFERENCE_ROPE_BASE, rope_base_disagreement

        disagreement = rope_base_disagreement(json.loads((folder / "config.json").read_text()))
        if disagreement:  # only when they differ: every other config agrees, and parity covers the rest
            checks.append(Check(REFERENCE_ROPE_BASE, False, False, disagreement))
    parity_report = None
    if not parity:
        reason = "unverified: no reference run; `onboard generate CHECKPOINT_DIR --parity` compares the adapter's "
        checks.append(Check("adapter_parity", False, False, reason + "logits with the reference model"))
    elif folder is None:
        checks.append(Check("adapter_parity", False, True, "parity needs a local checkpoint folder as SOURCE"))
    elif not (the_plan.runnable and ok):
        checks.append(Check("adapter_parity", False, True, "not run: the adapter is not runnable yet"))
    else:
        from onboard.generate_adapter.parity_power import LOW_POWER
        from onboard.generate_adapter.search import parity_with_search

        parity_report = parity_with_search(the_plan, adapter, folder, policy=policy, rerun=rerun)
        # low power: not a failure of the adapter, nor a pass: the checklist item stays open
        required = parity_report["status"] != LOW_POWER
        checks.append(Check("adapter_parity", parity_report["passed"], required, parity_report["detail"]))
    return GenerateResult(
        model_type=the_plan.model_type,
        out_dir=str(out),
        files=tuple(sorted(files)),
        stubs=tuple({"op": s.op, "reason": s.reason} for s in the_plan.stubs),
        checks=tuple(checks),
        parity=parity_report,
        closest_family=the_plan.closest_family,
        overrides=the_plan.overrides,
    )


def tower_check(profile: ModelProfile) -> Check:
    """A multimodal wrapper's towers are not part of the adapter: a skip says so, and what would check them."""
    from onboard.inspect_checkpoint.tensor_names import tower_of

    counts: dict[str, int] = {}
    for group in profile.tensor_templates:
        tower = tower_of(group.template)
        if tower is not None:
            counts[tower] = counts.get(tower, 0) + group.count
    towers = ", ".join(f"{t} ({counts.get(t, 0):,} tensors)" for t in profile.multimodal)
    return Check(
        "tower_inputs",
        False,
        False,
        f"unverified: the adapter serves the language model on text; the {towers} tower(s) are not part of "
        "it, so image / audio inputs are neither run nor compared here. What would check them: the serving "
        "engine's outputs on image / audio prompts against transformers' wrapper",
    )


def default_out_dir(profile: ModelProfile) -> Path:
    """generated/<slug>: the repo id with `/` -> `__`, or a local folder's name."""
    source = profile.source.rstrip("/")
    slug = Path(source).name if Path(source).exists() or source.startswith((".", "/")) else source.replace("/", "__")
    return Path("generated") / (slug or profile.model_type)
