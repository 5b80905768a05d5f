"""Embeddings: the real packaged model offline, and the SQLite cache."""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from fake_embedder import FakeEmbedder
from structlog.testing import capture_logs

from indexer.embedding import model_files
from indexer.embedding.cache import CachedEmbedder
from indexer.embedding.embedder import Embedder, FastEmbedder


@pytest.fixture(scope="module")
def real() -> FastEmbedder:
    return FastEmbedder(model_files.MODEL_NAME)


def cos(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.dot(a, b))


def test_real_model_loads_offline(real: FastEmbedder) -> None:
    assert os.environ.get("HF_HUB_OFFLINE") == "1"
    assert isinstance(real, Embedder)
    assert real.dim == 384
    assert real.max_tokens == 256
    assert real.fingerprint == model_files.FINGERPRINT
    assert real.model_dir.name == model_files.FOLDER_NAME
    assert real.count_tokens("hello world") == 2


def test_models_dir_is_used_when_the_venv_copy_is_missing(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(model_files, "default_models_root", lambda: tmp_path / "absent")
    e = FastEmbedder(model_files.MODEL_NAME, models_dir=tmp_path / "index" / "models")
    assert e.model_dir == tmp_path / "index" / "models" / model_files.FOLDER_NAME
    assert e.fingerprint == model_files.FINGERPRINT


def test_real_vectors_are_normalised_and_meaningful(real: FastEmbedder) -> None:
    texts = [
        "The cat sat on the mat.",
        "A kitten is sitting on a rug.",
        "The quarterly tax filing deadline is in April.",
        "We decided to use PostgreSQL for the billing service database.",
    ]
    v = real.embed(texts)
    assert v.shape == (4, 384) and v.dtype == np.float32
    assert np.allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
    assert cos(v[0], v[1]) > cos(v[0], v[2]) + 0.3
    q = real.embed_query("which database did we pick for billing?")
    assert q.shape == (384,) and abs(np.linalg.norm(q) - 1) < 1e-5
    assert int(np.argmax(v @ q)) == 3


def test_order_is_kept_and_batches_are_counted(real: FastEmbedder) -> None:
    texts = [("word " * (i % 37 + 1)).strip() + f" {i}" for i in range(70)]
    real.calls = real.texts_embedded = 0
    v = real.embed(texts)
    assert real.calls == 3 and real.texts_embedded == 70  # batches of 32, sorted by length
    for i in (0, 17, 69):
        single = real.embed([texts[i]])[0]
        assert cos(v[i], single) > 0.999
    assert real.embed([]).shape == (0, 384)


def test_truncates_at_the_trained_window(real: FastEmbedder) -> None:
    base = " ".join(f"topic{i % 50} alpha beta" for i in range(150))  # well over 256 tokens
    assert real.count_tokens(base) > 300
    a, b = real.embed([base, base + " completely different tail about volcanoes"])
    assert cos(a, b) > 0.9999  # the tail is past token 256: cut


def test_tokens_are_counted_with_the_models_own_tokenizer_exactly(real: FastEmbedder) -> None:
    """One vocabulary in memory: the counter is fastembed's tokenizer (which truncates at the window
    and pads batches), and it counts what a tokenizer without truncation or padding counts."""
    from tokenizers import Tokenizer

    assert real._tokenizer is real._model.model.tokenizer
    assert real._tokenizer.truncation["max_length"] == 256 and real._tokenizer.padding is not None
    plain = Tokenizer.from_file(str(real.model_dir / "tokenizer.json"))
    plain.no_truncation()
    plain.no_padding()
    words = ["alpha", "JWT", "expiry", "naïve", "café", "déjà", "東京", "😀", "x" * 150, "--", "foo_bar",
             "https://example.com/a?b=c", "{'k': 1}", "\n", "Straße"]
    texts = ["", " ", "hello world", "word " * 700, "x" * 5000, "ä" * 3000]
    for n in (1, 3, 40, 120, 255, 256, 257, 300, 511, 512, 513, 900):
        texts.append(" ".join(words[(i * 7 + n) % len(words)] for i in range(n)))
    expected = [len(e.ids) for e in plain.encode_batch(texts, add_special_tokens=False)]
    assert [real.count_tokens(t) for t in texts] == expected
    assert real.model_tokens(texts) == [min(n + 2, 256) for n in expected]  # one padded batch
    assert max(expected) > 3 * 256  # several overflowing pieces were counted


def test_cache_hits_make_no_model_calls(tmp_path: Path, real: FastEmbedder) -> None:
    cache = CachedEmbedder(real, tmp_path / "embed-cache.sqlite")
    texts = ["first body about deployments", "second body about invoices", "first body about deployments"]
    real.calls = 0
    v1 = cache.embed(texts)
    assert real.calls == 1 and cache.misses == 2 and cache.hits == 1
    v2 = cache.embed(list(reversed(texts)))
    assert real.calls == 1, "re-embedding cached texts must not call the model"
    assert np.array_equal(v2, v1[::-1])
    assert cache.fingerprint == real.fingerprint and cache.dim == 384
    cache.close()


def test_cache_persists_and_is_keyed_by_fingerprint(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite"
    inner = FakeEmbedder()
    c1 = CachedEmbedder(inner, path)
    texts = [f"text number {i}" for i in range(1200)]  # > 2 IN-list chunks of 500
    v = c1.embed(texts)
    assert inner.calls == 1 and inner.texts_embedded == 1200
    c1.close()

    inner2 = FakeEmbedder()
    c2 = CachedEmbedder(inner2, path)
    assert np.array_equal(c2.embed(texts), v)
    assert inner2.calls == 0 and c2.hits == 1200 and c2.misses == 0

    later = CachedEmbedder(FakeEmbedder(version="3"), path)  # a fingerprint sorting after v2's
    later.embed(texts[:5])
    later.close()
    other = FakeEmbedder(version="2")  # same dim, different model fingerprint
    c3 = CachedEmbedder(other, path)
    c3.embed(texts[:10])
    assert other.texts_embedded == 10 and c3.misses == 10
    assert c3.entries() == 1215
    assert c3.prune_other_models() == 1205  # v1's and v3's, on both sides of v2 in the key
    assert c3.entries() == c3.entries(other.fingerprint) == 10
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_cache_handles_odd_texts(tmp_path: Path) -> None:
    inner = FakeEmbedder()
    c = CachedEmbedder(inner, tmp_path / "c.sqlite")
    texts = ["", "it's \"quoted\"", "nul\x00byte", "lone \ud800 surrogate", "ünï 🙂"]
    v = c.embed(texts)
    assert v.shape == (5, inner.dim)
    assert np.array_equal(c.embed(texts), v) and inner.calls == 1
    assert c.embed([]).shape == (0, inner.dim)


def test_corrupt_cache_file_is_replaced(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite"
    path.write_bytes(b"this is not a sqlite database" * 100)
    c = CachedEmbedder(FakeEmbedder(), path)
    c.embed(["x"])
    assert c.entries() == 1
    assert any(p.name.startswith("c.sqlite.corrupt-") for p in tmp_path.iterdir())


def aside_files(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if ".corrupt-" in p.name)


def test_only_the_newest_moved_aside_cache_is_kept(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite"
    for stamp in (1000, 2000, 3000):  # an older version left one on every full disk
        for suffix in ("", "-wal", "-shm"):
            (tmp_path / f"c.sqlite.corrupt-{stamp}{suffix}").write_bytes(b"old")
    (tmp_path / "c.sqlite.corrupt-notes.txt").write_text("not a moved-aside cache: left alone")
    CachedEmbedder(FakeEmbedder(), path).close()  # a healthy open sweeps the older ones
    assert aside_files(tmp_path) == ["c.sqlite.corrupt-3000", "c.sqlite.corrupt-3000-shm",
                                     "c.sqlite.corrupt-3000-wal", "c.sqlite.corrupt-notes.txt"]
    path.unlink()
    path.write_bytes(b"this is not a sqlite database" * 100)
    with capture_logs() as logs:
        c = CachedEmbedder(FakeEmbedder(), path)
    c.embed(["x"])
    assert c.entries() == 1
    (moved,) = [e for e in logs if e["event"] == "embedding_cache.moved_aside"]
    assert moved["older_removed"] == 3 and "file is not a database" in moved["error"]
    now = aside_files(tmp_path)
    assert len(now) == 2 and now[1] == "c.sqlite.corrupt-notes.txt" and now[0] == Path(moved["moved_to"]).name
    c.close()


def test_a_cache_locked_by_another_process_is_left_in_place(tmp_path: Path, monkeypatch) -> None:
    """"database is locked" names no damage, and quick_check finds none: the file stays."""
    from indexer.embedding import cache_file

    path = tmp_path / "c.sqlite"
    first = CachedEmbedder(FakeEmbedder(), path)
    first.embed(["kept"])
    first.close()
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("PRAGMA locking_mode=EXCLUSIVE")
    holder.execute("BEGIN EXCLUSIVE")
    monkeypatch.setattr(cache_file, "BUSY_TIMEOUT_S", 0.1)
    monkeypatch.setattr(CachedEmbedder, "REOPEN_AFTER_S", 0.0, raising=False)
    with capture_logs() as logs:
        c = CachedEmbedder(FakeEmbedder(), path)
    assert aside_files(tmp_path) == []
    assert c.unavailable is not None and c.unavailable.fault is None
    assert "database is locked" in str(c.unavailable) and "left as is" in str(c.unavailable)
    (event,) = [e for e in logs if e["event"] == "embedding_cache.unavailable"]
    assert event["cause"] is None
    holder.execute("ROLLBACK")
    holder.close()
    assert c.entries() == 1 and c.unavailable is None  # opened on the next call: the same file
    c.close()


def test_a_failed_write_names_its_cause_not_a_rollback(tmp_path: Path) -> None:
    c = CachedEmbedder(FakeEmbedder(), tmp_path / "c.sqlite")
    c.embed(["first"])
    conn = c._conn
    conn.execute(f"PRAGMA max_page_count = {conn.execute('PRAGMA page_count').fetchone()[0]}")
    with capture_logs() as logs:
        c.embed([f"text {i} " * 40 for i in range(300)])  # SQLITE_FULL: the vectors are not cached
    (event,) = [e for e in logs if e["event"] == "embedding_cache.write_failed"]
    assert event["cause"] == "disk_full" and "database or disk is full" in event["error"]
    assert "rollback" not in event["error"]
    assert c.entries() == 1 and not conn.in_transaction
    c.close()


def test_cache_writer_and_query_threads(tmp_path: Path) -> None:
    inner = FakeEmbedder()
    c = CachedEmbedder(inner, tmp_path / "c.sqlite")
    errors: list[BaseException] = []
    start = threading.Barrier(4)
    writing = threading.Event()
    overlapped = [0, 0, 0]  # reader calls made while the writer was between its first and last batch

    def writer() -> None:
        try:
            start.wait()
            writing.set()
            for i in range(40):
                c.embed([f"doc {i} {j}" for j in range(20)])
                time.sleep(0.001)  # let the readers in between batches
        except BaseException as e:  # pragma: no cover
            errors.append(e)
        finally:
            writing.clear()

    def reader(k: int) -> None:
        try:
            start.wait()
            for i in range(200):
                assert c.embed_query(f"query {i}").shape == (inner.dim,)
                [got] = c.embed([f"doc {i % 40} 0"])
                assert np.array_equal(got, inner.embed([f"doc {i % 40} 0"])[0])  # never a torn or wrong row
                overlapped[k] += writing.is_set()
        except BaseException as e:  # pragma: no cover
            errors.append(e)

    threads = [threading.Thread(target=writer)] + [threading.Thread(target=reader, args=(k,)) for k in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert all(n > 0 for n in overlapped), overlapped  # every reader really ran beside the writer
    assert c.entries() == 800
