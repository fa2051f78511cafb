"""A reference whose own code fails in the calibration dtype (transformers' XGLM overflows in float64) is a named
error of the golden stage, saying what to do, not an internal error."""

from __future__ import annotations

from pathlib import Path

import pytest

from onboard.errors import OnboardError
from onboard.validate_serving import golden


def test_a_failing_calibration_run_is_a_named_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import onboard.reference

    def overflowing(folder: Path, dtype: str, attn: str = "eager") -> None:
        raise RuntimeError("value cannot be converted to type float without overflow")

    monkeypatch.setattr(onboard.reference, "load_transformers", overflowing)
    with pytest.raises(OnboardError) as caught:
        golden._calibrate(tmp_path, [], "float32", "float64", 5)
    message = caught.value.message
    assert "reference model's own float64 run" in message and "RuntimeError" in message and "float32" in message
    assert "--calibrate" in (caught.value.hint or "")
