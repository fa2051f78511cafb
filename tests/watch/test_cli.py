"""`onboard queue …`, `onboard webhook serve` and `onboard watch` as users run them: exit codes, Error:/Hint:."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.watch.helpers import recorder_command, sha_for

SHA = sha_for("org/m")


def onboard(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    # cwd: a folder without onboarding/registry.sqlite3, so no stray promotion registry answers
    return subprocess.run([sys.executable, "-m", "onboard", *args], capture_output=True, text=True, timeout=60,
                          env=dict(os.environ, **(env or {})), cwd=Path(__file__).parent)  # fmt: skip


def test_queue_add_list_work_retry(tmp_path: Path) -> None:
    db, log = str(tmp_path / "q.sqlite"), tmp_path / "calls.jsonl"
    assert "enqueued" in onboard("queue", "add", "org/m", SHA, "--db", db).stderr
    assert "already queued" in onboard("queue", "add", "org/m", SHA, "--db", db).stderr
    listed = json.loads(onboard("queue", "list", "--json", "--db", db).stdout)
    assert listed["counts"]["queued"] == 1 and listed["jobs"][0]["revision"] == SHA

    not_failed = onboard("queue", "retry", "1", "--db", db)
    assert not_failed.returncode == 2 and "Error: job 1 is queued, not failed" in not_failed.stderr

    # exit 1 = checks failed: a verdict, recorded as failed without retries; `queue work --once` then exits 1
    env = {"RECORD_EXITS": "1,0", "ONBOARD_RUN_COMMAND": recorder_command(log)}
    work = onboard("queue", "work", "--once", "--json", "--db", db, env=env)
    assert work.returncode == 1, work.stderr
    assert [(j["state"], j["exit_code"]) for j in json.loads(work.stdout)] == [("failed", 1)]

    assert "requeued 1 job(s): 1" in onboard("queue", "retry", "--all-failed", "--db", db).stderr
    assert onboard("queue", "work", "--once", "--db", db, env=env).returncode == 0
    human = onboard("queue", "list", "--db", db).stderr
    assert "done" in human and "org/m" in human


def test_usage_errors_are_clean(tmp_path: Path) -> None:
    db = str(tmp_path / "q.sqlite")
    no_secret = onboard("webhook", "serve", "--secret-env", "NO_SUCH_VAR_FOR_TESTS", "--db", db)
    assert no_secret.returncode == 2 and "Error: $NO_SUCH_VAR_FOR_TESTS is empty or unset" in no_secret.stderr
    assert "Hint:" in no_secret.stderr and "Traceback" not in no_secret.stderr

    bad_cmd = onboard("queue", "work", "--once", "--db", db, "--run-command", "echo hello")
    assert bad_cmd.returncode == 2 and "no {repo} placeholder" in bad_cmd.stderr

    bad_repo = onboard("queue", "add", "../x", SHA, "--db", db)
    assert bad_repo.returncode == 2 and "not a hub model id" in bad_repo.stderr

    no_token = onboard("queue", "work", "--once", "--db", db, "--dispatch-github", "acme/x",
                       "--github-token-env", "NO_SUCH_TOKEN_FOR_TESTS")  # fmt: skip
    assert no_token.returncode == 2 and "NO_SUCH_TOKEN_FOR_TESTS is empty" in no_token.stderr


def test_commands_are_listed_and_light() -> None:
    listed = onboard("--help").stdout
    assert all(name in listed for name in ("watch", "webhook", "queue"))
    probe = ("import sys; from onboard.cli import queue_cmd, watch_cmd, webhook_cmd; "
             "print([m for m in ('torch', 'transformers', 'triton', 'huggingface_hub') if m in sys.modules])")  # fmt: skip
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60).stdout
    assert out.strip() == "[]"
