"""The loopback server launcher without an engine: a taken port and a missing engine are errors that say what to do;
the process group is stopped (the server's own child too) on normal exit and when the block raises."""

from __future__ import annotations

import os
import socket
import sys
import time
from pathlib import Path

import pytest

from onboard.engines.launch import EngineStartError, check_port, free_port, serve_process

# A tiny HTTP server that first starts a child of its own (like vLLM's engine core), then answers /health.
SERVER = """
import http.server, subprocess, sys
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
open(sys.argv[2], "w").write(str(child.pid))
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.end_headers(); self.wfile.write(b"ok")
    def log_message(self, *a): pass
http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
"""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie (exited, not yet reaped by its parent) counts as gone
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False


def _gone(pid: int, timeout_s: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not _alive(pid):
            return True
        time.sleep(0.05)
    return False


def test_taken_port_is_an_error_naming_it() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(EngineStartError) as exc_info:
            check_port(port)
    assert f"port {port} on 127.0.0.1 is taken" in exc_info.value.message
    assert "--engine-port" in (exc_info.value.hint or "")


@pytest.mark.parametrize("fail", [False, True])
def test_process_group_stopped_on_exit_and_on_error(tmp_path: Path, fail: bool) -> None:
    port, pid_file = free_port(), tmp_path / "child.pid"
    cmd = [sys.executable, "-c", SERVER, str(port), str(pid_file)]
    with pytest.raises(RuntimeError) if fail else _nothing():
        with serve_process(cmd, port=port, ready_path="/health", log=tmp_path / "log", name="test", timeout_s=30):
            child = int(pid_file.read_text())
            assert _alive(child)
            if fail:
                raise RuntimeError("the validate run failed")
    assert _gone(child), "the server's child outlived the block"
    check_port(port)  # free again: the server is gone


def test_server_that_exits_is_reported_with_its_log(tmp_path: Path) -> None:
    cmd = [sys.executable, "-c", "import sys; print('cannot load model.gguf'); sys.exit(3)"]
    with pytest.raises(EngineStartError) as exc_info:
        with serve_process(cmd, port=free_port(), ready_path="/health", log=tmp_path / "log", name="llama.cpp",
                           timeout_s=30):  # fmt: skip
            pass
    assert "exited with code 3" in exc_info.value.message and "cannot load model.gguf" in exc_info.value.message


def test_missing_engine_names_the_install_script(tmp_path: Path, monkeypatch, capsys) -> None:
    from onboard.cli import main

    monkeypatch.setenv("ONBOARD_LLAMACPP_VENV", str(tmp_path / "absent"))
    fixture = Path(__file__).resolve().parents[1] / "fixtures" / "trained-qwen3"
    with pytest.raises(SystemExit) as exit_info:
        main(["convert", "gguf", str(fixture), "--out", str(tmp_path / "x.gguf")])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and "llama.cpp is not installed" in err
    assert "Hint: run scripts/install_llama_cpp.sh" in err


class _nothing:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> bool:
        return False
