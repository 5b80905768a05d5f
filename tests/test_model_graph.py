"""The model rewrite that keeps lookup tables int8: same vectors, tables int8, other graphs alone."""

from __future__ import annotations

import hashlib
import random
import shutil
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from indexer.embedding import model_files as mf
from indexer.embedding.embedder import FastEmbedder
from indexer.embedding.model_graph import ModelGraphError, gather_before_dequantize


def _corpus() -> list[str]:
    """Texts that read many rows of the word table (random vocabulary, every length up to
    past the 256-token window), plus ordinary, numeric and non-Latin text."""
    from tokenizers import Tokenizer

    vocab = list(Tokenizer.from_file(str(mf.default_model_dir() / "tokenizer.json")).get_vocab())
    rng = random.Random(20261124)
    texts = [" ".join(rng.choice(vocab) for _ in range(rng.randint(1, 320))) for _ in range(160)]
    texts += [
        "", "JWT expiry: we settled on 15 minutes for access tokens and 7 days for refresh tokens.",
        "Ünïcödé, 日本語のテキスト, emoji 🚀 and numbers 3.14159 / 2026-11-24.",
        "ok", "See ticket #4521 — the migration ran twice on staging.",
    ]
    return texts


def test_rewritten_model_computes_bit_identical_vectors(tmp_path: Path) -> None:
    packaged = FastEmbedder()  # the assembled folder: the rewritten model.onnx
    assert mf.sha256_file(packaged.model_dir / "model.onnx") == mf.MODEL_ONNX_SHA256
    original = tmp_path / "original"
    shutil.copytree(packaged.model_dir, original)
    shutil.copyfile(mf.locate_sources()["model.onnx"], original / "model.onnx")
    assert mf.sha256_file(original / "model.onnx") == mf.ONNX_SHA256
    source = FastEmbedder(model_path=original)

    texts = _corpus()
    got, want = packaged.embed(texts), source.embed(texts)
    assert got.shape == want.shape == (len(texts), 384)
    assert np.array_equal(got, want)  # bit for bit: the index's vectors stay valid (same fingerprint)
    for query in texts[-5:] + texts[:3]:
        assert np.array_equal(packaged.embed_query(query), source.embed_query(query))
    assert packaged.fingerprint == mf.FINGERPRINT


def test_the_packaged_tables_stay_int8_behind_their_lookups() -> None:
    source = mf.locate_sources()["model.onnx"].read_bytes()
    rewrite = gather_before_dequantize(source)
    assert rewrite.tables == ("inner.embeddings.word_embeddings.weight_q",
                              "inner.embeddings.position_embeddings.weight_q")
    assert hashlib.sha256(rewrite.data).hexdigest() == mf.MODEL_ONNX_SHA256
    assert gather_before_dequantize(source).data == rewrite.data  # deterministic

    graph = onnx.load_model_from_string(rewrite.data).graph
    int8 = {i.name for i in graph.initializer if i.data_type == TensorProto.INT8}
    readers = {name: [n.op_type for n in graph.node if name in n.input] for name in rewrite.tables}
    assert readers == {name: ["Gather"] for name in rewrite.tables}
    assert set(rewrite.tables) <= int8
    # Every other int8 weight is still dequantised as before (the layers' matrices).
    before = onnx.load_model_from_string(source).graph
    casts = sum(1 for n in before.node if n.op_type == "Cast" and n.input[0] in int8)
    assert sum(1 for n in graph.node if n.op_type == "Cast" and n.input[0] in int8) == casts - 2


def _table_model(scale: np.ndarray, *, table_dtype=np.int8, extra_reader: bool = False) -> bytes:
    rng = np.random.default_rng(7)
    table = rng.integers(-127, 128, size=(50, 6)).astype(table_dtype)
    nodes = [
        helper.make_node("Cast", ["table_q"], ["table_f"], to=TensorProto.FLOAT),
        helper.make_node("Mul", ["table_f", "scale"], ["table"]),
        helper.make_node("Gather", ["table", "ids"], ["out"], axis=0),
    ]
    outputs = [helper.make_tensor_value_info("out", TensorProto.FLOAT, [None, 6])]
    if extra_reader:
        nodes.append(helper.make_node("ReduceSum", ["table"], ["total"]))
        outputs.append(helper.make_tensor_value_info("total", TensorProto.FLOAT, []))
    graph = helper.make_graph(
        nodes, "t", [helper.make_tensor_value_info("ids", TensorProto.INT64, [None])], outputs,
        initializer=[numpy_helper.from_array(table, "table_q"), numpy_helper.from_array(scale, "scale")],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


def _run(model: bytes, ids: np.ndarray) -> list[np.ndarray]:
    return ort.InferenceSession(model, providers=["CPUExecutionProvider"]).run(None, {"ids": ids})


@pytest.mark.parametrize("scale", [
    np.random.default_rng(1).random((50, 1), dtype=np.float32),  # per row
    np.array([0.0123], dtype=np.float32),  # per tensor
], ids=["per-row", "per-tensor"])
def test_a_qualifying_table_is_rewritten_and_computes_the_same(scale: np.ndarray) -> None:
    model = _table_model(scale)
    rewrite = gather_before_dequantize(model)
    assert rewrite.tables == ("table_q",)
    ids = np.array([0, 49, 7, 7, 23], dtype=np.int64)
    assert np.array_equal(_run(rewrite.data, ids)[0], _run(model, ids)[0])


@pytest.mark.parametrize("case", ["per-column scale", "float table", "table read elsewhere"])
def test_other_graphs_are_left_alone(case: str) -> None:
    if case == "per-column scale":
        model = _table_model(np.full((1, 6), 0.5, dtype=np.float32))
    elif case == "float table":
        model = _table_model(np.full((50, 1), 0.5, dtype=np.float32), table_dtype=np.float32)
    else:
        model = _table_model(np.full((50, 1), 0.5, dtype=np.float32), extra_reader=True)
    rewrite = gather_before_dequantize(model)
    assert rewrite == type(rewrite)(model, ())


def test_not_a_model_is_a_clear_error() -> None:
    with pytest.raises(ModelGraphError, match="not an ONNX model"):
        gather_before_dequantize(b"\x00\xffnot protobuf at all" * 10)
    with pytest.raises(mf.ModelFilesError, match="cannot rewrite the packaged model.*make setup"):
        mf.rewritten_model(b"\x00\xffnot protobuf at all" * 10)


def test_a_folder_from_before_the_rewrite_is_re_assembled(tmp_path: Path) -> None:
    folder = mf.assemble(tmp_path)
    shutil.copyfile(mf.locate_sources()["model.onnx"], folder / "model.onnx")  # as older versions copied it
    with pytest.raises(mf.ModelFilesError, match=r"older ledger-indexer.*model_files check"):
        mf.verify_folder(folder)
    assert mf.assemble(tmp_path) == folder
    assert mf.sha256_file(folder / "model.onnx") == mf.MODEL_ONNX_SHA256
