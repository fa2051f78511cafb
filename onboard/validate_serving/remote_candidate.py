"""`onboard validate --candidate reference` when the reference is the repository's own code: the whole validation
(the self-check of the harness) runs in the sandbox worker, and only its result crosses back.

The goldens travel as data (their two files' text): the worker sees the checkpoint, not the user's workspace.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from onboard import reference
from onboard.errors import InputError
from onboard.reference import RemoteCodePolicy, remote_code_allowed

WORKER = "onboard.validate_serving.remote_candidate:validate_in_worker"


def validate_in_worker(folder: str, golden_files: dict[str, str], dtype: str, performance: bool) -> dict[str, Any]:
    """Worker side: validate transformers-with-the-repo's-code (reference-as-candidate) against the goldens."""
    from onboard.validate_serving.golden import golden_from_texts
    from onboard.validate_serving.run import validate
    from onboard.validate_serving.runtime import load_candidate

    golden = golden_from_texts(golden_files, Path(tempfile.mkdtemp(prefix="golden-")))
    with remote_code_allowed():
        engine = load_candidate(Path(folder), dtype, runtime="reference")
    try:
        result = validate(golden, engine, source=folder, performance=performance, checkpoint=Path(folder))
    finally:
        engine.close()
    return json.loads(json.dumps(result, default=str))  # plain JSON data: all that may cross back


def validate_in_sandbox(
    golden: Any, folder: Path, dtype: str, policy: RemoteCodePolicy, rerun: str, performance: bool
) -> dict[str, Any]:
    """Parent side; refuses unless `policy` trusts the repository's code."""
    refused = reference.reference_for(folder).refusal(policy, rerun)
    if refused:
        raise InputError(
            f"{folder}: the reference self-check cannot run: {refused}",
            f"review the repository's .py files in {folder}, then: {rerun}",
        )
    from onboard.validate_serving.golden import golden_texts

    kwargs = {
        "folder": str(folder),
        "golden_files": golden_texts(golden.folder),
        "dtype": dtype,
        "performance": performance,
    }
    result = reference.run_in_sandbox(WORKER, kwargs, folder, policy)
    if not isinstance(result, dict) or not isinstance(result.get("passed"), bool):
        raise InputError("the sandbox worker returned no validation result", "this is a bug in onboard's validate")
    return result
