"""Stages hand typed data to each other (issue 12 §3): new-model's generate stage builds the adapter from the inspect
stage's profile.json (a ModelProfile), never by inspecting the checkpoint again; parity runs on the download."""

from __future__ import annotations

from pathlib import Path

from onboard.pipeline.stages import RunContext, run_generate
from onboard.profile import ModelProfile


def test_generate_stage_reads_the_inspect_stage_profile(tmp_path, monkeypatch) -> None:
    import onboard.generate_adapter.search as search
    import onboard.inspect_checkpoint as inspect_checkpoint
    from tests.tiny.factory import make_tiny_checkpoint

    checkpoint = make_tiny_checkpoint("qwen3", tmp_path / "ckpt")
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    profile = inspect_checkpoint.inspect(str(checkpoint))
    (run_dir / "profile.json").write_text(profile.to_json())

    def no_second_inspect(*args, **kwargs):
        raise AssertionError("generate inspected the checkpoint again instead of reading profile.json")

    checked: list[Path] = []

    def parity_stand_in(adapter, folder, *args, **kwargs):  # parity's own tests cover the verdict; here: where it runs
        checked.append(Path(folder))
        return {"passed": True, "status": "passed", "detail": "stand-in"}

    monkeypatch.setattr(inspect_checkpoint, "inspect", no_second_inspect)
    monkeypatch.setattr(search, "check_parity", parity_stand_in)  # generate's parity runs through the search
    ctx = RunContext("ORG/NAME", None, "ORG__NAME", run_dir, tmp_path, local_dir=checkpoint)
    result = run_generate(ctx)
    assert result["model_type"] == "qwen3" and (run_dir / "generated/adapters/qwen3.py").is_file()
    assert checked == [checkpoint]
    assert ModelProfile.from_json((run_dir / "profile.json").read_text()).model_type == result["model_type"]
