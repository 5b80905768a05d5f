"""Embedding memory and threads (issue 12): batches bounded by tokens, the ONNX
Runtime session options, native memory release, and the process metrics.
The real packaged model and tokenizer; no timing (memory and speed are in the benchmarks)."""

from __future__ import annotations

import ctypes
import random
from types import SimpleNamespace

import numpy as np
import pytest

from indexer.embedding import model_files, native_memory
from indexer.embedding.embedder import SHRINK_KEY, SPIN_KEYS, FastEmbedder, plan_batches
from indexer.embedding.factory import make_embedder
from indexer.runtime.config import load_config
from indexer.service.metrics import Metrics

#: The batching mechanics below are stated in MiniLM's 256-token window (the other packaged model).
MINILM = model_files.MODEL_NAME

WORDS = ("deploy cache token schema migration retry budget latency shard index vector kafka redis postgres jwt "
         "expiry rollout canary alert queue worker").split()


@pytest.fixture(scope="module")
def small_batches() -> FastEmbedder:
    return FastEmbedder(MINILM, max_batch_tokens=512, batch_size=32)


def mixed_texts(n: int, seed: int = 5) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.choice((3, 10, 40, 120, 300)))) + f" #{i}"
            for i in range(n)]


# -- token-bounded batches -------------------------------------------------------------------------------


def test_plan_batches_bounds_count_and_padded_tokens():
    rng = random.Random(1)
    lengths = [rng.randint(3, 256) for _ in range(500)]
    batches = plan_batches(lengths, 32, 1024)
    assert sorted(i for b in batches for i in b) == list(range(500))  # every text once
    for b in batches:
        longest = max(lengths[i] for i in b)
        assert len(b) <= 32 and len(b) * longest <= 1024
    flat = [lengths[i] for b in batches for i in b]
    assert flat == sorted(flat)  # shortest first: little padding
    assert plan_batches([300, 5, 5], 32, 256) == [[1, 2], [0]]  # too long alone: a batch of one
    assert [len(b) for b in plan_batches([10] * 70, 32, 0)] == [32, 32, 6]  # 0: count only


def test_the_model_runs_batches_within_the_token_bound(small_batches: FastEmbedder):
    e = small_batches
    texts = mixed_texts(60)
    shapes: list[tuple[int, int]] = []
    inner = e._model.model
    run = inner._run_model

    def recording(onnx_input, onnx_output_names=None):
        shapes.append(tuple(onnx_input["input_ids"].shape))
        return run(onnx_input, onnx_output_names)

    inner._run_model = recording
    try:
        e.calls = e.padded_tokens = e.largest_batch_tokens = 0
        vectors = e.embed(texts)
    finally:
        del inner._run_model  # back to fastembed's method
    lengths = e.model_tokens(texts)
    assert len(shapes) == e.calls == len(plan_batches(lengths, 32, 512))
    # what ONNX Runtime actually ran: texts x padded length, within the bound (a lone long text aside)
    for rows, seq in shapes:
        assert rows * seq <= 512 or rows == 1
    assert sum(rows for rows, _ in shapes) == 60
    assert sum(rows * seq for rows, seq in shapes) == e.padded_tokens
    assert e.largest_batch_tokens == max(rows * seq for rows, seq in shapes) <= 512
    assert max(seq for _, seq in shapes) == 256  # the 300-word texts are cut at the window
    # batching does not change what a text means (int8 dynamic quantization varies in the last digits)
    for i in (0, 7, 33, 59):
        single = e.embed([texts[i]])[0]
        assert float(np.dot(vectors[i], single)) > 0.99


def test_a_count_only_bound_runs_the_big_batches_it_used_to():
    e = FastEmbedder(MINILM, max_batch_tokens=0, batch_size=32)
    texts = mixed_texts(64, seed=9)
    e.embed(texts)
    assert e.calls == 2 and e.largest_batch_tokens == 32 * 256


# -- the ONNX Runtime session ---------------------------------------------------------------------------------


class RecordingSession:
    """Stands in for the C++ session behind ``InferenceSession``: records the run options each run gets."""

    def __init__(self, inner) -> None:
        self.inner, self.run_options = inner, []

    def run(self, output_names, input_feed, run_options=None):
        self.run_options.append(run_options)
        return self.inner.run(output_names, input_feed, run_options)

    def __getattr__(self, name):
        return getattr(self.inner, name)


def test_the_session_does_not_spin_and_its_arena_is_shrunk_after_every_run(small_batches: FastEmbedder):
    e = small_batches
    options = e.session.get_session_options()  # what ONNX Runtime holds, not what we asked
    assert [options.get_session_config_entry(k) for k in SPIN_KEYS] == ["0", "0"]
    assert options.enable_cpu_mem_arena is True
    recorder = RecordingSession(e.session._sess)
    e.session._sess = recorder
    e.calls = 0
    try:
        e.embed(mixed_texts(20, seed=3))
        e.embed_query("and the query path too")
    finally:
        e.session._sess = recorder.inner
    assert len(recorder.run_options) == e.calls + 1 >= 3  # every batch and the query
    assert all(o is not None and o.get_run_config_entry(SHRINK_KEY) == "cpu:0" for o in recorder.run_options)


def test_spinning_and_the_kept_arena_can_be_turned_back_on():
    e = FastEmbedder(MINILM, allow_spinning=True, release_memory=False)
    options = e.session.get_session_options()
    assert [options.get_session_config_entry(k) for k in SPIN_KEYS] == ["1", "1"]
    assert options.enable_cpu_mem_arena is True and e.run_options is None
    recorder = RecordingSession(e.session._sess)
    e.session._sess = recorder
    assert e.embed_query("still answers").shape == (384,)
    e.session._sess = recorder.inner
    assert recorder.run_options == [None]  # the arena keeps what it grew to, as ONNX Runtime does by default


def test_without_the_arena_nothing_is_shrunk():
    e = FastEmbedder(MINILM, cpu_mem_arena=False)
    assert e.session.get_session_options().enable_cpu_mem_arena is False and e.run_options is None


def test_the_config_keys_reach_the_embedder(tmp_path):
    config = load_config(None, env={"LEDGER_INDEXER_EMBEDDING_MAX_BATCH_TOKENS": "1024",
                                    "LEDGER_INDEXER_EMBEDDING_ALLOW_SPINNING": "true",
                                    "LEDGER_INDEXER_EMBEDDING_RELEASE_MEMORY": "false"},
                         overrides={"index": {"dir": str(tmp_path)}})
    assert (config.embedding.cpu_mem_arena, config.sync.trim_memory_seconds) == (True, 60.0)  # defaults
    inner = make_embedder(config).inner
    assert (inner.max_batch_tokens, inner.allow_spinning, inner.release_memory) == (1024, True, False)
    options = inner.session.get_session_options()
    assert options.get_session_config_entry(SPIN_KEYS[0]) == "1" and options.enable_cpu_mem_arena is True
    assert inner.run_options is None  # release_memory = false: the arena is not shrunk


# -- native memory ---------------------------------------------------------------------------------------------


def test_native_memory_is_released_on_glibc(small_batches: FastEmbedder):
    if not native_memory.available():
        pytest.skip("not glibc")
    import pyarrow

    assert native_memory.configured()  # FastEmbedder(release_memory=True) fixed the mmap threshold
    assert pyarrow.default_memory_pool().backend_name == "system"  # not mimalloc's per-thread heaps
    # 64 MiB freed in the middle of the heap (a live block above it keeps the heap's top in place, so
    # free() alone cannot give it back): what a backfill's batches leave behind, for malloc_trim to release
    libc = ctypes.CDLL("libc.so.6")
    libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]
    size = 64 * 1024  # below the mmap threshold: heap memory
    blocks = [libc.malloc(size) for _ in range(1024)]
    for block in blocks:
        ctypes.memset(block, 1, size)  # resident
    pin = libc.malloc(size)  # the same size: from the heap's top, above the blocks, not from a free list
    for block in blocks:
        libc.free(block)
    try:
        released, seconds = native_memory.trim()
    finally:
        libc.free(pin)
    assert released >= 32 * 2**20 and 0 <= seconds < 5, released
    assert native_memory.peak_rss_bytes() >= native_memory.rss_bytes() > 0


def test_metrics_export_process_memory_and_the_peak():
    from fastapi.testclient import TestClient

    from indexer.service.api import create_app
    from tests.test_api import FakeBackend

    metrics = Metrics()
    with TestClient(create_app(FakeBackend(), admin_token=None, metrics=metrics)) as client:
        text = client.get("/metrics").text
    values = {line.split()[0]: float(line.split()[1]) for line in text.splitlines()
              if line and not line.startswith("#")}
    assert values["process_resident_memory_bytes"] > 0
    assert values["ledger_indexer_process_peak_resident_memory_bytes"] >= values["process_resident_memory_bytes"]
    assert values["process_cpu_seconds_total"] > 0
    assert not any(name.startswith("ledger_indexer_memory_trim") for name in values)  # the worker trims no more


def test_without_glibc_nothing_is_trimmed_and_the_vectors_are_the_same(small_batches: FastEmbedder, monkeypatch):
    """The plain path of :mod:`indexer.embedding.native_memory` (a C library that is not glibc, e.g.
    musl): no trim, no tuning, one event, the same vectors."""
    from structlog.testing import capture_logs

    texts = mixed_texts(12)
    shipped = small_batches.embed(texts)
    monkeypatch.setattr(native_memory, "_libc", False)  # not looked up yet
    monkeypatch.setattr(native_memory.ctypes, "CDLL", lambda *a, **k: SimpleNamespace())  # no gnu_get_libc_version
    with capture_logs() as logs:
        assert not native_memory.available() and native_memory.trim() is None
        np.testing.assert_array_equal(small_batches.embed(texts), shipped)
    assert [e["event"] for e in logs if e["event"].startswith("memory.")] == ["memory.native_tuning_unavailable"]


_ARENA_PROBE = r"""
import ctypes, os, re, sys, tempfile, threading
sys.path.insert(0, sys.argv[1])
if sys.argv[2] == "configure":
    from indexer.embedding import native_memory
    assert native_memory.configure()
libc = ctypes.CDLL("libc.so.6")
libc.malloc.restype = ctypes.c_void_p
libc.malloc.argtypes = [ctypes.c_size_t]
libc.fopen.restype = ctypes.c_void_p
libc.fopen.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
libc.malloc_info.argtypes = [ctypes.c_int, ctypes.c_void_p]
libc.fclose.argtypes = [ctypes.c_void_p]
held, started, allocated, go = [], threading.Barrier(9), threading.Barrier(9), threading.Event()

def work():
    started.wait()  # eight threads allocating at once: glibc gives contended threads their own arena
    held.extend(libc.malloc(4096) for _ in range(2000))
    allocated.wait()
    go.wait()

threads = [threading.Thread(target=work) for _ in range(8)]
[t.start() for t in threads]
started.wait()
path = tempfile.mktemp()
allocated.wait()
fp = libc.fopen(path.encode(), b"w")
libc.malloc_info(0, fp)
libc.fclose(fp)
go.set()
[t.join() for t in threads]
print(len(re.findall(r'<heap nr="\d+">', open(path).read())))
os.unlink(path)
"""


@pytest.mark.skipif(not native_memory.available(), reason="glibc only")
@pytest.mark.parametrize("arena_max_env", [None, "6"])
def test_configure_caps_glibc_s_arenas_unless_the_environment_does(arena_max_env, tmp_path) -> None:
    import os
    import subprocess
    import sys
    from pathlib import Path

    repo = str(Path(__file__).resolve().parent.parent)
    env = {k: v for k, v in os.environ.items() if k != "MALLOC_ARENA_MAX"}
    if arena_max_env is not None:
        env["MALLOC_ARENA_MAX"] = arena_max_env

    def arenas(mode: str) -> int:
        out = subprocess.run([sys.executable, "-c", _ARENA_PROBE, repo, mode], env=env, capture_output=True,
                             text=True, timeout=60, check=True)
        return int(out.stdout.strip())

    configured, untouched = arenas("configure"), arenas("plain")
    if arena_max_env is None:
        assert configured <= native_memory.MALLOC_ARENAS < untouched  # glibc's default: up to 8 per core
    else:
        assert configured == untouched  # glibc applied the operator's MALLOC_ARENA_MAX; configure left it
