"""What the parts of :class:`indexer.state.db.StateDB` share: declared once, for the type checker.

``StateDB`` is assembled from mixins (documents, meta, registry, revisits, scope facts), each of
which reads the connection and the models ``StateDB.__init__`` sets, and a few of which call a
method another part defines. ``StoreBase`` declares those attributes and, for the type checker
only, those methods: a mixin's methods are checked against them, and a real definition that drifts
from its declaration here is reported as an incompatible override.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, TypeAlias, TypeVar

from indexer.state.transactions import StateDatabase

if TYPE_CHECKING:
    from indexer.core.build import BuildIdentity
    from indexer.state.private_turns import PrivateTurns

#: A peewee model class of the state DB. ``schema._models`` makes them per database, and their
#: columns are class attributes (``File.path``) that peewee's stubs cannot see on ``type[Model]``.
TableModel: TypeAlias = Any

T = TypeVar("T")


class StoreBase:
    """Set by ``StateDB.__init__``: the connection, the models of today's schema, the thread memo."""

    db: StateDatabase
    Meta: TableModel
    File: TableModel
    SessionReg: TableModel
    ProjectMember: TableModel
    EmptyTurn: TableModel
    PersonaState: TableModel
    Revisit: TableModel
    LateCheckpoint: TableModel
    PrivateOwnTurn: TableModel
    CopyInFlight: TableModel
    TruncatedDocument: TableModel
    UnscopedHidden: TableModel
    #: scope facts per thread (``scope_facts``)
    _facts: threading.local
    private: PrivateTurns

    if TYPE_CHECKING:
        # Methods one part calls on another (defined in the module named beside each).

        # documents
        def turn_holders(self, persona: str, turns: Iterable[str]) -> dict[str, set[str]]: ...
        def _rows_in(self, sql: str, persona: str, values: Sequence[str]) -> list[tuple]: ...
        def turns_of(self, persona: str, sessions: Iterable[str]) -> set[str]: ...
        def personas_indexed(self) -> list[str]: ...

        # meta
        def _set_persona(self, persona: str, **values: Any) -> None: ...
        def forget_persona_state(self, persona: str) -> None: ...
        def build_identity(self, persona: str) -> BuildIdentity | None: ...
        def built_personas(self) -> list[str]: ...

        # registry
        def private_sessions(self, persona: str) -> set[str]: ...
        def deleted_sessions(self, persona: str) -> set[str]: ...
        def project_peers(self, label: str) -> set[str]: ...
        def projects(self) -> dict[str, list[str]]: ...

        # scope_facts
        def _per_state(self, key: object, compute: Callable[[], T]) -> T: ...
