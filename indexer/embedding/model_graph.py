"""Keep the packaged model's int8 embedding tables int8 in memory.

The packaged all-MiniLM-L6-v2 stores its weights as int8 behind a
``Cast`` (to float32) and a ``Mul`` by a per-row scale. ONNX Runtime folds
those constants when it loads the model, so every table is resident as
float32: the word-embedding table alone is 30,522 × 384 values, 47 MB as
float32 against 12 MB as int8. A lookup table is only ever read through its
``Gather``, so the dequantisation can move behind the lookup:

    Gather(Mul(Cast(W_q), s), ids)  →  Mul(Cast(Gather(W_q, ids)), Gather(s, ids))

Each output element is the same float32 product of the same two operands
(``float(q) * s`` of its row), so the model computes bit-identical vectors
(``tests/test_model_graph.py`` embeds a corpus with both files) while the
table stays int8: ~34 MB less resident per loaded model. The matrix weights
of the layers stay as they are: ONNX Runtime has no kernel that multiplies
float activations by int8 weights without quantising the activations too,
which would change the vectors.

:func:`gather_before_dequantize` is pure (bytes in, bytes out, deterministic
for one ``onnx`` version, which ``pyproject.toml`` pins: the assembled file's
sha256 is pinned in :mod:`indexer.embedding.model_files`).
"""

from __future__ import annotations

from dataclasses import dataclass


class ModelGraphError(ValueError):
    """The model file could not be parsed or rewritten."""


@dataclass(frozen=True, slots=True)
class Rewrite:
    """A rewritten model: its bytes and the lookup tables it keeps as int8."""

    data: bytes
    tables: tuple[str, ...]


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
