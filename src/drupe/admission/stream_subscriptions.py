"""How ``LocalConversations`` rides a conversation's streams in this process.

``attach_to_next_stream`` attaches a follower to the next stream of a conversation (used when the
stream of its own turn was already evicted) and returns the undo. ``watch_stream`` gives a
multiplexed listener every status change of the conversation (this node's, and a mirror's remote
ones), the current status at once, and with ``chunks`` the chunks of each of this node's streams
as it starts; registration and the first status happen in one synchronous call, so nothing is
lost or doubled. Neither asks the access policy: the port's callers did.
"""

from __future__ import annotations

from collections.abc import Callable

from drupe.admission.conversations import Follower, StatusMirror, Subscription
from drupe.errors import AdmissionError
from drupe.streaming.listeners.sse import MultiplexListener, seq_after
from drupe.streaming.manager import StatusRecord, StreamManager

__all__ = ["attach_to_next_stream", "watch_stream"]


def attach_to_next_stream(
    manager: StreamManager, conversation_id: str, listener: Follower
) -> Callable[[], None]:
    """Attach ``listener`` to the conversation's next stream; returns the undo."""
    removers: list[Callable[[], None]] = []

    def remove() -> None:
        for undo in removers:
            undo()

    def observer(observed: str, record: StatusRecord) -> None:
        if observed != conversation_id or record.status != "pending":
            return
        remove()
        if listener.is_alive():
            manager.attach(conversation_id, listener)  # type: ignore[arg-type]

    removers.append(manager.add_status_observer(observer))
    stream = manager.get(conversation_id)
    if stream is not None and stream.is_live:  # started between dispatch and now
        remove()
        manager.attach(conversation_id, listener)  # type: ignore[arg-type]
    return remove


def watch_stream(
    manager: StreamManager,
    conversation_id: str,
    listener: MultiplexListener,
    cursor: str | None,
    *,
    chunks: bool,
    mirror: StatusMirror | None = None,
) -> Subscription:
    """Status changes (this node's, and the mirror's remote ones), the current status;
    with ``chunks``, this node's streams attached too. All in one synchronous call."""

    def observer(observed: str, record: StatusRecord) -> None:
        if observed != conversation_id:
            return
        listener.on_status(record.status, record.turn_id)
        if chunks and record.status == "pending":
            stream = manager.get(conversation_id)
            if stream is not None and stream.turn_id == record.turn_id and listener.is_alive():
                try:
                    manager.attach(conversation_id, listener)
                except AdmissionError:
                    listener.buffer.close()

    def remote_observer(observed: str, record: StatusRecord) -> None:
        if observed == conversation_id:  # another node's stream (cluster mode)
            listener.on_status(record.status, record.turn_id)

    subscription = Subscription([manager.add_status_observer(observer)])
    subscription.add(lambda: manager.detach(conversation_id, listener.listener_id))
    record = manager.status(conversation_id)
    if mirror is not None:
        subscription.add(mirror.add_remote_observer(remote_observer))
        record = mirror.record(conversation_id) or record
    listener.on_status(
        record.status if record is not None else "idle",
        record.turn_id if record is not None else None,
    )
    stream = manager.get(conversation_id)
    if chunks and stream is not None and stream.is_live:
        after = seq_after(cursor, stream.turn_id)
        try:
            manager.attach(conversation_id, listener, after=after)
        except BaseException:
            subscription.close()
            raise
    return subscription
