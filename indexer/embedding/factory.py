"""The query and document embedder a config asks for: the packaged model behind a vector cache."""

from __future__ import annotations

from pathlib import Path

from indexer.runtime.config import Config


def make_embedder(config: Config):
    from indexer.embedding.cache import CachedEmbedder
    from indexer.embedding.embedder import FastEmbedder

    inner = FastEmbedder(
        config.embedding.model,
        model_path=Path(config.embedding.model_path) if config.embedding.model_path else None,
        batch_size=config.embedding.batch_size,
        models_dir=config.index.dir / "models",
        cpu_mem_arena=config.embedding.cpu_mem_arena,
        max_batch_tokens=config.embedding.max_batch_tokens,
        allow_spinning=config.embedding.allow_spinning,
        release_memory=config.embedding.release_memory,
    )
    return CachedEmbedder(inner, config.index.dir / "embed_cache.sqlite")
