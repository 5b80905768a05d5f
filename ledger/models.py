"""Peewee models of the ledger tables (``agents_ledger.sql``).

Only the columns the indexer reads are declared; real ledgers may carry more,
and peewee never selects undeclared columns. The models are bound to a
database at query time (``Model.bind_ctx``), never at import.
"""

from __future__ import annotations

from peewee import IntegerField, Model, TextField


class LedgerText(TextField):
    """A text column as the ledger connection reads text: a BLOB stored in it (SQLite keeps whatever
    a writer stored) is decoded with invalid UTF-8 replaced, not raised on (peewee decodes strictly)."""

    def adapt(self, value):
        if isinstance(value, (bytes, bytearray)):
            return bytes(value).decode("utf-8", "replace")
        return super().adapt(value)


class _LedgerModel(Model):
    class Meta:
        database = None
        legacy_table_names = False


class Turn(_LedgerModel):
    id = LedgerText(primary_key=True)
    parent_turn_id = LedgerText(null=True)
    turn_type = LedgerText()
    status = LedgerText()
    started_at = IntegerField()
    completed_at = IntegerField(null=True)
    model = LedgerText(null=True)
    provider = LedgerText(null=True)

    class Meta:
        table_name = "turns"


class Thread(_LedgerModel):
    turn_id = LedgerText(primary_key=True)
    ancestry = LedgerText(null=True)
    persona_id = LedgerText(null=True)

    class Meta:
        table_name = "threads"


class Session(_LedgerModel):
    label = LedgerText(primary_key=True)
    thread_id = LedgerText()
    persona_id = LedgerText()
    created_at = IntegerField()
    updated_at = IntegerField()
    status = LedgerText()

    class Meta:
        table_name = "sessions"


class Message(_LedgerModel):
    id = LedgerText(primary_key=True)
    turn_id = LedgerText()
    role = LedgerText()
    content = LedgerText(null=True)
    sequence = IntegerField()
    created_at = IntegerField()

    class Meta:
        table_name = "messages"


class Compaction(_LedgerModel):
    turn_id = LedgerText(primary_key=True)
    summary = LedgerText(null=True)
    model = LedgerText(null=True)
    provider = LedgerText(null=True)

    class Meta:
        table_name = "compactions"


class SessionHistory(_LedgerModel):
    id = IntegerField(primary_key=True)
    session_label = LedgerText()
    thread_id = LedgerText()
    changed_at = IntegerField()

    class Meta:
        table_name = "session_history"


ALL_MODELS = (Turn, Thread, Session, Message, Compaction, SessionHistory)


class BoundModels:
    """Per-connection copies of the models. Peewee's ``bind`` is global; a copy
    per reader lets several readers (threads, tests) coexist safely."""

    def __init__(self, db) -> None:
        for model in ALL_MODELS:
            meta = type("Meta", (), {"database": db, "table_name": model._meta.table_name})
            setattr(self, model.__name__, type(model.__name__, (model,), {"Meta": meta, "__module__": __name__}))
