"""The embedding model: packaged model files, the fastembed binding, the vector cache."""
