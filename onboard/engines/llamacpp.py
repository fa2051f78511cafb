"""llama.cpp as an engine, from .venv-llamacpp (scripts/install_llama_cpp.sh: llama-cpp-python built from the
PyPI sdist, the sdist's converter kept under $VENV/share/llama.cpp).

- convert: llama.cpp's own `convert_hf_to_gguf.py`, run with the project's python (it needs torch and
  transformers); its refusals become findings with the fix (converter_findings).
- quantize: `llama_model_quantize` through the bindings with per-tensor overrides (llamacpp_quantize.py).
- serve: llamacpp_server.py on loopback.
Every output is written to a temporary name in the target folder and renamed: never a half-written GGUF.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from onboard import venvs
from onboard.engines.launch import EngineStartError, argv, free_port, serve_process
from onboard.errors import InputError
from onboard.findings import Finding, fatal
from onboard.fsutil import make_dirs

if TYPE_CHECKING:
    from onboard.quantize.plan_file import PlanFile

HERE = Path(__file__).resolve().parent
CONVERTER_TYPES = ("f32", "f16", "bf16", "q8_0")
"""Types the converter writes itself; anything else goes through the quantizer (from the converter's 16-bit file)."""
QUANTIZER_TYPES = ("q4_0", "q4_1", "q5_0", "q5_1", "q2_k", "q3_k_s", "q3_k_m", "q3_k_l", "q4_k_s", "q4_k_m",
                   "q5_k_s", "q5_k_m", "q6_k", "mxfp4_moe")  # fmt: skip
START_TIMEOUT_S = 120.0
CONVERT_TIMEOUT_S = 3600.0


def engine_python() -> Path:
    return venvs.llamacpp() / "bin" / "python"


def converter_dir() -> Path:
    return venvs.llamacpp() / "share" / "llama.cpp"


def available() -> bool:
    return engine_python().is_file() and (converter_dir() / "convert_hf_to_gguf.py").is_file()


def require() -> Path:
    if not available():
        raise EngineStartError(
            f"llama.cpp is not installed ({engine_python()} or {converter_dir() / 'convert_hf_to_gguf.py'} missing)",
            "run scripts/install_llama_cpp.sh (or set ONBOARD_LLAMACPP_VENV to the virtualenv it made)",
        )
    return engine_python()


def first_of(items: Sequence[object]) -> str:
    """The first of `items`, and how many more there are."""
    return f"{items[0]}" + (f" (+{len(items) - 1} more)" if len(items) > 1 else "")


@dataclass
class Conversion:
    path: Path | None
    findings: list[Finding] = field(default_factory=list)


def _partial(out: Path) -> Path:
    """A temporary name next to `out` (the final rename is atomic), with a plain file's mode."""
    fd, name = tempfile.mkstemp(prefix=f".{out.name}.", suffix=".partial", dir=out.parent)
    os.close(fd)
    mask = os.umask(0o022)
    os.umask(mask)
    os.chmod(name, 0o666 & ~mask)
    return Path(name)


def convert(source: Path, out: Path, outtype: str, *, pre_tokenizer: str | None = None) -> Conversion:
    """llama.cpp's converter on the local checkpoint `source`; `out` appears only when it succeeded.
    `pre_tokenizer`: the name to write when the converter does not know the tokenizer's hash."""
    require()
    make_dirs(out.parent)
    tmp = _partial(out)
    named = ["--pre-tokenizer", pre_tokenizer] if pre_tokenizer else []
    script = [sys.executable, str(HERE / "llamacpp_convert.py"), str(converter_dir()), *named, "--"]
    cmd = [*script, str(source), *argv({"--outtype": outtype, "--outfile": tmp})]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_VERBOSITY": "error"}
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=CONVERT_TIMEOUT_S)
        log = done.stdout + done.stderr
        if done.returncode != 0:
            return Conversion(None, converter_findings(log, source))
        os.replace(tmp, out)
        return Conversion(out)
    except subprocess.TimeoutExpired:
        finding = fatal(
            "gguf-convert-failed",
            f"llama.cpp's converter did not finish within {CONVERT_TIMEOUT_S:g} s",
            "a checkpoint this size needs more time or memory; run the converter by hand to see where it stops",
        )
        return Conversion(None, [finding])
    finally:
        tmp.unlink(missing_ok=True)


CHKHSH = re.compile(r"chkhsh:\s*([0-9a-f]{64})")
UNSUPPORTED = re.compile(r"Model (\S+) is not supported|Architecture '?([^'\s]+)'? not supported")


def converter_findings(log: str, source: Path) -> list[Finding]:
    """The converter's refusals as findings with the fix; anything else: its last lines."""
    if "pre-tokenizer was not recognized" in log:
        match = CHKHSH.search(log)
        digest = match.group(1) if match else "unknown"
        name, family = identified_family(source)
        now = (
            f"For this conversion: rerun `onboard convert gguf` with `--pre-tokenizer {name}` (onboard's "
            "identification; `onboard validate SOURCE --engine llama.cpp --gguf F` then checks llama.cpp's ids "
            "against transformers'). "
            if name
            else ""
        )
        return [
            fatal(
                "gguf-unknown-pre-tokenizer",
                f"llama.cpp's converter does not know this tokenizer's pre-tokenizer (chkhsh {digest}); "
                f"onboard identifies it as: {family}",
                f"{now}For llama.cpp itself: add chkhsh {digest} to get_vocab_base_pre() in convert_hf_to_gguf "
                "(conversion/base.py; convert_hf_to_gguf_update.py generates the entry from the repo) under the "
                "llama.cpp pre-tokenizer whose regex this tokenizer uses, and the same name to llama-vocab.cpp "
                "if it is new; or use a llama.cpp release that knows it. `onboard verify-tokenizer SOURCE` "
                "shows the regex and the fingerprint",
                file="tokenizer.json",
            )
        ]
    match = UNSUPPORTED.search(log)
    if match:
        arch = match.group(1) or match.group(2)
        return [
            fatal(
                "gguf-unsupported-architecture",
                f"llama.cpp's converter does not support architecture {arch} (config.json architectures)",
                "llama.cpp needs a model class for it (conversion/*.py, @ModelBase.register) and the runtime "
                "graph (src/models/); until a release has both, serve this model with vLLM "
                "(onboard validate SOURCE --engine vllm)",
                file="config.json",
            )
        ]
    last = "\n".join(line for line in log.strip().splitlines()[-12:])
    return [
        fatal(
            "gguf-convert-failed",
            f"llama.cpp's converter failed:\n{last}",
            "the converter's message above names the tensor or field it could not handle",
        )
    ]


def identified_family(source: Path) -> tuple[str | None, str]:
    """onboard's own identification of the pre-tokenizer (its chkhsh table, then the tokenizer class): the llama.cpp
    name to write (None when neither tells) and the identification in words."""
    from onboard.verify_tokenizer.fingerprint import fingerprint
    from onboard.verify_tokenizer.patterns import name_for_tokenizer_class
    from onboard.verify_tokenizer.subject import load_subject

    try:
        subject = load_subject(source)
    except InputError as exc:
        return None, f"unknown (the tokenizer does not load: {exc.message})"
    fp = fingerprint(subject)
    if fp.family:
        return fp.family, f"{fp.family} (chkhsh {fp.chkhsh}, as {fp.reference_repo})"
    by_class = name_for_tokenizer_class(subject.class_name)
    why = f"; its class {subject.class_name} implies {by_class}" if by_class else ""
    return by_class, f"no known family (chkhsh {fp.chkhsh} is in no llama.cpp release onboard knows){why}"


@dataclass(frozen=True)
class Overrides:
    tensor_types: tuple[tuple[str, str], ...] = ()
    token_embedding_type: str | None = None
    output_tensor_type: str | None = None


TENSOR_TYPE = re.compile(r"--tensor-type '([^=']+)=([^']+)'")
FLAG = re.compile(r"--(token-embedding-type|output-tensor-type) (\S+)")


def plan_overrides(plan: PlanFile, folder: Path) -> Overrides:
    """The quantize-plan's per-tensor llama.cpp types, from the same mapping that writes its llama-quantize.sh."""
    from onboard.quantize.emit import checkpoint_tensors, llama_cpp, tensors_by_unit

    units = {u.unit: u.format for u in plan.units}
    text = llama_cpp(units, tensors_by_unit(checkpoint_tensors(folder)), str(folder)).text
    flags = dict(FLAG.findall(text))
    return Overrides(
        tuple(TENSOR_TYPE.findall(text)), flags.get("token-embedding-type"), flags.get("output-tensor-type")
    )


UNQUANTIZED_TYPES = ("f32", "f16", "bf16")
PLAN_BASE_TYPE = "q8_0"
"""The file type a plan is quantized under. llama.cpp applies per-tensor types only under a quantized file type
(llama_model_quantize_impl), and skips a tensor's override where the file type itself falls back on that tensor's
rows (a K-quant on rows not a multiple of 256): Q8_0's blocks of 32 fit every row a plan quantizes."""


def types_not_as_planned(gguf: Path, overrides: Overrides) -> list[str]:
    """Tensors the GGUF stores in another type than the plan rounded them to (the override's type, or llama.cpp's
    fallback where a K-quant does not fit the row), one line each; a pattern that matches no tensor is one too."""
    from gguf import GGUFReader

    from onboard.quantize.formats import FORMATS

    tensors = GGUFReader(str(gguf)).tensors
    wanted = list(overrides.tensor_types)
    if overrides.token_embedding_type:
        wanted.append((re.escape("token_embd.weight"), overrides.token_embedding_type))
    if overrides.output_tensor_type and any(t.name == "output.weight" for t in tensors):  # tied: no output tensor
        wanted.append((re.escape("output.weight"), overrides.output_tensor_type))
    wrong = []
    for pattern, kind in wanted:
        named = [t for t in tensors if re.fullmatch(pattern, t.name)]
        if not named:
            wrong.append(f"no tensor matches the plan's {pattern} (planned {kind})")
        for tensor in named:
            shape = tuple(int(d) for d in reversed(tensor.shape))  # GGUF lists ne0 (the row length) first
            fmt = FORMATS.get(kind.lower())
            expected = str(fmt.resolve(shape).ggml_type) if fmt is not None else kind
            if tensor.tensor_type.name.lower() != expected.lower():
                wrong.append(f"{tensor.name}: stored as {tensor.tensor_type.name}, the plan rounded it as {expected}")
    return wrong


def quantize(src: Path, out: Path, ftype: str, overrides: Overrides = Overrides()) -> Path:
    """llama_model_quantize(src -> out) with the overrides; `out` appears only when it succeeded."""
    interpreter = require()
    tmp = _partial(out)
    spec = {"input": str(src), "output": str(tmp), "ftype": ftype, **asdict(overrides)}  # tuples become lists
    spec_file = tmp.with_suffix(".json")
    spec_file.write_text(json.dumps(spec), encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(converter_dir() / "gguf-py")}
    try:
        cmd = [str(interpreter), str(HERE / "llamacpp_quantize.py"), str(spec_file)]
        done = subprocess.run(cmd, capture_output=True, text=True, env=env)
        if done.returncode != 0:
            raise EngineStartError(
                f"llama.cpp's quantizer failed on {src.name} ({ftype}):\n{(done.stdout + done.stderr).strip()[-1500:]}",
                "check the type names (ggml names: q8_0, q4_K, f16 ...) and the plan",
            )
        os.replace(tmp, out)
        return out
    finally:
        tmp.unlink(missing_ok=True)
        spec_file.unlink(missing_ok=True)


@contextlib.contextmanager
def serve(gguf: Path, name: str, log: Path, *, port: int | None = None, prompt_cache: bool = False) -> Iterator[str]:
    """llamacpp_server.py serving `gguf` as `name` on loopback; yields its URL; stopped on exit. `prompt_cache`:
    a generation reuses the KV cache of the prefix it shares with the previous one (llama-server's cache_prompt) and
    reports it as usage.prompt_tokens_details.cached_tokens; off, every request starts cold."""
    interpreter = require()
    port = port or free_port()
    # ggml's worker threads spin: on a small shared machine one thread measures the engine better than all cores.
    cores = os.cpu_count() or 1
    threads = str(1 if cores <= 2 else min(8, cores // 2))
    flags = {"--model": gguf, "--name": name, "--port": port, "--n-ctx": 2048, "--threads": threads}
    cmd = [str(interpreter), str(HERE / "llamacpp_server.py"), *argv(flags), *(["--prompt-cache"] * prompt_cache)]
    with serve_process(
        cmd, port=port, ready_path="/health", log=log, name="llama.cpp", timeout_s=START_TIMEOUT_S
    ) as url:
        yield url


def tokenize(url: str, texts: Sequence[str]) -> list[list[int]]:
    """Ids from the served GGUF's own vocabulary (llama.cpp's tokenizer), no BOS, special tokens not parsed."""
    import urllib.request

    out = []
    for text in texts:
        body = json.dumps({"content": text, "add_special": False, "parse_special": False}).encode()
        req = urllib.request.Request(url + "/tokenize", data=body, headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=60) as resp:  # noqa: S310 (loopback URL we built)
            out.append([int(t) for t in json.load(resp)["tokens"]])
    return out


def gguf_file_type(path: Path) -> tuple[int, str]:
    """(general.file_type, its llama_ftype name) read with the gguf package; a file without it is an InputError."""
    import gguf

    try:
        reader = gguf.GGUFReader(str(path))
    except (OSError, ValueError) as exc:
        raise InputError(f"{path}: not a readable GGUF file ({exc})", "pass a .gguf written by llama.cpp") from exc
    field = reader.fields.get("general.file_type")
    if field is None:
        raise InputError(f"{path}: no general.file_type in the GGUF header", "re-convert with llama.cpp's converter")
    code = int(field.parts[field.data[0]][0])
    try:
        name = gguf.LlamaFileType(code).name
    except ValueError:
        name = f"type {code}"
    return code, name
