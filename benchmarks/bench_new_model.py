"""`onboard new-model` on the bundled demo checkpoint: cold (empty workspace) vs every stage cached.

Targets (issue 6): cold ≤ 60 s on a 2-core machine, cached ≤ 5 s. Both runs are whole `onboard` processes, so
interpreter and import start-up count, as they do for a user.

    .venv/bin/python benchmarks/bench_new_model.py [--keep DIR]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DEMO = REPO / "examples" / "demo-qwen3"


def run(workspace: Path) -> tuple[float, int]:
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "onboard", "new-model", str(DEMO), "--workspace", str(workspace)],
                          capture_output=True, text=True, env=env)  # fmt: skip
    return time.perf_counter() - start, proc.returncode


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", type=Path, help="workspace to use and keep (default: a temporary folder)")
    args = parser.parse_args()
    if not (DEMO / "model.safetensors").exists():
        subprocess.run([sys.executable, str(REPO / "scripts" / "make_demo_checkpoint.py")], check=True)
    workspace = args.keep or Path(tempfile.mkdtemp(prefix="onboard-bench-"))
    cold, rc_cold = run(workspace)
    cached, rc_cached = run(workspace)
    print(f"demo checkpoint: {DEMO} (workspace {workspace}); cores: {os.cpu_count()}")
    print(f"cold run     {cold:7.1f} s  (exit {rc_cold})  target <= 60 s   ratio cold/target = {cold / 60:.2f}")
    print(f"cached rerun {cached:7.1f} s  (exit {rc_cached})  target <= 5 s    ratio cached/target = {cached / 5:.2f}")
    print(f"cached/cold = {cached / cold:.3f}")


if __name__ == "__main__":
    main()
