"""Build onboard/data/families.json: every causal-LM family of the installed transformers, at its default config.

For each model_type: the default config, the model instantiated on the meta device (no memory, no weights) for its
tensor names and shapes, then onboard's own analysis for its features. Run after upgrading transformers:

    .venv/bin/python scripts/build_family_catalog.py
"""

from __future__ import annotations

import json
import os
import sys
import warnings
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
warnings.filterwarnings("ignore")


def main() -> None:
    import torch
    import transformers
    from transformers import AutoConfig, AutoModelForCausalLM
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    from onboard.inspect_checkpoint import profile_from_parts, tensor_names
    from onboard.inspect_checkpoint.checkpoint_types import TensorInfo
    from onboard.inspect_checkpoint.config_lint import IGNORED
    from tests.tiny.configs import TINY

    families: dict[str, dict] = {}
    failed: dict[str, str] = {}
    for model_type in sorted(MODEL_FOR_CAUSAL_LM_MAPPING_NAMES):
        try:
            try:
                config = AutoConfig.for_model(model_type)
                with torch.device("meta"):
                    model = AutoModelForCausalLM.from_config(config)
            except Exception:
                if model_type not in TINY:
                    raise
                # Some families cannot be built at their defaults; the tiny test config has the same structure.
                config = AutoConfig.for_model(model_type, **TINY[model_type])
                with torch.device("meta"):
                    model = AutoModelForCausalLM.from_config(config)
            tied = set()
            if getattr(config, "tie_word_embeddings", False):
                tied = {k for k in model.state_dict() if k.endswith("lm_head.weight")}
            tensors = {
                name: TensorInfo(name, "F32", tuple(t.shape), (0, 0), "meta")
                for name, t in model.state_dict().items()
                if name not in tied
            }
            raw = config.to_dict()
            profile = profile_from_parts(raw, tensors)
        except Exception as exc:  # a family that cannot be built at defaults is listed, not fatal
            failed[model_type] = f"{type(exc).__name__}: {str(exc)[:200]}"
            continue
        templates = sorted({tensor_names.template(n) for n in tensors})
        params = {n for n, _ in model.named_parameters(remove_duplicate=False)}
        # Persistent buffers are saved in checkpoints but are not parameters (num_parameters() skips them).
        # Leaf names only: transformers renames modules when it saves (e.g. `gate.x` → `mlp.x`), leaves survive.
        buffers = sorted({n.rsplit(".", 1)[-1] for n in tensors if n not in params})
        keys = sorted(k for k in raw if k not in IGNORED and not isinstance(raw[k], dict))
        families[model_type] = {
            "architectures": list(getattr(config, "architectures", None) or [MODEL_FOR_CAUSAL_LM_MAPPING_NAMES[model_type]]),
            "features": list(profile.features),
            "tensor_templates": templates,
            "config_keys": keys,
            "buffers": buffers,
        }
        print(f"{model_type:28s} {' '.join(profile.features)}", file=sys.stderr)
    out = {
        "built_with": {"transformers": transformers.__version__, "torch": torch.__version__},
        "how": "scripts/build_family_catalog.py: default config of each causal-LM family, meta-device tensors",
        "families": families,
        "failed": failed,
    }
    path = REPO / "onboard" / "data" / "families.json"
    path.write_text(json.dumps(out, indent=1, sort_keys=True) + "\n")
    print(f"{len(families)} families written to {path}; {len(failed)} failed: {sorted(failed)}", file=sys.stderr)


if __name__ == "__main__":
    main()
