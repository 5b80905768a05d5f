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

from dataclasses import dataclass


class ModelGraphError(ValueError):
    """The model file could not be parsed or rewritten."""


@dataclass(frozen=True, slots=True)
class Rewrite:
    """A rewritten model: its bytes and the int8 weights (initializer names) it rewrote."""

    data: bytes
    weights: tuple[str, ...]


def gather_before_dequantize(model: bytes) -> Rewrite:
    """Move the int8 dequantisation of every lookup table behind its ``Gather``.

    A table qualifies when its ``Gather`` reads ``Mul(Cast(int8 initializer),
    scale initializer)``, nothing else reads that product, and the scale is per
    row (``[rows, 1]``) or per tensor (one value). Anything else is left as it
    is. Raises :class:`ModelGraphError` when ``model`` is not an ONNX model.
    """
    import onnx  # only the model assembler needs it
    from onnx import TensorProto, helper

    try:
        proto = onnx.load_model_from_string(model)
    except Exception as exc:  # protobuf DecodeError and friends
        raise ModelGraphError(f"not an ONNX model: {type(exc).__name__}: {exc}") from exc
    graph = proto.graph
    inits = {i.name: i for i in graph.initializer}
    producer = {out: node for node in graph.node for out in node.output}
    readers: dict[str, int] = {}
    for node in graph.node:
        for name in node.input:
            readers[name] = readers.get(name, 0) + 1
    graph_outputs = {o.name for o in graph.output}

    replaced: dict[int, list] = {}  # id(Gather node) -> its replacement nodes
    dropped: set[int] = set()
    tables: list[str] = []
    for gather in graph.node:
        if gather.op_type != "Gather" or any(a.name == "axis" and a.i != 0 for a in gather.attribute):
            continue
        table, ids = gather.input[0], gather.input[1]
        mul = producer.get(table)
        if mul is None or mul.op_type != "Mul" or readers.get(table) != 1 or table in graph_outputs:
            continue
        cast = producer.get(mul.input[0])
        scale = inits.get(mul.input[1])
        if cast is None or cast.op_type != "Cast" or scale is None:
            continue
        quantised = inits.get(cast.input[0])
        to = next((a.i for a in cast.attribute if a.name == "to"), None)
        if quantised is None or quantised.data_type != TensorProto.INT8 or to != TensorProto.FLOAT:
            continue
        if readers.get(mul.input[0]) != 1 or len(quantised.dims) != 2:
            continue
        per_row = list(scale.dims) == [quantised.dims[0], 1]
        per_tensor = all(d == 1 for d in scale.dims)
        if not (per_row or per_tensor):
            continue
        rows, as_float, scale_rows = table + "_q_rows", table + "_f_rows", table + "_scale_rows"
        nodes = [
            helper.make_node("Gather", [quantised.name, ids], [rows], name=gather.name + "_q", axis=0),
            helper.make_node("Cast", [rows], [as_float], name=gather.name + "_cast", to=TensorProto.FLOAT),
        ]
        if per_row:
            nodes.append(helper.make_node("Gather", [scale.name, ids], [scale_rows], name=gather.name + "_scale",
                                          axis=0))
        nodes.append(helper.make_node("Mul", [as_float, scale_rows if per_row else scale.name], [gather.output[0]],
                                      name=gather.name + "_dequantize"))
        replaced[id(gather)] = nodes
        dropped.update({id(mul), id(cast)})
        tables.append(quantised.name)

    if not replaced:
        return Rewrite(model, ())
    nodes = []
    for node in graph.node:  # keep the graph's order: a replacement sits where its Gather was
        if id(node) in replaced:
            nodes.extend(replaced[id(node)])
        elif id(node) not in dropped:
            nodes.append(node)
    del graph.node[:]
    graph.node.extend(nodes)
    try:
        onnx.checker.check_model(proto)
    except Exception as exc:
        raise ModelGraphError(f"the rewritten model does not check: {type(exc).__name__}: {exc}") from exc
    return Rewrite(proto.SerializeToString(), tuple(tables))


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
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    try:
        proto = onnx.load_model_from_string(model)
    except Exception as exc:  # protobuf DecodeError and friends
        raise ModelGraphError(f"not an ONNX model: {type(exc).__name__}: {exc}") from exc
    graph = proto.graph
    inits = {i.name: i for i in graph.initializer}
    producer = {out: node for node in graph.node for out in node.output}
    readers: dict[str, int] = {}
    for node in graph.node:
        for name in node.input:
            readers[name] = readers.get(name, 0) + 1
    graph_outputs = {o.name for o in graph.output}

    replaced: dict[int, object] = {}  # id(MatMul node) -> its MatMulNBits node
    dropped: set[int] = set()
    added: list = []
    weights: list[str] = []
    for matmul in graph.node:
        if matmul.op_type != "MatMul" or matmul.domain not in ("", "ai.onnx"):
            continue
        weight = matmul.input[1]
        mul = producer.get(weight)
        if mul is None or mul.op_type != "Mul" or readers.get(weight) != 1 or weight in graph_outputs:
            continue
        cast = producer.get(mul.input[0])
        scale = inits.get(mul.input[1])
        if cast is None or cast.op_type != "Cast" or scale is None or readers.get(mul.input[0]) != 1:
            continue
        quantised = inits.get(cast.input[0])
        to = next((a.i for a in cast.attribute if a.name == "to"), None)
        if quantised is None or quantised.data_type != TensorProto.INT8 or to != TensorProto.FLOAT:
            continue
        if len(quantised.dims) != 2 or scale.data_type != TensorProto.FLOAT:
            continue
        k, n = quantised.dims
        if k % block_size:
            continue
        s = numpy_helper.to_array(scale)
        if s.size == 1:
            per_column = np.full(n, s.reshape(-1)[0], dtype=np.float32)
        elif list(scale.dims) in ([n], [1, n]):
            per_column = s.reshape(n).astype(np.float32)
        else:
            continue
        q = numpy_helper.to_array(quantised)
        blocks = k // block_size
        stored = (q.astype(np.int16) + 128).astype(np.uint8).T.reshape(n, blocks, block_size)
        base = quantised.name + "_nbits"
        added += [numpy_helper.from_array(stored, base + "_B"),
                  numpy_helper.from_array(np.repeat(per_column, blocks), base + "_scales"),
                  numpy_helper.from_array(np.full(n * blocks, 128, dtype=np.uint8), base + "_zero_points")]
        replaced[id(matmul)] = helper.make_node(
            "MatMulNBits", [matmul.input[0], base + "_B", base + "_scales", base + "_zero_points"],
            list(matmul.output), name=(matmul.name or weight) + "_nbits", domain="com.microsoft",
            K=k, N=n, bits=8, block_size=block_size, accuracy_level=accuracy_level)
        dropped.update({id(mul), id(cast)})
        weights.append(quantised.name)

    if not replaced:
        return Rewrite(model, ())
    nodes = [replaced.get(id(node), node) for node in graph.node if id(node) not in dropped]
    del graph.node[:]
    graph.node.extend(nodes)
    used = {name for node in graph.node for name in node.input} | graph_outputs
    kept = [i for i in graph.initializer if i.name in used]
    del graph.initializer[:]
    graph.initializer.extend(kept + added)
    if not any(o.domain == "com.microsoft" for o in proto.opset_import):
        proto.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    try:
        onnx.checker.check_model(proto)
    except Exception as exc:
        raise ModelGraphError(f"the rewritten model does not check: {type(exc).__name__}: {exc}") from exc
    return Rewrite(proto.SerializeToString(), tuple(weights))
