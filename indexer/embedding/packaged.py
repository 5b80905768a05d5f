"""The embedding models this build ships, assembled offline from pinned packages, by config name.

Each entry says where its verified folder comes from, its fingerprint (what an index records:
a change of model re-embeds beside the live index) and the prefixes the model was trained
with. :data:`DEFAULT` is ``[embedding] model``'s default.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from indexer.embedding import e5_files, model_files


@dataclass(frozen=True, slots=True)
class PackagedModel:
    name: str
    folder_name: str
    fingerprint: str
    max_tokens: int
    query_prefix: str
    document_prefix: str
    #: (models_root or None) -> the verified folder, assembled there when the venv has none
    locate: Callable[..., Path]
    #: folder -> its verified ModelFolder (raises ModelFilesError)
    verify: Callable[[Path], model_files.ModelFolder]
    #: registered with fastembed as a custom model (mean pooling, normalised) before loading
    custom: bool
    #: the model's cosine scale, read by indexer.core.ranking.vector_score: ``cosine_floor`` what it
    #: gives unrelated text, ``cosine_ceiling`` a query against its own words as a document, so
    #: 0 means "unrelated" and 1 "the query's own words" whatever the model
    cosine_floor: float = 0.0
    cosine_ceiling: float = 1.0


MINILM = PackagedModel(model_files.MODEL_NAME, model_files.FOLDER_NAME, model_files.FINGERPRINT,
                       model_files.MAX_TOKENS, "", "", model_files.packaged_model_dir, model_files.verify_folder,
                       custom=False)
E5_SMALL = PackagedModel(e5_files.MODEL_NAME, e5_files.FOLDER_NAME, e5_files.FINGERPRINT, e5_files.MAX_TOKENS,
                         e5_files.QUERY_PREFIX, e5_files.DOCUMENT_PREFIX, e5_files.packaged_model_dir,
                         e5_files.verify_folder, custom=True,
                         # bench/recall_models.py on LoCoMo: median cosine of a question and an unrelated
                         # line 0.75 → 0.10 (MiniLM's 0.10); a text as query against itself as passage
                         # 0.92-0.94 → 0.9-1 (MiniLM's ~1); question and its gold line 0.85 → 0.57 (MiniLM 0.51)
                         cosine_floor=0.73, cosine_ceiling=0.94)
MODELS: dict[str, PackagedModel] = {m.name: m for m in (MINILM, E5_SMALL)}
#: MiniLM: e5 finds more with the vector stage alone (LoCoMo R@10 56.3 vs 48.9) but not with hybrid, the
#: default mode (70.0 vs 70.2 cross-validated), for ~1.8x the query CPU and ~0.6x the sync throughput
#: (bench/recall_compare.py, bench/recall_models.py): by recall per cost, MiniLM stays the default.
DEFAULT = MINILM


def register_custom(model: PackagedModel) -> None:
    """Tell fastembed how to load ``model``'s folder (once per process)."""
    from fastembed import TextEmbedding
    from fastembed.common.model_description import ModelSource, PoolingType

    if any(m["model"].lower() == model.name.lower() for m in TextEmbedding.list_supported_models()):
        return
    TextEmbedding.add_custom_model(model.name, pooling=PoolingType.MEAN, normalization=True,
                                   sources=ModelSource(hf=model.name), dim=e5_files.DIM, model_file="model.onnx",
                                   description="packaged offline (ledger-indexer)")
