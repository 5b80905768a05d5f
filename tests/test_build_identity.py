"""One record of what an index was built with (indexer/core/build.py), read and
written by the state DB only, compared by the sync engine."""

from __future__ import annotations

from indexer.core.build import DOCUMENT_FORMAT_VERSION, BuildIdentity
from indexer.state.db import StateDB

IDENTITY = BuildIdentity(DOCUMENT_FORMAT_VERSION, "1.2.0+abc", 1_000_000,
                         (("lancedb", "lancedb:fp:d384:lines-v2/254/40:s2"), ("qmd", "qmd")))


def test_stored_form_is_the_earlier_index_metadata_so_an_upgrade_rebuilds_nothing() -> None:
    assert IDENTITY.as_dict() == {
        "format": "doc-v3", "redaction": "1.2.0+abc", "max_message_bytes": 1_000_000,
        "sinks": {"lancedb": "lancedb:fp:d384:lines-v2/254/40:s2", "qmd": "qmd"},
    }
    assert BuildIdentity.from_dict(IDENTITY.as_dict()) == IDENTITY


def test_unreadable_stored_forms_read_as_none() -> None:
    for data in (None, [], {}, {"format": "doc-v1"}, {"format": "x", "redaction": "r", "max_message_bytes": "many",
                                                       "sinks": {}}, {"format": "x", "redaction": "r",
                                                                      "max_message_bytes": 1, "sinks": ["a"]}):
        assert BuildIdentity.from_dict(data) is None


def test_differences_name_the_fields_that_changed() -> None:
    import dataclasses

    assert IDENTITY.differences(IDENTITY) == []
    assert IDENTITY.differences(None) == ["document_format", "redaction", "max_message_bytes", "sinks"]
    wider = dataclasses.replace(IDENTITY, max_message_bytes=2_000_000, sinks=(("lancedb", "other"),))
    assert wider.differences(IDENTITY) == ["max_message_bytes", "sinks"]


def test_the_state_db_reads_and_writes_it_per_persona(tmp_path) -> None:
    state = StateDB(tmp_path / "state.db")
    try:
        assert state.build_identity("atlas") is None
        state.set_build_identity("atlas", IDENTITY)
        assert state.build_identity("atlas") == IDENTITY
        assert state.build_identity("nova") is None
    finally:
        state.close()
