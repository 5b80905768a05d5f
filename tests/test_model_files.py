"""The packaged offline model: locate, verify, assemble, CLI."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

from indexer.embedding import model_files as mf

REPO = Path(__file__).resolve().parent.parent


def test_assemble_gives_the_five_verified_files(tmp_path: Path) -> None:
    folder = mf.assemble(tmp_path / "models")
    assert folder == tmp_path / "models" / mf.FOLDER_NAME
    for name, sha in mf.FILE_SHA256.items():
        assert (folder / name).is_file()
        assert mf.sha256_file(folder / name) == sha
    assert mf.FILE_SHA256["model.onnx"] == mf.MODEL_ONNX_SHA256 != mf.ONNX_SHA256  # the int8-table rewrite
    assert json.loads((folder / "tokenizer_config.json").read_text())["model_max_length"] == 256
    manifest = json.loads((folder / mf.MANIFEST).read_text())
    assert manifest["fingerprint"] == mf.FINGERPRINT
    # No temp folders left behind; a second call re-uses the folder.
    assert [p.name for p in (tmp_path / "models").iterdir()] == [mf.FOLDER_NAME]
    before = (folder / "model.onnx").stat().st_ino
    assert mf.assemble(tmp_path / "models") == folder
    assert (folder / "model.onnx").stat().st_ino == before


def test_packaged_sha256_matches_the_pinned_one() -> None:
    dist = metadata.distribution(mf.ONNX_PACKAGE)
    init = Path(str(dist.locate_file(f"{mf.ONNX_MODULE}/__init__.py")))
    assert mf._packaged_onnx_sha256(init) == mf.ONNX_SHA256
    sources = mf.locate_sources()
    assert set(sources) == set(mf.MODEL_FILES)


def test_corrupted_copy_is_rejected_then_repaired(tmp_path: Path) -> None:
    folder = mf.assemble(tmp_path)
    onnx = folder / "model.onnx"
    data = bytearray(onnx.read_bytes())
    data[len(data) // 2] ^= 0xFF
    onnx.write_bytes(bytes(data))
    with pytest.raises(mf.ModelFilesError) as ei:
        mf.verify_folder(folder)
    msg = str(ei.value)
    assert "model.onnx" in msg and "sha256" in msg and mf.MODEL_ONNX_SHA256 in msg
    assert "check" in msg  # says what to run
    # assemble() replaces the corrupt copy with a good one.
    assert mf.assemble(tmp_path) == folder
    mf.verify_folder(folder)


def test_missing_file_is_reported(tmp_path: Path) -> None:
    folder = mf.assemble(tmp_path)
    (folder / "tokenizer.json").unlink()
    with pytest.raises(mf.ModelFilesError, match="tokenizer.json"):
        mf.verify_folder(folder)


class _FakeDist:
    def __init__(self, root: Path, version: str) -> None:
        self.root, self.version = root, version

    def locate_file(self, rel: str) -> Path:
        return self.root / rel


def _fake_sources(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *, corrupt: str | None = None) -> None:
    real = {n: metadata.distribution(n) for n in (mf.ONNX_PACKAGE, mf.TOKENIZER_PACKAGE)}
    fake_root = tmp_path / "site"
    for rel in (f"{mf.ONNX_MODULE}/model.onnx", f"{mf.ONNX_MODULE}/__init__.py"):
        dst = fake_root / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(str(real[mf.ONNX_PACKAGE].locate_file(rel)), dst)
    for name in ("tokenizer.json", "config.json", "special_tokens_map.json", "tokenizer_config.json"):
        rel = f"{mf.TOKENIZER_DIR}/{name}"
        dst = fake_root / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(str(real[mf.TOKENIZER_PACKAGE].locate_file(rel)), dst)
    if corrupt:
        p = fake_root / corrupt
        p.write_bytes(p.read_bytes() + b" ")
    monkeypatch.setattr(mf.metadata, "distribution", lambda name: _FakeDist(fake_root, "x"))


def test_corrupt_installed_source_is_rejected(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_sources(tmp_path, monkeypatch, corrupt=f"{mf.TOKENIZER_DIR}/config.json")
    with pytest.raises(mf.ModelFilesError, match=r"config\.json.*sha256") as ei:
        mf.assemble(tmp_path / "models")
    assert "make setup" in str(ei.value)
    assert not (tmp_path / "models" / mf.FOLDER_NAME).exists()


def test_assemble_from_located_sources(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_sources(tmp_path, monkeypatch)
    mf.verify_folder(mf.assemble(tmp_path / "models"))


def test_missing_package_says_what_to_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def missing(name: str):
        raise metadata.PackageNotFoundError(name)

    monkeypatch.setattr(mf.metadata, "distribution", missing)
    with pytest.raises(mf.ModelFilesError) as ei:
        mf.assemble(tmp_path / "models")
    assert mf.ONNX_PACKAGE in str(ei.value) and "make setup" in str(ei.value)
    assert mf.main(["check", "--dest", str(tmp_path / "m2")]) == 1


def test_unwritable_root_is_a_clear_error(tmp_path: Path) -> None:
    if os.geteuid() == 0:
        blocker = tmp_path / "file"
        blocker.write_text("x")
        root = blocker / "models"  # a path under a regular file can never be created
    else:
        root = tmp_path / "ro"
        root.mkdir()
        root.chmod(0o500)
    with pytest.raises(mf.ModelFilesError, match="cannot write the model folder"):
        mf.assemble(root)


def test_packaged_model_dir_prefers_a_valid_default(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    default_root = tmp_path / "venv-share"
    mf.assemble(default_root)
    monkeypatch.setattr(mf, "default_models_root", lambda: default_root)
    assert mf.packaged_model_dir(tmp_path / "index") == default_root / mf.FOLDER_NAME
    assert not (tmp_path / "index").exists()
    # Without a usable default it assembles into <index_dir>/models.
    shutil.rmtree(default_root)
    got = mf.packaged_model_dir(tmp_path / "index")
    assert got == tmp_path / "index" / "models" / mf.FOLDER_NAME
    assert mf.packaged_model_dir(models_root=tmp_path / "m") == tmp_path / "m" / mf.FOLDER_NAME


def test_cli_check(tmp_path: Path) -> None:
    r = subprocess.run(
        [sys.executable, "-m", "indexer.embedding.model_files", "check", "--dest", str(tmp_path)],
        cwd=REPO, capture_output=True, text=True, timeout=180,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert r.returncode == 0, r.stderr
    from indexer.embedding import e5_files

    # both packaged models: MiniLM and the default e5
    assert r.stdout.split() == [str(tmp_path / mf.FOLDER_NAME), str(tmp_path / e5_files.FOLDER_NAME)]
