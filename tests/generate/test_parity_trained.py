"""generate's parity verdict on the trained fixture (tests/fixtures/trained-qwen3: trained-like magnitudes, bf16):
the committed qwen3 adapter passes in the served dtype, the same adapter with its logits x1.03 (a dropped or doubled
multiplier that leaves the argmax alone) fails and says where, and a reference that may not run is never a pass."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from onboard.generate_adapter.parity import check_parity
from onboard.generate_adapter.regenerate import ADAPTERS_DIR
from onboard.reference import RemoteCodePolicy

TRAINED = Path(__file__).resolve().parents[1] / "fixtures" / "trained-qwen3"
CAUGHT = ["logits x1.05", "layer 1 attention x1.05"]  # parity_power.PROBES, all caught on trained weights


def scaled_adapter(tmp_path: Path, factor: float, only_in: str | None = None) -> Path:
    """The committed qwen3 adapter with its logits multiplied by `factor` (only in dtype `only_in` when given)."""
    path = tmp_path / "qwen3_scaled.py"
    path.write_text(
        "import importlib.util\nimport sys\n"
        f"_spec = importlib.util.spec_from_file_location('_qwen3_base', {str(ADAPTERS_DIR / 'qwen3.py')!r})\n"
        "_base = sys.modules['_qwen3_base'] = importlib.util.module_from_spec(_spec)\n"
        "_spec.loader.exec_module(_base)\n\n\n"
        "class Model(_base.Model):\n"
        "    def forward(self, *args, **kwargs):\n"
        "        out = super().forward(*args, **kwargs)\n"
        "        dtype = str(self.lm_head.weight.dtype).removeprefix('torch.')\n"
        f"        return out * {factor} if {only_in!r} in (None, dtype) else out\n"
    )
    return path


@pytest.fixture(scope="module")
def bf16_clean() -> dict:
    return check_parity(ADAPTERS_DIR / "qwen3.py", TRAINED, dtype="bfloat16")


def test_the_committed_adapter_passes_on_trained_weights_in_bf16(bf16_clean: dict) -> None:
    report = bf16_clean
    assert (report["passed"], report["status"], report["dtype"]) == (True, "passed", "bfloat16"), report["detail"]
    assert [p["length"] for p in report["prompts"]] == [5, 19, 48]
    assert report["reference"]["library"] == "transformers"
    # bf16 error is real (not a comparison of a model with itself) and of transformers' own bf16 order.
    assert 0 < report["worst"] < 0.05 and 0 < report["reference_worst"] < 0.05
    assert report["worst"] > 1e-3  # rounding the largest logits to bf16 alone moves them by up to 2^-9 of their size
    assert report["worst"] < 4 * report["reference_worst"]
    assert "divergence" not in report
    # worst is the worst prompt's max|Δlogit| / max|logit|; the detail says what was judged against what
    assert report["worst"] == max(p["relative"] for p in report["prompts"])
    assert all(p["relative"] == pytest.approx(p["max_abs_diff"] / p["max_abs_logit"]) for p in report["prompts"])
    # the trained fixture's bf16 noise leaves the power probes visible: a plain pass, naming what it catches
    assert report["status"] == "passed" and report["power"] == {"missed": [], "caught": CAUGHT}
    assert report["detail"].startswith(
        "passed (catches logits x1.05, layer 1 attention x1.05): "
        "adapter in bfloat16 vs transformers float32, judged against transformers in bfloat16: "
        f"{4 + 18 + 47} positions: mean KL"  # each prompt's next-token positions
    ), report["detail"]
    assert report["detail"].endswith(
        f"max|Δ|/max|logit| {report['worst']:.2e} (transformers bfloat16: {report['reference_worst']:.2e})"
        " (prompt lengths 5, 19, 48)"
    ), report["detail"]
    assert "THRESHOLDS" in report["tolerance"]  # the comparator's calibrated table, not a fixed bar


def test_logits_scaled_by_1_03_fail_in_bf16_on_the_logit_scale(tmp_path: Path, bf16_clean: dict) -> None:
    report = check_parity(scaled_adapter(tmp_path, 1.03), TRAINED, dtype="bfloat16")
    assert (report["passed"], report["status"]) == (False, "failed")
    assert re.search(r"FAILED: .*logit scale 1\.0[23]\d\d: \|slope-1\| >", report["detail"]), report["detail"]
    assert report["worst"] > bf16_clean["worst"]
    assert "adapter/reference = 1.03" in report["divergence"]  # where it breaks, and that it is a scale
    assert report["detail"].endswith(f"; {report['divergence']}")
    assert report["first_divergence"]["module"] == "logits"
    # the bisect runs on the longest prompt, the adapter reloaded in float32 (a defect stands out from rounding)
    assert (report["input_length"], report["compared_in"]) == (48, "float32")


def test_a_defect_only_in_bf16_is_located_in_bf16(tmp_path: Path) -> None:
    """Nothing diverges in float32, so the bisect looks again in the adapter's own dtype, and finds the scale there."""
    report = check_parity(scaled_adapter(tmp_path, 1.03, only_in="bfloat16"), TRAINED, dtype="bfloat16")
    assert not report["passed"], report["detail"]
    assert (report["compared_in"], report["first_divergence"]["module"]) == ("bfloat16", "logits"), report["divergence"]


def test_a_float32_adapter_within_rounding_passes_and_x1_001_fails(tmp_path: Path) -> None:
    clean = check_parity(ADAPTERS_DIR / "qwen3.py", TRAINED)
    assert clean["passed"] and clean["reference_worst"] is None and clean["worst"] < 1e-4, clean["detail"]
    assert clean["status"] == "passed" and clean["power"] == {"missed": [], "caught": CAUGHT}
    assert clean["detail"].startswith(
        "passed (catches logits x1.05, layer 1 attention x1.05): "
        "adapter in float32 vs transformers float32, judged against transformers in float64"
    )
    assert clean["detail"].endswith(f"max|Δ|/max|logit| {clean['worst']:.2e} (prompt lengths 5, 19, 48)")
    scaled = check_parity(scaled_adapter(tmp_path, 1.001), TRAINED)
    assert not scaled["passed"]
    assert re.search(r"FAILED: .*logit scale 1\.0010: \|slope-1\| >", scaled["detail"]), scaled["detail"]


def repository_code_copy(tmp_path: Path) -> Path:
    """The trained fixture as a checkpoint whose reference is its repository's code (which must never run)."""
    folder = tmp_path / "remote"
    shutil.copytree(TRAINED, folder)
    config = json.loads((folder / "config.json").read_text())
    config |= {
        "model_type": "qwen3_custom",
        "auto_map": {"AutoConfig": "modeling_custom.CustomConfig", "AutoModelForCausalLM": "modeling_custom.Custom"},
    }
    (folder / "config.json").write_text(json.dumps(config))
    (folder / "modeling_custom.py").write_text("raise SystemExit('repository code ran')\n")  # must never run
    return folder


def test_repository_code_that_may_not_run_is_unverified_not_passed(tmp_path: Path) -> None:
    folder = repository_code_copy(tmp_path)
    report = check_parity(ADAPTERS_DIR / "qwen3.py", folder, dtype="bfloat16")
    assert (report["passed"], report["status"], report["worst"]) == (False, "unverified", None)
    assert (report["dtype"], report["reference_worst"], report["prompts"]) == ("bfloat16", None, [])
    assert f"onboard generate {folder} --parity --trust-remote-code" in report["detail"]  # the command that runs it
    unsandboxed = check_parity(ADAPTERS_DIR / "qwen3.py", folder, policy=RemoteCodePolicy(unsafe_no_sandbox=True))
    assert unsandboxed["status"] == "unverified"  # the user's --unsafe-no-sandbox is kept in the command
    assert f"onboard generate {folder} --parity --trust-remote-code --unsafe-no-sandbox" in unsandboxed["detail"]
