"""The worker cannot reach the network, cannot write outside its temp dir, and is stopped at its limits.

Every denial is paired with a control that shows the probe would notice the opposite (unsafe mode connects and
writes), so none of these checks can pass by construction.
"""

from __future__ import annotations

import socket
import time
import uuid
from pathlib import Path

import pytest

from onboard.errors import SandboxError
from onboard.sandbox import Limits, isolation, run_isolated

PROBES = "onboard.sandbox.probes"


@pytest.fixture
def listening_server():  # type: ignore[no-untyped-def]
    """A TCP server on 127.0.0.1 that never accepts by itself: a connection shows up in its backlog."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    server.setblocking(False)
    yield server
    server.close()


def _accepted(server: socket.socket) -> bool:
    try:
        conn, _ = server.accept()
    except BlockingIOError:
        return False
    conn.close()
    return True


def _other_address() -> str:
    """A non-loopback address of this machine if it has one (a route out), else a public one."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect(("192.0.2.1", 9))  # UDP connect sends nothing: it only picks the outgoing interface
            return s.getsockname()[0]
    except OSError:
        return "1.1.1.1"


def test_no_network_from_the_worker(bubblewrap: str, listening_server: socket.socket) -> None:
    port = listening_server.getsockname()[1]
    addresses = [["127.0.0.1", port], [_other_address(), port], ["1.1.1.1", 443], ["10.255.255.1", 80]]
    result = run_isolated(f"{PROBES}:connect", {"addresses": addresses, "timeout_s": 2}, method=bubblewrap)
    assert len(result) == len(addresses)
    assert all(outcome != "connected" for outcome in result.values()), result
    assert not _accepted(listening_server)


def test_control_unsafe_mode_does_reach_the_loopback_server(listening_server: socket.socket) -> None:
    port = listening_server.getsockname()[1]
    with pytest.warns(UserWarning, match="WITHOUT isolation"):
        result = run_isolated(f"{PROBES}:connect", {"addresses": [["127.0.0.1", port]]}, unsafe_no_sandbox=True,
                              method=isolation.UNSAFE)  # fmt: skip
    assert result == {f"127.0.0.1:{port}": "connected"}
    assert _accepted(listening_server)


def _write_targets(tmp_path: Path) -> tuple[Path, list[str]]:
    checkpoint = tmp_path / "ckpt"
    checkpoint.mkdir()
    (checkpoint / "config.json").write_text("{}")
    name = f"onboard-sandbox-probe-{uuid.uuid4().hex}"
    targets = [
        str(checkpoint / name),  # the checkpoint: read-only
        str(checkpoint / "config.json.new"),
        str(tmp_path / name),  # the test's own tmp_path, next to the checkpoint
        str(Path.home() / name),  # the parent's HOME
        str(Path(__file__).parent / name),  # the source tree
    ]
    return checkpoint, targets


def test_no_writes_outside_the_temp_dir(bubblewrap: str, tmp_path: Path) -> None:
    checkpoint, targets = _write_targets(tmp_path)
    result = run_isolated(f"{PROBES}:write", {"paths": targets}, checkpoint=checkpoint, method=bubblewrap)
    assert result.pop("own temp dir") == "written"  # the probe can write, where it is allowed to
    assert set(result) == set(targets)
    assert all(outcome != "written" for outcome in result.values()), result
    assert not any(Path(t).exists() for t in targets)


def test_control_unsafe_mode_does_write(tmp_path: Path) -> None:
    checkpoint, targets = _write_targets(tmp_path)
    with pytest.warns(UserWarning):
        result = run_isolated(f"{PROBES}:write", {"paths": targets[:1]}, checkpoint=checkpoint,
                              unsafe_no_sandbox=True, method=isolation.UNSAFE)  # fmt: skip
    assert result == {targets[0]: "written", "own temp dir": "written"}


def _processes_with(marker: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if marker.encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def test_wall_limit_stops_the_worker_and_what_it_started(bubblewrap: str) -> None:
    marker = f"onboard-sandbox-grandchild-{uuid.uuid4().hex}"
    start = time.monotonic()
    with pytest.raises(SandboxError) as err:
        run_isolated(f"{PROBES}:spawn_and_sleep", {"marker": marker}, limits=Limits(wall_s=3), method=bubblewrap)
    assert err.value.kind == "wall"
    assert "wall-time limit of 3 s" in err.value.message and "Limits.wall_s" in err.value.message
    assert time.monotonic() - start < 30
    deadline = time.monotonic() + 5  # the kernel tears the PID namespace down asynchronously
    while _processes_with(marker) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _processes_with(marker) == []


def test_memory_limit_stops_unbounded_allocation(bubblewrap: str) -> None:
    with pytest.raises(SandboxError) as err:
        run_isolated(f"{PROBES}:allocate_without_bound", limits=Limits(memory_bytes=512 << 20), method=bubblewrap)
    assert err.value.kind == "memory"
    assert "out of memory" in err.value.message and "0.5 GiB" in err.value.message
    assert "Limits.memory_bytes" in err.value.message


def test_cpu_limit_stops_a_busy_loop(bubblewrap: str) -> None:
    with pytest.raises(SandboxError) as err:
        run_isolated(f"{PROBES}:burn_cpu", limits=Limits(cpu_s=1, wall_s=60), method=bubblewrap)
    assert err.value.kind == "cpu"
    assert "CPU-time limit of 1 s" in err.value.message


def test_remote_error_text_comes_back(bubblewrap: str) -> None:
    with pytest.raises(SandboxError) as err:
        run_isolated(f"{PROBES}:fail", {"message": "the repo says no (code 4711)"}, method=bubblewrap)
    assert err.value.kind == "raised"
    assert "ValueError: the repo says no (code 4711)" in err.value.message
    assert "probes.py" in err.value.remote_traceback and "in fail" in err.value.remote_traceback
    assert err.value.hint


@pytest.mark.parametrize(
    "target", ["os:system", "subprocess:run", "tests.sandbox.conftest:require", "onboardx.mod:fn",
               "onboard.sandbox.probes:fail; import os", "onboard.sandbox.probes"],
)  # fmt: skip
def test_targets_outside_onboard_are_refused_before_any_process(target: str, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    import subprocess

    def no_process(*args, **kwargs):  # type: ignore[no-untyped-def]
        raise AssertionError("a worker was started for a refused target")

    monkeypatch.setattr(subprocess, "Popen", no_process)
    with pytest.raises(SandboxError) as err:
        run_isolated(target)
    assert err.value.kind == "refused" and "only functions of the onboard package" in err.value.message


def test_unknown_onboard_function_is_refused_by_the_worker(bubblewrap: str) -> None:
    with pytest.raises(SandboxError) as err:
        run_isolated(f"{PROBES}:no_such_probe", method=bubblewrap)
    assert err.value.kind == "refused" and "no function 'no_such_probe'" in err.value.message
