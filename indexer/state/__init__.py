"""Local state of the writer: the state DB (cursor, hashes, sessions, projects) and the index lock."""
