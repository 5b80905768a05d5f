"""Rewrite the packaged model so its int8 weights stay int8 in memory.

The packaged all-MiniLM-L6-v2 stores every weight as int8 behind a ``Cast``
(to float32) and a ``Mul`` by its scale. ONNX Runtime folds those constants
when it loads the model, so every weight is resident as float32 (~90 MB for a
23 MB file). Two rewrites keep them int8:

- :func:`gather_before_dequantize` — a lookup table is only read through its
  ``Gather``, so the dequantisation moves behind the lookup::

      Gather(Mul(Cast(W_q), s), ids)  →  Mul(Cast(Gather(W_q, ids)), Gather(s, ids))

  Each output element is the same float32 product of the same two operands,
  so the vectors are bit-identical (``tests/test_model_graph.py``); the word
  table alone is 47 MB as float32 against 12 MB as int8.
- :func:`matmul_nbits` — each layer's ``MatMul(x, Mul(Cast(W_q), s))`` becomes
  ONNX Runtime's ``MatMulNBits`` (8 bits, the same int8 values and per-column
  scales, zero point 128) with ``accuracy_level`` 4: the kernel quantises the
  activations per block to int8 and multiplies in integers. ~29 MB less
  resident and a query embeds in about half the time (bench/RESULTS.md), but
  the vectors are close, not identical (cosine ≥ 0.998 to the packaged
  model's, asserted in the tests): the fingerprint names the rewritten file.

Both are pure (bytes in, bytes out, deterministic for one ``onnx`` version,
which ``pyproject.toml`` pins: the assembled file's sha256 is pinned in
:mod:`indexer.embedding.model_files`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any


class ModelGraphError(ValueError):
    """The model file could not be parsed or rewritten."""


@dataclass(frozen=True, slots=True)
class Rewrite:
    """A rewritten model: its bytes and the int8 weights (initializer names) it rewrote."""

    data: bytes
    weights: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class _Dequantised:
    """``Mul(Cast(int8 2-D initializer to float32), float32 scale initializer)``."""

    mul: Any
    cast: Any
    quantised: Any  # the int8 initializer
    scale: Any  # the scale initializer


class _Graph:
    """A parsed model with the lookups both rewrites need."""

    def __init__(self, model: bytes) -> None:
        import onnx

        try:
            self.proto = onnx.load_model_from_string(model)
        except Exception as exc:  # protobuf DecodeError and friends
            raise ModelGraphError(f"not an ONNX model: {type(exc).__name__}: {exc}") from exc
        self.graph = self.proto.graph
        self.inits = {i.name: i for i in self.graph.initializer}
        self.producer = {out: node for node in self.graph.node for out in node.output}
        self.readers: dict[str, int] = {}
        for node in self.graph.node:
            for name in node.input:
                self.readers[name] = self.readers.get(name, 0) + 1
        self.outputs = {o.name for o in self.graph.output}

    def dequantised(self, name: str) -> _Dequantised | None:
        """What produces tensor ``name`` when it is an int8 weight dequantised for its one reader
        (nothing else reads the product or the cast), else None."""
        from onnx import TensorProto

        mul = self.producer.get(name)
        if mul is None or mul.op_type != "Mul" or self.readers.get(name) != 1 or name in self.outputs:
            return None
        cast = self.producer.get(mul.input[0])
        scale = self.inits.get(mul.input[1])
        if cast is None or cast.op_type != "Cast" or scale is None or self.readers.get(mul.input[0]) != 1:
            return None
        quantised = self.inits.get(cast.input[0])
        to = next((a.i for a in cast.attribute if a.name == "to"), None)
        if quantised is None or quantised.data_type != TensorProto.INT8 or to != TensorProto.FLOAT:
            return None
        if len(quantised.dims) != 2 or scale.data_type != TensorProto.FLOAT:
            return None
        return _Dequantised(mul, cast, quantised, scale)

    def rewritten(self, replaced: dict[int, list], dropped: set[int], *, added: Sequence[Any] = (),
                  prune: bool = False) -> bytes:
        """The model with each node in ``replaced`` (by id) swapped for its nodes, in place (the
        graph's order is kept), ``dropped`` nodes removed, ``added`` initializers appended and,
        with ``prune``, initializers nothing reads any more removed; checked by ``onnx.checker``."""
        import onnx
        from onnx import helper

        nodes = []
        for node in self.graph.node:
            if id(node) in replaced:
                nodes.extend(replaced[id(node)])
            elif id(node) not in dropped:
                nodes.append(node)
        del self.graph.node[:]
        self.graph.node.extend(nodes)
        if prune or added:
            used = {name for node in self.graph.node for name in node.input} | self.outputs
            kept = [i for i in self.graph.initializer if not prune or i.name in used]
            del self.graph.initializer[:]
            self.graph.initializer.extend(kept + list(added))
        domains = {n.domain for n in nodes if n.domain not in ("", "ai.onnx")}
        for domain in sorted(domains - {o.domain for o in self.proto.opset_import}):
            self.proto.opset_import.append(helper.make_opsetid(domain, 1))
        try:
            onnx.checker.check_model(self.proto)
        except Exception as exc:
            raise ModelGraphError(f"the rewritten model does not check: {type(exc).__name__}: {exc}") from exc
        return self.proto.SerializeToString()


def gather_before_dequantize(model: bytes) -> Rewrite:
    """Move the int8 dequantisation of every lookup table behind its ``Gather``.

    A table qualifies when its ``Gather`` reads ``Mul(Cast(int8 initializer),
    scale initializer)``, nothing else reads that product, and the scale is per
    row (``[rows, 1]``) or per tensor (one value). Anything else is left as it
    is. Raises :class:`ModelGraphError` when ``model`` is not an ONNX model.
    """
    from onnx import TensorProto, helper  # only the model assembler needs onnx

    g = _Graph(model)
    replaced: dict[int, list] = {}  # id(Gather node) -> its replacement nodes
    dropped: set[int] = set()
    tables: list[str] = []
    for gather in g.graph.node:
        if gather.op_type != "Gather" or any(a.name == "axis" and a.i != 0 for a in gather.attribute):
            continue
        table, ids = gather.input[0], gather.input[1]
        d = g.dequantised(table)
        if d is None:
            continue
        per_row = list(d.scale.dims) == [d.quantised.dims[0], 1]
        per_tensor = all(dim == 1 for dim in d.scale.dims)
        if not (per_row or per_tensor):
            continue
        rows, as_float, scale_rows = table + "_q_rows", table + "_f_rows", table + "_scale_rows"
        nodes = [
            helper.make_node("Gather", [d.quantised.name, ids], [rows], name=gather.name + "_q", axis=0),
            helper.make_node("Cast", [rows], [as_float], name=gather.name + "_cast", to=TensorProto.FLOAT),
        ]
        if per_row:
            nodes.append(helper.make_node("Gather", [d.scale.name, ids], [scale_rows], name=gather.name + "_scale",
                                          axis=0))
        nodes.append(helper.make_node("Mul", [as_float, scale_rows if per_row else d.scale.name],
                                      [gather.output[0]], name=gather.name + "_dequantize"))
        replaced[id(gather)] = nodes
        dropped.update({id(d.mul), id(d.cast)})
        tables.append(d.quantised.name)
    if not replaced:
        return Rewrite(model, ())
    return Rewrite(g.rewritten(replaced, dropped), tuple(tables))


#: MatMulNBits block length (values of K sharing one scale; the packaged scales are per column,
#: so each column's scale is repeated over its blocks). 128 divides both K of MiniLM (384, 1536).
NBITS_BLOCK = 128
#: ``accuracy_level`` 4: int8 activations, integer multiply (float32 compute, 0/1, makes a query
#: 3-4x slower on x86 than the float model: bench/RESULTS.md "Measured, not shipped").
NBITS_ACCURACY_LEVEL = 4


def matmul_nbits(model: bytes, *, block_size: int = NBITS_BLOCK,
                 accuracy_level: int = NBITS_ACCURACY_LEVEL) -> Rewrite:
    """Run every int8-weight ``MatMul`` as ONNX Runtime's 8-bit ``MatMulNBits``.

    A ``MatMul`` qualifies when its second input is ``Mul(Cast(int8 [K, N]
    initializer), scale initializer)`` with a per-column (``[N]``, ``[1, N]``)
    or per-tensor scale, K is a multiple of ``block_size``, and the dequantised
    weight is read by nothing else. Its weight is stored as ``uint8(q + 128)``
    with zero point 128, so each dequantised value is exactly ``q * s`` as
    before; only the activations are quantised (``accuracy_level``). Anything
    else is left as it is. Raises :class:`ModelGraphError` when ``model`` is not
    an ONNX model or the result does not check.
    """
    import numpy as np
    from onnx import helper, numpy_helper

    g = _Graph(model)
    replaced: dict[int, list] = {}  # id(MatMul node) -> its MatMulNBits node
    dropped: set[int] = set()
    added: list = []
    weights: list[str] = []
    for matmul in g.graph.node:
        if matmul.op_type != "MatMul" or matmul.domain not in ("", "ai.onnx"):
            continue
        d = g.dequantised(matmul.input[1])
        if d is None:
            continue
        k, n = d.quantised.dims
        if k % block_size:
            continue
        s = numpy_helper.to_array(d.scale)
        if s.size == 1:
            per_column = np.full(n, s.reshape(-1)[0], dtype=np.float32)
        elif list(d.scale.dims) in ([n], [1, n]):
            per_column = s.reshape(n).astype(np.float32)
        else:
            continue
        q = numpy_helper.to_array(d.quantised)
        blocks = k // block_size
        stored = (q.astype(np.int16) + 128).astype(np.uint8).T.reshape(n, blocks, block_size)
        base = d.quantised.name + "_nbits"
        added += [numpy_helper.from_array(stored, base + "_B"),
                  numpy_helper.from_array(np.repeat(per_column, blocks), base + "_scales"),
                  numpy_helper.from_array(np.full(n * blocks, 128, dtype=np.uint8), base + "_zero_points")]
        replaced[id(matmul)] = [helper.make_node(
            "MatMulNBits", [matmul.input[0], base + "_B", base + "_scales", base + "_zero_points"],
            list(matmul.output), name=(matmul.name or matmul.input[1]) + "_nbits", domain="com.microsoft",
            K=k, N=n, bits=8, block_size=block_size, accuracy_level=accuracy_level)]
        dropped.update({id(d.mul), id(d.cast)})
        weights.append(d.quantised.name)
    if not replaced:
        return Rewrite(model, ())
    return Rewrite(g.rewritten(replaced, dropped, added=added, prune=True), tuple(weights))
