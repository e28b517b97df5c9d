"""The ONLY mapping from exceptions to HTTP responses (``{"detail": "..."}``).

Rules: bad input is a 4xx that says what is wrong, never a 500. ``UnknownConversationError`` ->
404; ``ValidationError`` / ``UsageError`` / a malformed body -> 422; ``AdmissionError`` -> 409
(``too-many-subscribers`` -> 429, ``shutting-down`` -> 503); ``PayloadTooLarge`` -> 413;
``Forbidden`` -> 403; ``ConfigError`` / ``PersistenceError`` -> 503 (the server, not the
request, is at fault, and the message says how); cluster mode's ``OwnerUnavailableError`` ->
503 with ``Retry-After`` (the owner is gone and no node has taken over yet). Anything else is
logged with its traceback and answered 500 without internals. Route code raises; it never
builds error responses itself.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from drupe.errors import (
    AdmissionError,
    ConfigError,
    NotFoundError,
    NotOwnerError,
    OwnerUnavailableError,
    PersistenceError,
    UnknownConversationError,
    UsageError,
)

__all__ = [
    "Forbidden",
    "HttpError",
    "PayloadTooLarge",
    "error_response",
    "install_error_handlers",
    "status_for",
]

log = logging.getLogger(__name__)


class HttpError(Exception):
    """An edge-only error that already knows its status code."""

    status_code = 400

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


class PayloadTooLarge(HttpError):
    status_code = 413


class Forbidden(HttpError):
    status_code = 403


class Unauthorized(HttpError):
    status_code = 401


class TooManyRequests(HttpError):
    status_code = 429


_ADMISSION_STATUS = {"too-many-subscribers": 429, "shutting-down": 503, "unsupported": 422}


def status_for(err: BaseException) -> int:
    """The HTTP status code of ``err`` (see the module docstring)."""
    if isinstance(err, HttpError):
        return err.status_code
    if isinstance(err, UnknownConversationError | NotFoundError):
        return 404
    if isinstance(err, UsageError):
        return 422
    if isinstance(err, AdmissionError):
        return _ADMISSION_STATUS.get(err.reason, 409)
    if isinstance(err, ConfigError | PersistenceError | OwnerUnavailableError | NotOwnerError):
        return 503
    return 500


def error_response(status: int, detail: str) -> JSONResponse:
    return JSONResponse({"detail": detail}, status_code=status)


def _describe_validation(errors: Sequence[Any]) -> str:
    """FastAPI's validation errors as one readable sentence."""
    parts: list[str] = []
    for error in errors:
        loc = [str(x) for x in error.get("loc", ()) if x not in ("body", "query", "path")]
        where = ".".join(loc) or "body"
        parts.append(f"{where}: {error.get('msg', 'invalid')}")
    return "malformed request: " + "; ".join(parts) if parts else "malformed request"


def install_error_handlers(app: FastAPI) -> None:
    async def on_drupe_error(request: Request, err: Exception) -> JSONResponse:
        status = status_for(err)
        if status >= 500 and not isinstance(err, AdmissionError):
            log.warning("%s %s: %s", request.method, request.url.path, err)
        response = error_response(status, str(err) or type(err).__name__)
        if isinstance(err, OwnerUnavailableError):
            response.headers["Retry-After"] = str(max(1, math.ceil(err.retry_after)))
        return response

    async def on_validation(request: Request, err: Exception) -> JSONResponse:
        assert isinstance(err, RequestValidationError)
        return error_response(422, _describe_validation(err.errors()))

    async def on_http(request: Request, err: Exception) -> JSONResponse:
        assert isinstance(err, StarletteHTTPException)
        return JSONResponse(
            {"detail": err.detail}, status_code=err.status_code, headers=err.headers
        )

    async def on_unexpected(request: Request, err: Exception) -> JSONResponse:
        log.error("%s %s failed", request.method, request.url.path, exc_info=err)
        return error_response(500, "internal server error")

    for kind in (
        HttpError,
        UsageError,
        AdmissionError,
        ConfigError,
        PersistenceError,
        OwnerUnavailableError,
        NotOwnerError,
    ):
        app.add_exception_handler(kind, on_drupe_error)
    app.add_exception_handler(RequestValidationError, on_validation)
    app.add_exception_handler(StarletteHTTPException, on_http)
    app.add_exception_handler(Exception, on_unexpected)
