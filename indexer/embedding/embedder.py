"""Text embeddings: the :class:`Embedder` protocol, fastembed, and a SQLite cache.

- :class:`FastEmbedder` runs fastembed (ONNX Runtime, CPU) fully offline
  (``HF_HUB_OFFLINE=1``). By default it loads the packaged all-MiniLM-L6-v2 int8
  folder (:mod:`indexer.embedding.model_files`; multilingual-e5-small,
  :mod:`indexer.embedding.e5_files`, is the other packaged model: :mod:`indexer.embedding.packaged`),
  adding the prefixes a model was trained with; a config may name any fastembed
  model (taken from fastembed's local cache, never downloaded) or a local
  folder. Each call sorts its texts by token count and runs batches of at
  most ``batch_size`` texts *and* ``max_batch_tokens`` padded tokens (texts ×
  the longest, :func:`plan_batches`) with ``parallel=None``: ONNX Runtime
  already uses every core, padding is batch-longest, and a batch's activation
  memory grows with its padded tokens (attention with their square), so a
  count alone lets 32 long chunks take hundreds of MB. One ONNX Runtime
  session serves documents and queries, built with the options fastembed does
  not expose: worker threads that do not spin (busy-wait) between parallel
  sections, and with ``release_memory`` a CPU arena that is shrunk at the end
  of every run (``memory.enable_memory_arena_shrinkage``): the arena's speed
  within a batch, without keeping the largest batch's memory for the life of
  the process; glibc's mmap threshold is fixed and freed heap pages are
  trimmed after each call (:mod:`indexer.embedding.native_memory`).
- :class:`indexer.embedding.cache.CachedEmbedder` wraps any embedder with a
  persistent cache keyed by (model fingerprint, sha256 of the text), so a body
  shared by forked sessions, a re-sync or a forced reindex of unchanged text
  embeds nothing.

Vectors are float32, shape ``(n, dim)``, L2-normalised (so cosine, dot and
L2 rank identically).

``count_tokens(text)`` counts the model tokenizer's tokens *without* the
special tokens ([CLS]/[SEP]); ``max_tokens`` is the model window *with* them
(256 for MiniLM, 512 for e5). Chunking keeps chunks at ``max_tokens - 2`` or less.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from indexer.embedding import fastembed_private, model_files, native_memory, packaged

DEFAULT_MODEL = packaged.DEFAULT.name
DEFAULT_BATCH_SIZE = 32
#: Padded tokens per model batch (texts × the longest, special tokens included): 8 chunks of 256.
DEFAULT_MAX_BATCH_TOKENS = 2048
#: ONNX Runtime session config keys (onnxruntime_session_options_config_keys.h).
SPIN_KEYS = ("session.intra_op.allow_spinning", "session.inter_op.allow_spinning")
#: ONNX Runtime run config key (onnxruntime_run_options_config_keys.h): give the arena's
#: unused chunks back at the end of every run.
SHRINK_KEY = "memory.enable_memory_arena_shrinkage"


class EmbeddingError(RuntimeError):
    """The embedding model could not be loaded or run."""


@runtime_checkable
class Embedder(Protocol):
    name: str
    dim: int
    fingerprint: str
    max_tokens: int

    def count_tokens(self, text: str) -> int: ...

    def embed(self, texts: Sequence[str]) -> np.ndarray: ...

    def embed_query(self, text: str) -> np.ndarray: ...


def plan_batches(lengths: Sequence[int], max_count: int, max_tokens: int = 0) -> list[list[int]]:
    """Indices of texts grouped into model batches, shortest first: at most
    ``max_count`` texts, and at most ``max_tokens`` padded tokens (``len(batch)
    * longest``; 0: no token bound). A text longer than ``max_tokens`` alone
    is a batch of one."""
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    batches: list[list[int]] = []
    current: list[int] = []
    for i in order:
        # sorted ascending: lengths[i] is the longest of current + [i]
        if current and (len(current) >= max_count or (max_tokens and (len(current) + 1) * lengths[i] > max_tokens)):
            batches.append(current)
            current = []
        current.append(i)
    if current:
        batches.append(current)
    return batches


def l2_normalize(v: np.ndarray) -> np.ndarray:
    v = np.asarray(v, dtype=np.float32)
    if v.ndim == 1:
        n = float(np.linalg.norm(v))
        return v / n if n > 0 else v
    norms = np.linalg.norm(v, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return (v / norms).astype(np.float32, copy=False)


def _folder_fingerprint(folder: Path, model_name: str, max_tokens: int) -> str:
    """Fingerprint of an arbitrary model folder: hashes of its model and tokenizer files."""
    names = [
        p.name
        for p in sorted(folder.iterdir())
        if p.is_file()
        and (
            p.suffix in {".onnx", ".onnx_data", ".safetensors"}
            or p.name in {"tokenizer.json", "tokenizer_config.json", "config.json", "special_tokens_map.json"}
        )
    ]
    hashes = {n: model_files.sha256_file(folder / n) for n in names}
    return model_files.fingerprint_of(hashes, model_name=model_name, max_tokens=max_tokens)


class FastEmbedder:
    """fastembed ``TextEmbedding``, offline, counted.

    ``model_path`` None and the default model name: the packaged folder
    (``<venv>/share/ledger-indexer/models``, else assembled into
    ``models_dir``, e.g. ``<index dir>/models``). ``model_path`` given: that folder, loaded as
    ``model_name``. Otherwise: the named fastembed model from fastembed's
    local cache (``cache_dir``), never downloaded.

    ``calls`` counts model batches run by :meth:`embed`, ``texts_embedded``
    the texts they held, ``padded_tokens`` the tokens they ran (texts × the
    longest) and ``largest_batch_tokens`` the largest batch; ``query_calls``
    counts :meth:`embed_query`. ``session_options`` is the
    ``onnxruntime.SessionOptions`` the session was built with.
    """

    def __init__(
        self,
        model_name: str = DEFAULT_MODEL,
        model_path: Path | str | None = None,
        batch_size: int = DEFAULT_BATCH_SIZE,
        threads: int | None = None,
        *,
        models_dir: Path | str | None = None,
        cache_dir: Path | str | None = None,
        cpu_mem_arena: bool = True,
        max_batch_tokens: int = DEFAULT_MAX_BATCH_TOKENS,
        allow_spinning: bool = False,
        release_memory: bool = True,
    ) -> None:
        if batch_size < 1:
            raise ValueError("batch_size must be >= 1")
        if max_batch_tokens < 0:
            raise ValueError("max_batch_tokens must be >= 0 (0: no token bound)")
        os.environ["HF_HUB_OFFLINE"] = "1"  # never reach for the model hub
        os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
        from fastembed import TextEmbedding  # slow import: keep it lazy

        self.name = model_name
        self.batch_size = int(batch_size)
        self.max_batch_tokens = int(max_batch_tokens)
        self.allow_spinning = bool(allow_spinning)
        self.release_memory = bool(release_memory)
        self.cpu_mem_arena = bool(cpu_mem_arena)
        self.run_options = None  # onnxruntime.RunOptions of every run, when the arena is shrunk
        self.calls = 0
        self.texts_embedded = 0
        self.padded_tokens = 0
        self.largest_batch_tokens = 0
        self.query_calls = 0
        self.session_options = None
        self._lock = threading.Lock()
        if self.release_memory:
            native_memory.configure()  # before the model's allocations

        spec = packaged.MODELS.get(model_name)
        self.query_prefix = spec.query_prefix if spec else ""
        self.document_prefix = spec.document_prefix if spec else ""
        self.cosine_floor = spec.cosine_floor if spec else 0.0
        self.cosine_ceiling = spec.cosine_ceiling if spec else 1.0
        is_packaged = False
        if model_path is None or str(model_path) == "":
            if spec is not None:
                try:
                    folder: Path | None = spec.locate(models_root=Path(models_dir) if models_dir else None)
                except model_files.ModelFilesError as e:
                    raise EmbeddingError(f"cannot load the packaged embedding model: {e}") from e
                is_packaged = True
            else:
                folder = None
        else:
            folder = Path(model_path).expanduser()
            if not folder.is_dir():
                raise EmbeddingError(
                    f"embedding model_path {folder} is not a folder; set [embedding] model_path to a folder "
                    f"with model.onnx and tokenizer files, or leave it empty for the packaged model"
                )
        if spec is not None and spec.custom:
            packaged.register_custom(spec)
        # ONNX Runtime's arena keeps its peak size for the life of the process (the
        # largest batch's activations, rounded up) unless it is shrunk after each run.
        kwargs: dict[str, Any] = {"threads": threads, "enable_cpu_mem_arena": bool(cpu_mem_arena),
                                  "lazy_load": True}
        if cache_dir is not None:
            kwargs["cache_dir"] = str(cache_dir)
        if folder is not None:
            kwargs["specific_model_path"] = str(folder)
        else:
            kwargs["local_files_only"] = True
        try:
            self._model = TextEmbedding(model_name, **kwargs)
            self._load_session(self._model.model)
        except Exception as e:  # fastembed raises ValueError/OSError/onnxruntime errors
            where = f"folder {folder}" if folder is not None else "fastembed's local cache (no download: offline)"
            raise EmbeddingError(
                f"cannot load embedding model {model_name!r} from {where}: {type(e).__name__}: {e}. "
                f"Check [embedding] model / model_path (the name must be a fastembed model name), "
                f"or leave them at their defaults to use the packaged model (`make setup`)"
            ) from e

        inner = getattr(self._model, "model", None)
        if folder is None:
            try:
                folder = fastembed_private.model_folder(inner)
            except Exception as e:  # the model loaded from this cache a moment ago: a cache changed since
                raise EmbeddingError(f"cannot find the folder of embedding model {model_name!r} in fastembed's "
                                     f"local cache: {type(e).__name__}: {e}") from e
        self.model_dir = folder
        self._tokenizer = self._count_tokenizer(inner, folder)
        self.max_tokens = self._read_max_tokens(inner, folder)
        probe = self._embed_batch(["dimension probe"])
        self.dim = int(probe.shape[1])
        self.calls = self.texts_embedded = self.padded_tokens = self.largest_batch_tokens = 0
        if is_packaged:
            assert spec is not None
            self.fingerprint = spec.fingerprint
        else:
            self.fingerprint = _folder_fingerprint(folder, model_name, self.max_tokens)

    # ------------------------------------------------------------------ helpers

    def _load_session(self, inner: Any) -> None:
        """Build the ONNX Runtime session through fastembed's own loader, adding the options it
        does not expose (:mod:`indexer.embedding.fastembed_private`): threads that do not spin
        (busy-wait) between parallel sections, and the arena shrunk at the end of every run."""
        spin = "1" if self.allow_spinning else "0"

        def no_spinning(options) -> None:
            for key in SPIN_KEYS:
                options.add_session_config_entry(key, spin)

        self.session_options = fastembed_private.load_session(inner, no_spinning)
        if self.cpu_mem_arena and self.release_memory:
            import onnxruntime

            self.run_options = onnxruntime.RunOptions()
            self.run_options.add_run_config_entry(SHRINK_KEY, "cpu:0")
            fastembed_private.shrink_arena_after_runs(inner, self.run_options)

    @property
    def session(self):
        """The ``onnxruntime.InferenceSession`` (one for documents and queries)."""
        return fastembed_private.session(self._model.model)

    def model_tokens(self, texts: Sequence[str]) -> list[int]:
        """Tokens the model runs for each text: special tokens included, cut at the window."""
        if self._tokenizer is None:
            counts = [approx_tokens(t) for t in texts]
        else:
            counts = [_real_tokens(e) for e in self._tokenizer.encode_batch(list(texts), add_special_tokens=False)]
        return [min(c + 2, self.max_tokens) for c in counts]

    @staticmethod
    def _count_tokenizer(inner: Any, folder: Path):
        """The tokenizer that counts tokens: the model's own (fastembed's, which truncates at the
        window and pads batches: :func:`_real_tokens` counts through both), so the process holds
        one copy of the vocabulary (~7 MB a tokenizer); a second one from ``folder`` only when the
        model's tokenizer overlaps its pieces (a truncation stride) or is not a ``tokenizers.Tokenizer``."""
        from tokenizers import Tokenizer

        own = getattr(inner, "tokenizer", None)
        if isinstance(own, Tokenizer) and not (own.truncation or {}).get("stride"):
            return own
        return FastEmbedder._load_count_tokenizer(folder)

    @staticmethod
    def _load_count_tokenizer(folder: Path):
        from tokenizers import Tokenizer

        path = folder / "tokenizer.json"
        if not path.is_file():
            return None
        tok = Tokenizer.from_file(str(path))
        tok.no_truncation()
        tok.no_padding()
        return tok

    @staticmethod
    def _read_max_tokens(inner: Any, folder: Path) -> int:
        trunc = getattr(getattr(inner, "tokenizer", None), "truncation", None)
        if isinstance(trunc, dict) and isinstance(trunc.get("max_length"), int):
            return int(trunc["max_length"])
        try:
            cfg = json.loads((folder / "tokenizer_config.json").read_text(encoding="utf-8"))
            vals = [v for v in (cfg.get("model_max_length"), cfg.get("max_length")) if isinstance(v, int) and v > 0]
            if vals:
                return min(min(vals), 8192)
        except (OSError, ValueError):
            pass
        return 512

    def _embed_batch(self, texts: list[str], tokens: int = 0) -> np.ndarray:
        """One model run over ``texts`` (``tokens``: their padded size, for the counters)."""
        vecs = list(self._model.embed(texts, batch_size=max(1, len(texts)), parallel=None))
        with self._lock:
            self.calls += 1
            self.texts_embedded += len(texts)
            self.padded_tokens += tokens
            self.largest_batch_tokens = max(self.largest_batch_tokens, tokens)
        return np.asarray(vecs, dtype=np.float32)

    # ------------------------------------------------------------------ API

    def count_tokens(self, text: str) -> int:
        if self._tokenizer is None:
            return approx_tokens(text)
        return _real_tokens(self._tokenizer.encode(text, add_special_tokens=False))

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        # the prefix the model was trained with for stored text (e5: "passage: "); the cache keys
        # the text without it, under this model's fingerprint
        texts = [self.document_prefix + t for t in texts] if self.document_prefix else list(texts)
        n = len(texts)
        if n == 0:
            return np.zeros((0, getattr(self, "dim", 0)), dtype=np.float32)
        lengths = self.model_tokens(texts)
        out: np.ndarray | None = None
        try:
            for idx in plan_batches(lengths, self.batch_size, self.max_batch_tokens):
                tokens = len(idx) * max(lengths[i] for i in idx)
                try:
                    vecs = self._embed_batch([texts[i] for i in idx], tokens)
                except Exception as e:
                    raise EmbeddingError(
                        f"embedding {len(idx)} texts with {self.name} failed: {type(e).__name__}: {e}") from e
                if out is None:
                    out = np.empty((n, vecs.shape[1]), dtype=np.float32)
                out[idx] = vecs
        finally:
            if self.release_memory:
                native_memory.trim()  # the batches' freed activations back to the OS
        assert out is not None
        return l2_normalize(out)

    def embed_query(self, text: str) -> np.ndarray:
        try:
            v = next(iter(self._model.query_embed(self.query_prefix + text)))
        except Exception as e:
            raise EmbeddingError(f"embedding a query with {self.name} failed: {type(e).__name__}: {e}") from e
        with self._lock:
            self.query_calls += 1
        return l2_normalize(np.asarray(v, dtype=np.float32))


def _real_tokens(encoding: Any) -> int:
    """Tokens of one text's ``tokenizers.Encoding``, however the tokenizer truncates or pads it:
    the tokens kept plus those of every overflowing piece (a truncation without stride splits
    the text into consecutive pieces), padding left out (``attention_mask`` is 0 there)."""
    return sum(encoding.attention_mask) + sum(sum(piece.attention_mask) for piece in encoding.overflowing)


def approx_tokens(text: str) -> int:
    """A close over-estimate of WordPiece tokens when no tokenizer is at hand."""
    import re

    n = 0
    for piece in re.findall(r"\w+|[^\w\s]", text):
        n += 1 + len(piece) // 6
    return n
