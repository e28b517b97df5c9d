"""HMAC-SHA256 request signing for the generic webhook channel (both directions).

``signature = "sha256=" + hex(HMAC_SHA256(secret, f"{timestamp}.".encode() + body))`` where
``timestamp`` is Unix seconds, sent as ``X-Drupe-Timestamp`` beside ``X-Drupe-Signature``.
``verify`` compares in constant time and refuses a timestamp more than ``window`` seconds
(5 minutes) away from now, so a captured request cannot be replayed later.
"""

from __future__ import annotations

import hashlib
import hmac
from typing import Final

__all__ = ["REPLAY_WINDOW", "SIGNATURE_HEADER", "TIMESTAMP_HEADER", "sign", "verify"]

REPLAY_WINDOW: Final = 300.0
SIGNATURE_HEADER: Final = "X-Drupe-Signature"
TIMESTAMP_HEADER: Final = "X-Drupe-Timestamp"


def sign(secret: str, timestamp: str, body: bytes) -> str:
    mac = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256)
    return f"sha256={mac.hexdigest()}"


def verify(
    secret: str,
    timestamp: str | None,
    signature: str | None,
    body: bytes,
    *,
    now: float,
    window: float = REPLAY_WINDOW,
) -> bool:
    if not timestamp or not signature:
        return False
    try:
        stamp = float(timestamp)
    except ValueError:
        return False
    if abs(now - stamp) > window:
        return False
    return hmac.compare_digest(sign(secret, timestamp, body), signature)
