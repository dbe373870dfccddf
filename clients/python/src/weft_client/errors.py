"""Errors: the server's ``{"error": {"code", "message"}}`` answers as typed exceptions, and
streams that could not be resumed.

Every exception of this package is a :class:`WeftError` carrying ``status`` (0 when no HTTP
answer is involved), ``code`` and ``message``.
"""

from __future__ import annotations

import json
from typing import Any

import httpx


class WeftError(Exception):
    """An error of the Weft API: the HTTP status (0 when there was no answer), the server's
    stable ``code`` and its ``message``."""

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        *,
        run_id: str | None = None,
        body: Any = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.run_id = run_id
        """With ``session_running`` (409): the id of the run under way."""
        self.body = body
        """The answer's body (parsed JSON when it was JSON, else its text)."""

    def __str__(self) -> str:
        prefix = f"{self.status} " if self.status else ""
        return f"{prefix}{self.code}: {self.message}"

    def __repr__(self) -> str:
        name = type(self).__name__
        return f"{name}(status={self.status}, code={self.code!r}, message={self.message!r})"


class BadRequestError(WeftError):
    """400: a malformed request (the message says where), a new session without context, an
    invalid id, tool name, provider, mode or protocol."""


class AuthenticationError(WeftError):
    """401 or 403: a missing, wrong or refused API key."""


class NotFoundError(WeftError):
    """404: no such session for this caller (or no such endpoint)."""


class ConflictError(WeftError):
    """409: the session is running (``session_running``, with :attr:`run_id`), waits on tool
    calls, has nothing pending or nothing to abort, or a result was already given."""


class PayloadTooLargeError(WeftError):
    """413: the request body is larger than the server accepts."""


class UnprocessableEntityError(WeftError):
    """422: a result or approval for an unknown call, an answer of the wrong kind, an invalid
    fork point."""


class RateLimitError(WeftError):
    """429: rate limited; :attr:`retry_after` is the server's ``Retry-After`` in seconds."""

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        *,
        run_id: str | None = None,
        body: Any = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(status, code, message, run_id=run_id, body=body)
        self.retry_after = retry_after


class ServerError(WeftError):
    """5xx: the server or its store failed (``store_unavailable`` …); trying later may work."""


class APIConnectionError(WeftError):
    """The server could not be reached, or the connection failed before an answer (status 0)."""


class StreamError(WeftError):
    """A stream that could not be read to its end: it dropped (a read error, or an answer that
    ended before its run did) and could not be resumed within ``max_reconnects`` tries in a row
    (``stream_dropped``). Status 0."""


_BY_STATUS: dict[int, type[WeftError]] = {
    400: BadRequestError,
    401: AuthenticationError,
    403: AuthenticationError,
    404: NotFoundError,
    409: ConflictError,
    413: PayloadTooLargeError,
    422: UnprocessableEntityError,
    429: RateLimitError,
}


def error_for(status: int, body: bytes, headers: httpx.Headers | None = None) -> WeftError:
    """The exception for an error answer: its class by status, its code and message from the
    server's ``{"error": {"code", "message", "runId?"}}`` (``http_error`` and the status line
    when the body is not that)."""
    code = "http_error"
    message = f"HTTP {status}"
    run_id: str | None = None
    parsed: Any
    try:
        parsed = json.loads(body) if body else None
    except ValueError:
        parsed = body.decode("utf-8", "replace")
    detail = parsed.get("error") if isinstance(parsed, dict) else None
    if isinstance(detail, dict):
        if isinstance(detail.get("code"), str):
            code = detail["code"]
        if isinstance(detail.get("message"), str):
            message = detail["message"]
        if isinstance(detail.get("runId"), str):
            run_id = detail["runId"]
    elif isinstance(parsed, str) and parsed.strip():
        message = f"HTTP {status}: {parsed.strip()[:200]}"
    if status == 429:
        retry_after: float | None = None
        raw = headers.get("retry-after") if headers is not None else None
        if raw is not None:
            try:
                retry_after = float(raw)
            except ValueError:
                retry_after = None
        return RateLimitError(
            status, code, message, run_id=run_id, body=parsed, retry_after=retry_after
        )
    cls = _BY_STATUS.get(status) or (ServerError if status >= 500 else WeftError)
    return cls(status, code, message, run_id=run_id, body=parsed)
