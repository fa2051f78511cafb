"""scripts/fetch_test_data.py against the loopback server: pinned files by sha256, retries, refusals, a cache that is
complete only when every file is there; and, with the real manifest, the real-data tests run on what it fetched."""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from scripts import fetch_test_data as fetch
from tests.ci import NOWHERE, ONLY_NEEDING_ENV, REPO
from tests.hubserver import HubServer

RAW = r"^/(?P<repo>[^/]+/[^/]+)/(?P<revision>[0-9a-f]{40})/(?P<path>.+)$"
REV = "a" * 40


def _serve_raw(server: HubServer, files: dict[tuple[str, str, str], bytes]) -> None:
    """GitHub's raw layout, /OWNER/REPO/REVISION/PATH, answered from `files`."""

    def handler(h, match: re.Match[str]) -> None:  # type: ignore[no-untyped-def]
        body = files.get((match["repo"], match["revision"], match["path"]))
        if body is None:
            h.send_error_code(404, "EntryNotFound")
            return
        h.send_response(200)
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        h.wfile.write(body)

    server.add_route("GET", RAW, handler)


def _manifest(tmp_path: Path, files: dict[str, bytes], **extra: dict) -> Path:
    entries = [{"path": path, "source": "org/repo", "source_path": f"src/{path}",
                "sha256": hashlib.sha256(body).hexdigest(), "size": len(body), **extra.get(path, {})}
               for path, body in files.items()]  # fmt: skip
    doc = {"sources": {"org/repo": {"licence": "MIT", "what": "test", "revision": REV}}, "files": entries}
    path = tmp_path / "manifest.json"
    path.write_text(json.dumps(doc))
    return path


FILES = {"a/config.json": b'{"x": 1}', "a/b/tokenizer.json": b"{}" * 1000, "c.jinja": "{{ 'é' }}".encode()}


def test_fetch_checks_each_file_and_keeps_what_it_has(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fetch, "BACKOFF_S", 0.01)
    manifest = _manifest(tmp_path, FILES)
    with HubServer() as server:
        _serve_raw(server, {("org/repo", REV, f"src/{p}"): b for p, b in FILES.items()})
        server.add_fault("c.jinja", status=503, times=2)  # retried with backoff
        root = tmp_path / "cache"
        assert fetch.fetch(root, server.url, manifest, log=lambda _m: None) == (3, 0)
        assert fetch.complete_cache(root, manifest) == root / "files"
        assert {p: (root / "files" / p).read_bytes() for p in FILES} == FILES
        asked = server.stats.count("GET")
        assert fetch.fetch(root, server.url, manifest, log=lambda _m: None) == (0, 3)  # nothing fetched again
        assert server.stats.count("GET") == asked
        (root / "files" / "a/config.json").write_bytes(b"damaged")
        assert fetch.fetch(root, server.url, manifest, log=lambda _m: None) == (1, 2)
        assert (root / "files" / "a/config.json").read_bytes() == FILES["a/config.json"]


def test_wrong_bytes_and_missing_files_are_named_and_the_cache_is_not_complete(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    manifest = _manifest(tmp_path, FILES)
    served = {("org/repo", REV, f"src/{p}"): b for p, b in FILES.items()}
    served[("org/repo", REV, "src/a/config.json")] = b'{"x": 2}'
    del served[("org/repo", REV, "src/c.jinja")]
    monkeypatch.setattr(fetch, "MANIFEST", manifest)
    with HubServer() as server:
        _serve_raw(server, served)
        root = tmp_path / "cache"
        assert fetch.main(["--cache", str(root), "--mirror", server.url]) == 1
    err = capsys.readouterr().err
    assert "Error: 2 of 3 files not fetched" in err and "Hint: check the network" in err
    assert "the manifest pins" in err and "for a/config.json" in err  # the path the tests read, both hashes
    assert "src/c.jinja: HTTP 404" in err
    assert fetch.complete_cache(root, manifest) is None
    assert (root / "files" / "a/b/tokenizer.json").read_bytes() == FILES["a/b/tokenizer.json"]  # kept for next time
    assert not (root / "files" / "a/config.json").exists()


def test_a_manifest_path_outside_the_data_folder_is_refused(tmp_path: Path) -> None:
    manifest = _manifest(tmp_path, {"../outside.json": b"{}"})
    with pytest.raises(fetch.FetchError, match="leaves the data folder"):
        fetch.read_manifest(manifest)
    (tmp_path / "broken.json").write_text("{")
    with pytest.raises(fetch.FetchError, match="not a readable test-data manifest"):
        fetch.read_manifest(tmp_path / "broken.json")


@pytest.mark.slow
def test_the_real_data_tests_run_on_what_the_script_fetched(shared_data: Path, tmp_path: Path) -> None:
    """The real manifest, served from the data beside the clone as its sources serve it; then every real-data test
    (the engines' aside: their own tests run them) passes on the fetched cache alone, none skipped."""
    entries = fetch.read_manifest()
    with HubServer() as server:
        _serve_raw(server, {(e.repo, e.revision, e.source_path): (shared_data / e.path).read_bytes() for e in entries})
        cache = tmp_path / "cache"
        done = subprocess.run([sys.executable, "scripts/fetch_test_data.py", "--mirror", server.url, "--cache",
                               str(cache)], cwd=REPO, capture_output=True, text=True, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert f"test data: {len(entries)} fetched" in done.stdout
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_") and k != "CI"}
    env.update({fetch.CACHE_ENV: str(cache), "ONBOARD_SHARED_DATA": NOWHERE, ONLY_NEEDING_ENV: "real-data"})
    tests = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist", "-o",
                            "addopts=", "-rs", "-m", "not llamacpp and not vllm", f"--basetemp={tmp_path / 'tmp'}",
                            f"--ignore={Path(__file__).relative_to(REPO)}", "tests"], cwd=REPO, env=env, capture_output=True, text=True, timeout=1200)  # fmt: skip
    tail = (tests.stdout + tests.stderr)[-3000:]
    assert tests.returncode == 0, tail
    summary = tests.stdout.strip().splitlines()[-1]
    assert "passed" in summary and "skipped" not in summary and "deselected" in summary, summary


def test_every_data_file_a_test_names_is_in_the_manifest() -> None:
    """A test that names a file of the real data (a string literal such as "llamacpp/templates/GLM-4.6.jinja") finds
    it in a fetched cache only if the manifest lists it: the slow test above would fail on the fetched cache alone."""
    manifest = json.loads((REPO / "tests" / "real_data" / "manifest.json").read_text())
    listed = {f["path"] for f in manifest["files"]}
    tops = {p.split("/", 1)[0] for p in listed}
    folders = "|".join(map(re.escape, sorted(tops)))
    literal = re.compile(rf"""["']((?:{folders})/[\w.+/-]+\.(?:jinja2?|json|model|txt|tiktoken|gguf|inp|out|safetensors))["']""")
    named = {(m.group(1), path.relative_to(REPO).as_posix()) for path in (REPO / "tests").rglob("*.py")
             for m in literal.finditer(path.read_text(encoding="utf-8"))}  # fmt: skip
    unlisted = sorted((name, where) for name, where in named if name not in listed)
    assert len(named) > 50 and not unlisted, f"add to tests/real_data/manifest.json: {unlisted[:10]}"
