"""A deterministic, model-free Embedder for fast unit tests.

Bag-of-words hashing: every lower-cased word adds +1 to one coordinate chosen
by sha1(word), then the vector is L2-normalised. Texts that share words get
similar vectors (cosine = overlap of their word histograms), unrelated texts
are nearly orthogonal. ``count_tokens`` counts words and punctuation marks,
about what a WordPiece tokenizer does for plain English.

Only for logic that does not depend on the real model (sinks, chunking,
caching, sync); anything about retrieval quality uses ``FastEmbedder``.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence

import numpy as np

_TOKEN = re.compile(r"\w+|[^\w\s]")


class FakeEmbedder:
    def __init__(self, dim: int = 64, *, name: str = "fake-bow", version: str = "1", max_tokens: int = 256) -> None:
        self.name = name
        self.dim = dim
        self.max_tokens = max_tokens
        self.fingerprint = f"{name}@v{version}/d{dim}"
        self.calls = 0
        self.texts_embedded = 0
        self.query_calls = 0

    def count_tokens(self, text: str) -> int:
        return len(_TOKEN.findall(text))

    def _vec(self, text: str) -> np.ndarray:
        v = np.zeros(self.dim, dtype=np.float32)
        for w in re.findall(r"\w+", text.lower()):
            h = hashlib.sha1(w.encode("utf-8", "surrogatepass")).digest()
            v[int.from_bytes(h[:4], "little") % self.dim] += 1.0
        n = float(np.linalg.norm(v))
        if n == 0:
            v[0] = 1.0
            return v
        return v / n

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        texts = list(texts)
        self.calls += 1
        self.texts_embedded += len(texts)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.stack([self._vec(t) for t in texts]).astype(np.float32)

    def embed_query(self, text: str) -> np.ndarray:
        self.query_calls += 1
        return self._vec(text)
