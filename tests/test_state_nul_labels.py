"""Session labels and turn ids may hold any character, NUL included (the ledger's labels are any
string): every state-DB lookup by a list of them finds exactly them (SQLite's JSON functions cut a
string at NUL, so a label 'nul\\0label' read as 'nul')."""

from __future__ import annotations

from indexer.state.db import StateDB


def _state(tmp_path) -> StateDB:
    state = StateDB(tmp_path / "state.sqlite")
    F = state.File
    rows = [("nul\x00label", "t-own"), ("nul", "t-prefix"), ("nul\x00label", "t\x00odd")]
    F.insert_many([{"persona": "atlas", "path": f"sessions/{i}.md", "source": "sessions", "session_label": label,
                    "turn_id": turn, "kind": "turn", "content_hash": "h", "updated_at": 0}
                   for i, (label, turn) in enumerate(rows)]).execute()
    return state


def test_lookups_by_label_and_turn_keep_nul(tmp_path):
    state = _state(tmp_path)
    try:
        assert state.session_turns("atlas", ["nul\x00label"]) == {"nul\x00label": {"t-own", "t\x00odd"}}
        assert state.session_turns("atlas", ["nul", "nul\x00label"]) == {
            "nul": {"t-prefix"}, "nul\x00label": {"t-own", "t\x00odd"}}
        assert state.turn_holders("atlas", ["t\x00odd", "t-prefix"]) == {"t\x00odd": {"nul\x00label"},
                                                                        "t-prefix": {"nul"}}
    finally:
        state.close()


def test_empty_turns_of_a_nul_label_are_cleared_when_filled(tmp_path):
    state = _state(tmp_path)
    try:
        state.record_empty("atlas", [("nul\x00label", "t9"), ("nul", "t9")], filled=())
        assert state.holders_of_late("atlas", ["t9"]) == [("nul", "t9"), ("nul\x00label", "t9")]
        state.record_empty("atlas", [], filled=[("nul\x00label", "t9")])
        assert state.holders_of_late("atlas", ["t9"]) == [("nul", "t9")]
    finally:
        state.close()


def test_lookups_of_more_values_than_one_statement_binds(tmp_path):
    state = _state(tmp_path)
    try:
        many = [f"s{i}" for i in range(2500)] + ["nul\x00label"]
        assert state.session_turns("atlas", many)["nul\x00label"] == {"t-own", "t\x00odd"}
        pairs = [(f"s{i}", "t") for i in range(1200)]
        state.record_empty("atlas", pairs, filled=())
        state.record_empty("atlas", [], filled=pairs)
        assert state.holders_of_late("atlas", ["t"]) == []
    finally:
        state.close()
