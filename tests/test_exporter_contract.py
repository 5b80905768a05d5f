"""One contract, every sink (exporters/base.py). The contract does not depend on
the embedding model, so the LanceDB sink runs with the deterministic embedder."""

from __future__ import annotations

import pytest

from exporters.base import Exporter, Rebuild
from exporters.lancedb import LanceSink
from exporters.qmd import QmdExporter
from indexer.core.types import Document
from tests.builders import document
from tests.fake_embedder import FakeEmbedder


def doc(label: str, turn: str, body: str, persona: str = "atlas") -> Document:
    return document(body, persona=persona, session=label, turn=turn, title=f"{label} {turn}",
                    timestamp_ms=1_763_000_000_000)


@pytest.fixture(params=["qmd", "lancedb"])
def sink(request, tmp_path) -> Exporter:
    if request.param == "qmd":
        s = QmdExporter(tmp_path / "qmd")
    else:
        s = LanceSink(tmp_path / "lancedb", FakeEmbedder(), chunk_max_tokens=30, chunk_overlap=5)
    yield s
    s.close()


def long_body(n: int) -> str:
    return "\n".join(f"User: line {i} about kafka retention and jwt expiry" for i in range(n))


def test_satisfies_the_protocol(sink):
    assert isinstance(sink, Exporter) and sink.name in ("qmd", "lancedb")
    assert isinstance(sink.rebuild("atlas"), Rebuild)


def test_upsert_is_idempotent_and_read_returns_the_text(sink):
    docs = [doc("main", "T1", "User: hi"), doc("main", "T2", "User: there")]
    sink.upsert("atlas", docs)
    sink.upsert("atlas", docs)
    assert sink.paths("atlas") == {d.path for d in docs}
    assert sink.read("atlas", docs[0].path) == docs[0].text
    assert sink.read("atlas", "sessions/main/turns/none.md") is None


def test_replace_and_shrink_leave_nothing_stale(sink):
    big = doc("main", "T1", long_body(40))
    sink.upsert("atlas", [big])
    small = doc("main", "T1", "User: short now")
    sink.upsert("atlas", [small])
    assert sink.read("atlas", small.path) == small.text
    assert sink.paths("atlas") == {small.path}
    if isinstance(sink, LanceSink):
        rows = sink.active_table("atlas").count_rows(f"path = '{small.path}'")
        assert rows == 1


def test_delete_and_unknown_paths(sink):
    a, b = doc("main", "T1", "User: a"), doc("main", "T2", "User: b")
    sink.upsert("atlas", [a, b])
    sink.delete("atlas", [a.path, "sessions/ghost/turns/x.md"])
    assert sink.paths("atlas") == {b.path}
    sink.delete("atlas", [])
    assert sink.paths("atlas") == {b.path}


def test_personas_are_isolated(sink):
    sink.upsert("atlas", [doc("main", "T1", "User: atlas only")])
    sink.upsert("nova", [doc("main", "T1", "User: nova only", persona="nova")])
    assert sink.read("atlas", "sessions/main/turns/T1.md").endswith("atlas only")
    assert sink.read("nova", "sessions/main/turns/T1.md").endswith("nova only")
    sink.delete("nova", ["sessions/main/turns/T1.md"])
    assert sink.paths("atlas") == {"sessions/main/turns/T1.md"} and sink.paths("nova") == set()


def test_hostile_labels(sink):
    docs = [doc(label, "T1", f"User: {label}") for label in ("it's \"quoted\"", "a' OR '1'='1", "../../etc", "ünï")]
    sink.upsert("atlas", docs)
    assert sink.paths("atlas") == {d.path for d in docs}
    for d in docs:
        assert sink.read("atlas", d.path) == d.text
    sink.delete("atlas", [docs[1].path])
    assert docs[1].path not in sink.paths("atlas") and len(sink.paths("atlas")) == 3


def test_rebuild_commit_replaces_the_set_and_abort_keeps_it(sink):
    old = [doc("main", "T1", "User: old one"), doc("main", "T2", "User: old two")]
    sink.upsert("atlas", old)
    rb = sink.rebuild("atlas")
    new = [doc("main", "T1", "User: new one"), doc("main", "T3", "User: new three")]
    rb.upsert(new)
    assert sink.paths("atlas") == {d.path for d in old}  # invisible until commit
    assert sink.read("atlas", old[0].path) == old[0].text
    rb.commit()
    assert sink.paths("atlas") == {d.path for d in new}
    assert sink.read("atlas", new[0].path) == new[0].text
    rb2 = sink.rebuild("atlas")
    rb2.upsert([doc("main", "T9", "User: never")])
    rb2.abort()
    assert sink.paths("atlas") == {d.path for d in new}


def test_after_batch_and_close_do_not_raise(sink):
    sink.upsert("atlas", [doc("main", "T1", "User: x")])
    sink.after_batch()


# -- the optional-looking methods are part of the contract -------------------------------------


def test_every_method_the_indexer_calls_is_declared_and_answers(sink):
    sink.upsert("atlas", [doc("main", "T1", "User: hi"), doc("main", "T2", "User: there")])
    assert isinstance(sink.fingerprint, str) and sink.fingerprint
    assert isinstance(sink.enforces_scopes, bool)
    assert sink.needs_rebuild("atlas") is None
    assert sink.missing("atlas") is None and "nova" in (sink.missing("nova") or "")  # held / never written
    stats = sink.stats("atlas")
    assert stats["documents"] == 2 and ("chunks" in stats)
    assert isinstance(sink.maintain(force=True), dict)
    assert sink.paths("atlas") == {doc("main", "T1", "").path, doc("main", "T2", "").path}  # maintenance kept all


# -- error cases: each method raises what base.py says, and a failure loses nothing ---------------


def test_unknown_paths_and_personas_are_not_errors(sink):
    assert sink.paths("nobody") == set()
    assert sink.read("nobody", "sessions/x/turns/none.md") is None
    sink.delete("nobody", ["sessions/x/turns/none.md"])  # nothing to delete: no error
    assert sink.stats("nobody")["documents"] == 0


def test_a_store_that_vanished_raises_sink_error_never_a_traceback_of_another_kind(sink, tmp_path):
    import shutil

    from exporters.base import SinkError

    sink.upsert("atlas", [doc("main", "T1", "User: hi")])
    root = tmp_path / ("qmd" if sink.name == "qmd" else "lancedb")
    shutil.rmtree(root)
    root.write_text("a file where the store's folder was")  # not even a directory any more
    with pytest.raises(SinkError) as caught:
        sink.upsert("atlas", [doc("main", "T2", "User: after")])
    assert str(caught.value)
