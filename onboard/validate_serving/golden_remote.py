"""Goldens whose reference is the repository's own code: the whole recording runs in the sandbox worker.

`record_in_worker` is the worker side: the same `golden.record` as for a transformers reference, inside
`remote_code_allowed()`, writing into the worker's temp dir and returning the two files' content as data.
`record_in_sandbox` is the parent side: it checks what came back exactly as a golden folder on disk is checked
(read_golden), names the source and the repository code's hash, and writes the goldens.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any

from onboard import reference
from onboard.errors import InputError
from onboard.reference import Reference, RemoteCodePolicy, remote_code_allowed

WORKER = "onboard.validate_serving.golden_remote:record_in_worker"


def record_in_worker(folder: str, options: dict[str, Any], unsafe_no_sandbox: bool) -> dict[str, Any]:
    """Worker side: golden.record on `folder` with the repository's code as the reference."""
    from onboard.validate_serving.golden import record

    out = Path(tempfile.mkdtemp(prefix="golden-")) / "golden"
    options = {**options, "calibrate": tuple(options.get("calibrate", ()))}
    with remote_code_allowed():
        record(folder, out, policy=RemoteCodePolicy(True, unsafe_no_sandbox), **options)
    return {name: (out / name).read_text(encoding="utf-8") for name in ("MANIFEST.json", "prompts.jsonl")}


def record_in_sandbox(
    source: str, out: Path, folder: Path, ref: Reference, policy: RemoteCodePolicy, rerun: str, options: dict[str, Any]
) -> Any:
    """Parent side of golden.record for a repository-code reference; refuses unless `policy` trusts it."""
    from onboard.validate_serving.golden import GoldenSet, read_golden, write_golden

    refused = ref.refusal(policy, rerun)
    if refused:
        raise InputError(f"{folder}: cannot record goldens: {refused}",
                         f"review the repository's .py files in {folder}, then: {rerun}")  # fmt: skip
    started = time.time()
    files = reference.run_in_sandbox(WORKER, {"folder": str(folder), "options": options,
                                              "unsafe_no_sandbox": policy.unsafe_no_sandbox}, folder, policy)  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="onboard-golden-") as tmp:
        for name, text in files.items():
            if name not in ("MANIFEST.json", "prompts.jsonl") or not isinstance(text, str):
                raise InputError(f"the sandbox worker returned an unexpected golden file {name!r}",
                                 "this is a bug in onboard's golden recording")  # fmt: skip
            (Path(tmp) / name).write_text(text, encoding="utf-8")
        golden = read_golden(Path(tmp))  # what crossed back is checked like any golden folder
    identity = reference.describe(ref, policy, folder)  # computed here: the worker cannot tell how it was isolated
    manifest = {**golden.manifest, "source": source, "reference": {**golden.manifest["reference"], **identity},
                "recorded_seconds": round(time.time() - started, 2)}  # fmt: skip
    write_golden(out, manifest, list(golden.prompts))
    return GoldenSet(out, manifest, golden.prompts)
