"""Session fixtures for the fidelity tests: the trained fixture and sharpened random checkpoints, their goldens
(calibrated in every dtype a test judges), and defective copies — each built once, lazily."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.fidelity.defects import Defect
from tests.fidelity.sharpened import build_sharpened
from tests.validate.tiny_models import edit_weights

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
TRAINED = Path(__file__).resolve().parents[1] / "fixtures" / "trained-qwen3"
NEW_TOKENS = 8
LONG_TOKENS = {"trained": 160}  # past LATE_FROM (64) by 96 positions; sharpened families: past their boundaries
LONG_DEFAULT = 96
CALIBRATE = ("float32", "bfloat16", "float16")


@pytest.fixture(autouse=True, scope="module")
def _one_torch_thread() -> Iterator[None]:
    """Tiny models: one intra-op thread is faster than two contending on a 2-core box; restored afterwards."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


class Fidelity:
    def __init__(self, root: Path) -> None:
        self.root = root
        self._paths: dict[str, Path] = {}
        self._goldens: dict[str, Any] = {}

    def checkpoint(self, model: str) -> Path:
        if model not in self._paths:
            self._paths[model] = TRAINED if model == "trained" else build_sharpened(model, self.root / model)
        return self._paths[model]

    def golden(self, model: str) -> Any:
        from onboard.validate_serving.golden import record

        if model not in self._goldens:
            self._goldens[model] = record(
                str(self.checkpoint(model)), self.root / f"golden-{model}", max_new_tokens=NEW_TOKENS,
                max_long_tokens=LONG_TOKENS.get(model, LONG_DEFAULT), calibrate=CALIBRATE,
            )  # fmt: skip
        return self._goldens[model]

    def defective(self, defect: Defect) -> Path:
        """A copy of the defect's checkpoint with its config/weight edit (the clean one for wrapper defects)."""
        src = self.checkpoint(defect.model)
        if not defect.config and defect.weights is None:
            return src
        dst = self.root / f"{defect.model}-{defect.name}"
        if dst.exists():
            return dst
        shutil.copytree(src, dst)
        config = json.loads((dst / "config.json").read_text())
        for key, value in defect.config.items():
            if key == "rope_theta_factor":
                config["rope_parameters"] = {**config["rope_parameters"]}
                config["rope_parameters"]["rope_theta"] *= value
            else:
                config[key] = value  # None is written as null: a soft-cap switched off, not reset to its default
        (dst / "config.json").write_text(json.dumps(config, indent=2))
        if defect.weights is not None:
            edit_weights(dst, dst, defect.weights)
        return dst


@pytest.fixture(scope="session")
def fidelity(tmp_path_factory: pytest.TempPathFactory) -> Fidelity:
    return Fidelity(tmp_path_factory.mktemp("fidelity"))
