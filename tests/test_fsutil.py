"""onboard.fsutil.atomic_write, the one atomic write: old or new content, never half; plain-open permissions;
an OSError becomes an InputError naming the path."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from onboard.errors import InputError
from onboard.fsutil import atomic_write


def test_writes_text_and_bytes_with_plain_open_permissions(tmp_path):
    umask = os.umask(0o022)
    os.umask(umask)
    target = tmp_path / "sub" / "out.json"
    atomic_write(target, "héllo\n")
    assert target.read_bytes() == "héllo\n".encode()
    assert stat.S_IMODE(target.stat().st_mode) == 0o666 & ~umask  # not mkstemp's 0600: goldens are shared files
    atomic_write(target, b"\x00\x01", durable=False)
    assert target.read_bytes() == b"\x00\x01"
    script = tmp_path / "run.sh"
    atomic_write(script, "#!/bin/sh\n", mode=0o755)
    assert stat.S_IMODE(script.stat().st_mode) == 0o755
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["out.json", "run.sh", "sub"]  # no temp file left


def test_writes_a_sequence_of_pieces_in_order(tmp_path):
    target = tmp_path / "pack.bin"
    pieces = [b"\xdf", b"", bytes(range(256)) * 400, b"tail"]  # one piece larger than the write buffer
    atomic_write(target, pieces, durable=False)
    assert target.read_bytes() == b"".join(pieces)
    assert [p.name for p in tmp_path.iterdir()] == ["pack.bin"]
    for whole in (bytearray(b"\x01\x02"), memoryview(b"\x03\x04")):  # bytes-like: one buffer, not a sequence of ints
        atomic_write(target, whole, durable=False)
        assert target.read_bytes() == bytes(whole)


def test_a_failed_write_keeps_the_old_file_and_names_the_path(tmp_path, monkeypatch):
    target = tmp_path / "validation.json"
    target.write_text("old\n")

    def full_disk(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", full_disk)
    with pytest.raises(InputError) as info:
        atomic_write(target, "new\n")
    assert str(target) in info.value.message and "disk is full" in (info.value.hint or "")
    assert target.read_text() == "old\n" and [p.name for p in tmp_path.iterdir()] == ["validation.json"]


def test_permission_hint_names_what_was_refused(tmp_path) -> None:
    """A refused read must not be explained as a refused write (and the other way round)."""
    import errno

    from onboard.fsutil import os_error

    denied = PermissionError(errno.EACCES, "Permission denied")
    read = os_error(denied, tmp_path / "a.json", "read")
    assert "no permission to read there" in read.hint and str(tmp_path / "a.json") in read.message
    assert "no permission to write there" in os_error(denied, tmp_path, "create the registry folder").hint
    assert "no permission to read there" in os_error(denied, tmp_path, "hash the checkpoint files in").hint
    assert "no permission to open there" in os_error(PermissionError(errno.EPERM, "x"), tmp_path, "use").hint
    assert os_error(OSError(errno.ENOSPC, "No space"), tmp_path, "write").hint.startswith("the disk is full")


def test_output_folder_is_made_first_and_removed_again_when_the_command_fails(tmp_path: Path) -> None:
    from onboard.fsutil import output_folder

    target = tmp_path / "a" / "b" / "c"
    with pytest.raises(RuntimeError), output_folder(target) as folder:
        assert folder == target and target.is_dir()  # there before the work starts
        raise RuntimeError("the command failed before writing")
    assert not (tmp_path / "a").exists()  # every folder it made, removed: nothing to mistake for a result

    (tmp_path / "a").mkdir()
    with pytest.raises(RuntimeError), output_folder(target):
        (target / "partial-log.txt").write_text("what the engine said\n")
        raise RuntimeError("failed after writing")
    assert (target / "partial-log.txt").is_file()  # what was written stays, with its folders

    with output_folder(tmp_path / "ok") as folder:
        (folder / "result.json").write_text("{}")
    assert (tmp_path / "ok" / "result.json").is_file()


def test_output_folder_under_a_file_is_an_input_error(tmp_path: Path) -> None:
    from onboard.fsutil import output_folder

    (tmp_path / "f").write_text("x")
    with pytest.raises(InputError, match="cannot create the folder") as info, output_folder(tmp_path / "f" / "out"):
        pass
    assert "a parent of that path is a file" in (info.value.hint or "") or "file is in the way" in (
        info.value.hint or ""
    )
