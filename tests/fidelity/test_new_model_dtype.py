"""new-model --dtype: the candidate's dtype, by default the checkpoint's stored one for an endpoint."""

from __future__ import annotations

import json
import subprocess
import sys

from onboard.pipeline.stages import RunContext


def test_served_dtype_is_the_flag_else_the_stored_dtype_for_an_endpoint_else_float32(tmp_path) -> None:
    ctx = RunContext("org/model", None, "org__model", tmp_path, tmp_path)
    profile = tmp_path / "profile.json"
    profile.write_text(json.dumps({"config_dtype": "bfloat16"}))
    assert ctx.served_dtype == "float32"  # the in-process adapter on CPU
    ctx.endpoint = "http://127.0.0.1:8000/v1"
    assert ctx.served_dtype == "bfloat16"  # what an engine loads by default
    profile.write_text(json.dumps({"config_dtype": None, "parameters": {"by_dtype": {"F16": 10, "F32": 2}}}))
    assert ctx.served_dtype == "float16"  # no dtype in config.json: the headers' majority
    ctx.dtype = "float32"
    assert ctx.served_dtype == "float32"


def test_an_unknown_dtype_is_a_usage_error() -> None:
    r = subprocess.run([sys.executable, "-m", "onboard", "new-model", "x", "--dtype", "int3"],
                       capture_output=True, text=True)  # fmt: skip
    assert r.returncode == 2 and "--dtype" in r.stderr
