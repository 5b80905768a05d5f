"""The state DB's connection: peewee's SQLite database whose rollbacks never hide the error that caused them.

On some errors SQLite rolls the whole transaction back by itself (``SQLITE_FULL``
in a write or a COMMIT, ``SQLITE_IOERR``, ...). peewee's ``atomic()`` then
issues its own ``ROLLBACK`` (or ``ROLLBACK TO SAVEPOINT``), which fails with
"cannot rollback - no transaction is active" (or "no such savepoint"), and
that error replaces the real one: a full disk reached the API and the logs as
"cannot rollback". Here a rollback with no transaction open is a no-op, so
the original exception propagates.
"""

from __future__ import annotations

from peewee import SqliteDatabase, _savepoint


def _rolled_back_already(db: SqliteDatabase) -> bool:
    """SQLite ended the transaction itself (``sqlite3_get_autocommit``): nothing left to undo."""
    return not db.is_closed() and not db.connection().in_transaction


class _Savepoint(_savepoint):
    def rollback(self, begin: bool = True) -> None:
        if _rolled_back_already(self.db):  # the savepoint went with the transaction
            return
        super().rollback(begin)


class StateDatabase(SqliteDatabase):
    def rollback(self) -> None:
        if _rolled_back_already(self):
            return
        super().rollback()

    def savepoint(self) -> _Savepoint:
        return _Savepoint(self)
