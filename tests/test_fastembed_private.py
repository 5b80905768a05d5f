"""The fastembed adapter (indexer.embedding.fastembed_private), with the real model: a model
from fastembed's cache is found through fastembed's public ``download_model`` (the folder its
private ``_model_dir`` names), and where fastembed has no session-options hook the session is
built the plain way with the same vectors and one ``embedding.private_api_missing`` event."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
from structlog.testing import capture_logs

from indexer.embedding import fastembed_private, model_files
from indexer.embedding.embedder import SPIN_KEYS, FastEmbedder

#: A fastembed model that is not packaged: loaded from fastembed's cache (HF layout), offline.
CACHED = "BAAI/bge-small-en-v1.5"
TEXTS = ["the deploy failed on the migration step", "we chose JWT expiry of one hour", "hiking on sunday"]


def fastembed_cache(root: Path) -> Path:
    """A fastembed cache holding the packaged MiniLM files as ``CACHED``'s snapshot (as the hub
    client lays them out: refs/main names the snapshot)."""
    repo = root / "models--Qdrant--bge-small-en-v1.5-onnx-Q"
    snap = repo / "snapshots" / ("0" * 40)
    snap.mkdir(parents=True)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("0" * 40)
    src = model_files.packaged_model_dir()
    for f in src.iterdir():
        if f.name != "MANIFEST.json":
            shutil.copy(f, snap / ("model_optimized.onnx" if f.name == "model.onnx" else f.name))
    return snap


@pytest.fixture
def fresh_events(monkeypatch):
    monkeypatch.setattr(fastembed_private, "_missing", set())


def test_a_cached_model_s_folder_is_the_one_fastembed_loaded(tmp_path: Path) -> None:
    snap = fastembed_cache(tmp_path / "cache")
    e = FastEmbedder(CACHED, cache_dir=tmp_path / "cache")
    assert e.model_dir == snap == Path(e._model.model._model_dir)  # the public path names the private's folder
    assert e.max_tokens == 256 and e.dim == 384  # read from that folder's tokenizer
    assert np.isfinite(e.embed(TEXTS)).all()


class NoHook:
    """A fastembed model object of a version without ``add_extra_session_options`` (the detection
    does not depend on the model: :func:`test_use_private_false_builds_the_session_fastembed_s_way`
    runs the plain loader on the real one)."""

    def __init__(self) -> None:
        self.loads = 0

    def load_onnx_model(self) -> None:
        self.loads += 1


class SilentHook(NoHook):
    """A version that has the hook but builds its options without calling it."""

    def add_extra_session_options(self, options, extra) -> None:
        raise AssertionError("not called by this version's loader")


def test_without_the_session_hook_the_session_loads_the_plain_way(fresh_events) -> None:
    configured: list = []
    with capture_logs() as logs:
        for inner in (NoHook(), NoHook(), SilentHook()):
            assert fastembed_private.load_session(inner, configured.append) is None
            assert inner.loads == 1 and "add_extra_session_options" not in vars(inner)
    assert configured == []
    missing = [e["attribute"] for e in logs if e["event"] == "embedding.private_api_missing"]
    assert missing == ["add_extra_session_options"]  # once per process


def test_use_private_false_builds_the_session_fastembed_s_way(monkeypatch) -> None:
    shipped = FastEmbedder(release_memory=False)
    spin = shipped.session.get_session_options()
    assert shipped.session_options is not None and all(spin.get_session_config_entry(k) == "0" for k in SPIN_KEYS)
    monkeypatch.setattr(fastembed_private, "USE_PRIVATE", False)
    plain = FastEmbedder(release_memory=False)
    assert plain.session_options is None
    np.testing.assert_array_equal(plain.embed(TEXTS), shipped.embed(TEXTS))
    np.testing.assert_array_equal(plain.embed_query("JWT expiry"), shipped.embed_query("JWT expiry"))
