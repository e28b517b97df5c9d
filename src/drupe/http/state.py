"""What the routes share: the runtime (``app.state.runtime``) and the status board.

``StatusBoard`` mirrors every conversation status change the stream manager reports (one
status observer for the whole app), so ``GET /api/status`` and the conversation list can show
live badges without reaching into the manager. It is only a mirror: the manager decides. In
cluster mode it also mirrors the other nodes' changes (``observe_remote``, fed by
``runtime.cluster_status``), and passes them on to its remote observers (the multiplexed event
streams), so every node shows every node's streams.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Final

from fastapi import Request

from drupe.admission.principal import Principal
from drupe.errors import UnknownConversationError
from drupe.http.errors import Forbidden, Unauthorized
from drupe.streaming.contracts import StatusObserver
from drupe.streaming.listeners.base import Listener
from drupe.streaming.manager import StatusRecord, StreamManager
from drupe.streaming.status_book import DEFAULT_MAX_RECORDS, evict_unpinned

if TYPE_CHECKING:
    from drupe.app import Runtime

__all__ = [
    "StatusBoard",
    "attach",
    "ensure_known",
    "get_board",
    "get_caller",
    "get_runtime",
    "require_admin",
]

log = logging.getLogger(__name__)

_IN_PROGRESS: Final = frozenset(("pending", "streaming"))


class StatusBoard:
    """``conversation id -> latest status`` (absent: ``idle``).

    Bounded like the manager's status book: at most ``max_entries`` entries plus the live
    conversations, least recently changed out first; a live conversation (``pending``,
    ``streaming``) is never dropped. A dropped conversation reads ``idle``: its outcome (an
    answer, a pending tool approval) is in its stored rows.
    """

    def __init__(self, max_entries: int = DEFAULT_MAX_RECORDS) -> None:
        if max_entries < 1:
            raise ValueError("max_entries must be >= 1")
        self.max_entries = max_entries
        self.records: OrderedDict[str, StatusRecord] = OrderedDict()
        self._remote_observers: list[StatusObserver] = []

    @property
    def statuses(self) -> dict[str, str]:
        """``conversation id -> status`` of every entry (``GET /api/status``)."""
        return {cid: record.status for cid, record in self.records.items()}

    def observe(self, conversation_id: str, record: StatusRecord) -> None:
        self.records[conversation_id] = record
        self.records.move_to_end(conversation_id)
        if len(self.records) > self.max_entries:
            evict_unpinned(self.records, self.max_entries, _in_progress)

    def observe_remote(self, conversation_id: str, record: StatusRecord) -> None:
        """Another node's change (cluster mode): mirror it and tell the remote observers."""
        self.observe(conversation_id, record)
        for observer in list(self._remote_observers):
            try:
                observer(conversation_id, record)
            except Exception:  # isolation boundary: one event stream's observer
                log.exception("a remote status observer raised")

    def add_remote_observer(self, observer: StatusObserver) -> Callable[[], None]:
        """Call ``observer`` on every other node's change; returns the remover."""
        self._remote_observers.append(observer)
        return lambda: (
            self._remote_observers.remove(observer) if observer in self._remote_observers else None
        )

    def record(self, conversation_id: str) -> StatusRecord | None:
        return self.records.get(conversation_id)

    def status(self, conversation_id: str) -> str:
        record = self.records.get(conversation_id)
        return record.status if record is not None else "idle"

    def forget(self, conversation_id: str) -> None:
        self.records.pop(conversation_id, None)


def _in_progress(conversation_id: str, record: StatusRecord) -> bool:
    return record.status in _IN_PROGRESS


def get_runtime(request: Request) -> Runtime:
    runtime: Runtime | None = getattr(request.app.state, "runtime", None)
    if runtime is None:
        raise RuntimeError("the Drupe runtime is not open (the app's lifespan did not run)")
    return runtime


def get_caller(request: Request) -> Principal:
    """Who makes the request: the principal the identity gate put on it (``drupe.identity.
    gate``; the local admin when auth is off). A request with none is refused with 401."""
    principal: Principal | None = getattr(request.state, "principal", None)
    if principal is None:
        raise Unauthorized(
            "sign in first: POST /api/auth/login, or send 'Authorization: Bearer <token>'"
        )
    return principal


def require_admin(request: Request) -> Principal:
    """The caller, if an admin (with auth off: the local admin); else 403."""
    caller = get_caller(request)
    if not caller.is_admin:
        raise Forbidden("only an admin may do this")
    return caller


def get_board(request: Request) -> StatusBoard:
    board: StatusBoard = request.app.state.board
    return board


async def ensure_known(runtime: Runtime, conversation_id: str) -> bool:
    """Raise ``UnknownConversationError`` unless the conversation exists; True if ephemeral."""
    if runtime.ephemeral.get(conversation_id) is not None:
        return True
    if len(conversation_id) > 256 or await runtime.db.conversations.get(conversation_id) is None:
        raise UnknownConversationError(conversation_id)
    return False


def attach(
    manager: StreamManager,
    conversation_id: str,
    listener: Listener,
    *,
    after: int | None = None,
    execution_ids: Iterable[str] | None = None,
) -> None:
    """``manager.attach`` for the routes (a stream that published nothing replays nothing).

    Raises ``AdmissionError`` like attach.
    """
    manager.attach(conversation_id, listener, after=after, execution_ids=execution_ids)
