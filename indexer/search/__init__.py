"""Scoped ``memory_search`` and ``memory_get`` over the index."""
