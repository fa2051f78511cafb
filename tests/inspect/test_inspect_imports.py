"""Local inspect stays close to a bare header parse (issue 12 §2): its start-up imports no numpy and no torch.

numpy's import alone was ~0.1-0.2 s of a whole-process `onboard inspect` of a 671B checkpoint whose bare header parse
takes ~0.1 s; the TensorIndex groups tensors with C-level sorts and slices instead. hashlib (OpenSSL, ~3.5 ms) is
loaded only by what hashes (the checkpoint fingerprint), not by the modules inspect shares with it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TRAINED = ROOT / "tests" / "fixtures" / "trained-qwen3"

PROBE = """
import json, sys
from onboard.cli import main
sys.argv = ["onboard", "inspect", sys.argv[1], "--json"]
try:
    main()
except SystemExit:
    pass
heavy = sorted(m for m in ("numpy", "torch", "transformers", "concurrent.futures", "hashlib") if m in sys.modules)
sys.stderr.write("HEAVY=" + json.dumps(heavy) + "\\n")
"""


def test_local_inspect_imports_no_numpy_or_torch() -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}
    r = subprocess.run([sys.executable, "-c", PROBE, str(TRAINED)], capture_output=True, text=True, env=env,
                       timeout=120, cwd=ROOT)  # fmt: skip
    profile = json.loads(r.stdout)
    assert profile["model_type"] == "qwen3" and profile["parameters"]["total"] > 0
    heavy = json.loads(next(line for line in r.stderr.splitlines() if line.startswith("HEAVY="))[len("HEAVY=") :])
    assert heavy == [], f"imported on the local inspect path: {heavy}"
