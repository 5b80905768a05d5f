"""The pure core: typed values, documents, safe names, chunking, ranking, scopes, time hints. No I/O."""
