"""What both clients are configured with."""

from __future__ import annotations

from collections.abc import Mapping

import httpx

DEFAULT_BASE_URL = "http://127.0.0.1:8080"
"""Where ``weft serve`` listens by default."""

DEFAULT_TIMEOUT = httpx.Timeout(30.0, read=60.0)
"""30 s to connect, write or wait for a pooled connection; 60 s of silence while reading (a
stream sends a keep-alive comment every 15 s, so a longer silence is a dead connection, which
is then resumed)."""


class ClientConfig:
    """The server, the key, and how dropped streams are resumed."""

    def __init__(
        self,
        base_url: str,
        api_key: str | None,
        max_reconnects: int,
        reconnect_delay: float,
        headers: Mapping[str, str] | None,
    ) -> None:
        if max_reconnects < 0:
            raise ValueError("max_reconnects must be 0 or more")
        self.base_url = base_url.rstrip("/")
        self.api_key = api_key
        self.max_reconnects = max_reconnects
        self.reconnect_delay = reconnect_delay
        self.extra_headers = dict(headers or {})

    def headers(self, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        out = {"user-agent": "weft-client-python/0.1.0", **self.extra_headers, **(extra or {})}
        if self.api_key:
            out["authorization"] = f"Bearer {self.api_key}"
        return out

    def stream_headers(self, last_event_id: int | None = None) -> dict[str, str]:
        extra = {"accept": "text/event-stream"}
        if last_event_id is not None:
            extra["last-event-id"] = str(last_event_id)
        return self.headers(extra)
