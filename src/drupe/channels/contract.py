"""The adapter contract: what a platform adapter gives the channel core and what it gets.

An adapter turns platform events into ``Inbound`` messages and ``ButtonPress``es and hands them
to its ``Inbox`` (non-blocking calls: the core queues them per chat). Outbound, it implements
``ChannelSink`` (send, edit, typing; ``RateLimited`` on a 429) and answers each button press
to its presser (``answer``). ``run(inbox)`` connects (long
polling, Socket Mode, nothing for HTTP-only adapters), reports ``inbox.connected()``, then serves
until cancelled. An adapter that receives HTTP (Slack events, the signed webhook, Telegram's
webhook mode) answers ``handle_http``; the gateway mounts it at ``/channels/<id>/...``.

Platform SDKs are imported only by the adapter modules, never by the core.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from drupe.channels.outbox import ChannelSink

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.responses import Response

    from drupe.channels.config import ChannelConfig

__all__ = ["Attachment", "ButtonPress", "ChannelAdapter", "Inbound", "Inbox"]


@dataclass(frozen=True, slots=True)
class Attachment:
    name: str
    media_type: str
    data: bytes


@dataclass(frozen=True, slots=True, kw_only=True)
class Inbound:
    chat_id: str
    user_id: str
    user_name: str = ""
    text: str = ""
    message_id: str | None = None
    event_id: str | None = None
    """The platform's delivery id (Slack ``event_id``, Telegram ``update_id``): dedupe key."""
    attachments: Sequence[Attachment] = field(default_factory=tuple)
    oversized: Sequence[str] = field(default_factory=tuple)
    """Names of attachments the adapter refused for their size (told to the user)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ButtonPress:
    chat_id: str
    user_id: str
    data: str
    event_id: str | None = None
    user_name: str = ""
    answer_id: str | None = None
    """The platform's handle to answer this press (Telegram's callback query id)."""


class Inbox(Protocol):
    def message(self, inbound: Inbound) -> None:
        """Queue a platform message (checks, dedupe and rate limit happen here)."""
        ...

    def button(self, press: ButtonPress) -> None:
        """Queue a button press (approvals)."""
        ...

    def connected(self) -> None:
        """The adapter is connected and serving."""
        ...

    def disconnected(self, error: str | None) -> None:
        """The adapter lost its connection (``error`` says why; never a secret)."""
        ...


class ChannelAdapter(ChannelSink, Protocol):
    config: ChannelConfig
    buttons: bool
    """Whether the platform has buttons (approvals are asked there)."""

    async def run(self, inbox: Inbox, *, receive: bool = True) -> None:
        """Connect and serve until cancelled. ``receive=False``: connect for sending only (a
        cluster node that is not the channel's receiver; ``ChannelConfig.single_receiver``):
        no polling, no socket; webhook channels receive on every node anyway."""
        ...

    async def handle_http(self, request: Request, path: str) -> Response:
        """Answer a platform HTTP request addressed to ``/channels/<id>/<path>``."""
        ...

    async def answer(self, press: ButtonPress, text: str) -> None:
        """Answer a button press to its presser only (Telegram's callback answer, a Slack
        ephemeral message, the webhook's ``answer``); every press gets one answer."""
        ...
