"""The whole Drupe exception tree.

    DrupeError
    ├── UsageError                 the caller misused the public API (bad arguments)
    │   ├── UnknownConversationError
    │   ├── DuplicateModelError
    │   └── ValidationError        a request failed validation; nothing was written
    ├── AdmissionError             a turn could not be admitted (reason: busy, live, paused, ...)
    ├── NotOwnerError              cluster: another node owns the conversation (route to it)
    ├── OwnerUnavailableError      cluster: the owner is gone and nobody took over yet (503)
    ├── ConfigError                configuration is missing or wrong (names the key/provider)
    ├── ProviderError              a model API failed (status_code, retryable)
    ├── PersistenceError
    │   ├── TerminalPersistenceError   the terminal write of a turn failed
    │   └── FencedWriteError           a newer owner holds the conversation (cluster fencing)
    ├── ToolError
    └── DriverError                an agent runtime failed

Expected outcomes of a stream (done, paused, error) are values (see ``streaming.listeners.base``),
never exceptions. Only the HTTP edge maps these errors to status codes.
"""

from __future__ import annotations

from typing import Literal

__all__ = [
    "AdmissionError",
    "ConfigError",
    "DriverError",
    "DrupeError",
    "DuplicateModelError",
    "FencedWriteError",
    "NotFoundError",
    "NotOwnerError",
    "OwnerUnavailableError",
    "PersistenceError",
    "ProviderError",
    "TerminalPersistenceError",
    "ToolError",
    "UnknownConversationError",
    "UsageError",
    "ValidationError",
]


class DrupeError(Exception):
    """Base class of every error Drupe raises on purpose."""


class UsageError(DrupeError):
    """The caller misused the public API."""


class ValidationError(UsageError):
    """A request failed validation before anything was written."""


class UnknownConversationError(ValidationError):
    """The conversation id does not name a known conversation."""

    def __init__(self, conversation_id: str) -> None:
        super().__init__(f"unknown conversation {conversation_id!r}")
        self.conversation_id = conversation_id


class NotFoundError(ValidationError):
    """An id names nothing of its kind (a schedule, a task run, ...)."""

    def __init__(self, kind: str, item_id: str, message: str | None = None) -> None:
        super().__init__(message or f"unknown {kind} {item_id!r}")
        self.kind = kind
        self.item_id = item_id


class DuplicateModelError(ValidationError):
    """The same model id was given twice for one turn."""

    def __init__(self, model_id: str) -> None:
        super().__init__(f"model {model_id!r} is given more than once")
        self.model_id = model_id


AdmissionReason = Literal[
    "busy",
    "live",
    "not-live",
    "paused",
    "shutting-down",
    "regenerate-live",
    "unsupported",
    "too-many-subscribers",
]


class AdmissionError(DrupeError):
    """A turn could not be admitted; ``reason`` says why in a machine-readable way."""

    def __init__(self, reason: AdmissionReason, message: str) -> None:
        super().__init__(message)
        self.reason: AdmissionReason = reason


class NotOwnerError(DrupeError):
    """Cluster mode: another node owns the conversation's live stream (route the command)."""

    def __init__(self, conversation_id: str, node_id: str) -> None:
        super().__init__(f"conversation {conversation_id!r} is owned by node {node_id!r}")
        self.conversation_id = conversation_id
        self.node_id = node_id


class OwnerUnavailableError(DrupeError):
    """Cluster mode: the owner did not answer and no other node has taken over yet."""

    def __init__(self, message: str, *, retry_after: float) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class ConfigError(DrupeError):
    """Configuration is missing or wrong; the message names the key or provider."""


class ProviderError(DrupeError):
    """A model API call failed."""

    def __init__(
        self, message: str, *, status_code: int | None = None, retryable: bool = False
    ) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.retryable = retryable


class PersistenceError(DrupeError):
    """A database operation failed."""


class TerminalPersistenceError(PersistenceError):
    """The terminal write of a turn failed; success notifications are suppressed."""


class FencedWriteError(PersistenceError):
    """A row write carried a fencing token below the row's: a newer owner holds the
    conversation, so this node lost its lease and must write nothing more (invariant 10).

    Final, never worth retrying: the token will not grow back.
    """

    def __init__(self, message_id: str, fence: int) -> None:
        super().__init__(
            f"message {message_id!r} was not written with fencing token {fence}: "
            "a newer owner holds the conversation"
        )
        self.message_id = message_id
        self.fence = fence


class ToolError(DrupeError):
    """A tool failed or was refused."""


class DriverError(DrupeError):
    """An agent runtime driver failed."""
