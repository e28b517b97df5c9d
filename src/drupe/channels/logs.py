"""Keep channel secrets out of logs: every log record is redacted when it is created.

HTTP client libraries log request URLs (httpx logs ``HTTP Request: POST <url>`` at INFO), and
Telegram's Bot API puts the bot token IN the URL; platform error texts may echo a token back.
Logger filters do not reach child loggers and handler filters miss handlers added later, so
``install_secret_filter(secrets)`` wraps the process's log record factory once: a record whose
message holds a configured secret or a known token shape is rewritten with ``redact`` before any
filter or handler sees it. Only records of enabled levels are created, so the cost is one
message formatting per emitted record.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Any

from drupe.channels.text_shaping import redact

__all__ = ["install_secret_filter", "redact_record"]

_secrets: set[str] = set()
_installed = False


def redact_record(record: logging.LogRecord) -> logging.LogRecord:
    try:
        message = record.getMessage()
    except Exception:  # a broken format string: leave it to logging's own error path
        return record
    clean = redact(message, _secrets)
    if clean != message:
        record.msg = clean
        record.args = ()
    return record


def install_secret_filter(secrets: Iterable[str]) -> None:
    """Redact ``secrets`` (and known token shapes) from every log record from now on."""
    global _installed
    _secrets.update(s for s in secrets if s)
    if _installed:
        return
    _installed = True
    previous: Callable[..., logging.LogRecord] = logging.getLogRecordFactory()

    def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
        return redact_record(previous(*args, **kwargs))

    logging.setLogRecordFactory(factory)
