"""Peewee models of the ledger tables (``agents_ledger.sql``).

Only the columns the indexer reads are declared; real ledgers may carry more,
and peewee never selects undeclared columns. The models are bound to a
database at query time (``Model.bind_ctx``), never at import.
"""

from __future__ import annotations

from peewee import IntegerField, Model, TextField


class _LedgerModel(Model):
    class Meta:
        database = None
        legacy_table_names = False


class Turn(_LedgerModel):
    id = TextField(primary_key=True)
    parent_turn_id = TextField(null=True)
    turn_type = TextField()
    status = TextField()
    started_at = IntegerField()
    completed_at = IntegerField(null=True)
    model = TextField(null=True)
    provider = TextField(null=True)

    class Meta:
        table_name = "turns"


class Thread(_LedgerModel):
    turn_id = TextField(primary_key=True)
    ancestry = TextField(null=True)
    persona_id = TextField(null=True)

    class Meta:
        table_name = "threads"


class Session(_LedgerModel):
    label = TextField(primary_key=True)
    thread_id = TextField()
    persona_id = TextField()
    created_at = IntegerField()
    updated_at = IntegerField()
    status = TextField()

    class Meta:
        table_name = "sessions"


class Message(_LedgerModel):
    id = TextField(primary_key=True)
    turn_id = TextField()
    role = TextField()
    content = TextField(null=True)
    sequence = IntegerField()
    created_at = IntegerField()

    class Meta:
        table_name = "messages"


class Compaction(_LedgerModel):
    turn_id = TextField(primary_key=True)
    summary = TextField(null=True)
    model = TextField(null=True)
    provider = TextField(null=True)

    class Meta:
        table_name = "compactions"


class SessionHistory(_LedgerModel):
    id = IntegerField(primary_key=True)
    session_label = TextField()
    thread_id = TextField()
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
