"""The blocking client of Weft's native HTTP API: :class:`Client` and the :class:`ExecuteStream`
its ``execute`` and ``attach`` return. It behaves as :class:`~weft_client.AsyncClient` does;
client tools run one after the other (an async tool in an event loop of its own)."""

from __future__ import annotations

import contextlib
import inspect
import time
from collections.abc import Callable, Generator, Iterator, Mapping, Sequence
from types import TracebackType
from typing import Any, Generic, TypeVar

import httpx

from . import _run
from ._config import DEFAULT_BASE_URL, DEFAULT_TIMEOUT, ClientConfig
from .errors import APIConnectionError, StreamError, WeftError, error_for
from .events import NativeEvent
from .models import (
    ExecuteContext,
    ExecuteOptions,
    ExecuteResult,
    SessionHead,
    SessionView,
    ToolCall,
    ToolSpec,
)
from .tools import Tool

E = TypeVar("E")

ApprovalCallback = Callable[[list[ToolCall]], _run.ApprovalAnswer]
"""Decides on calls waiting for approval: ``True`` approves them all, ``False`` denies them all,
or per-call decisions."""


class ExecuteStream(Generic[E]):
    """The events of one execution: every run it leads to (client tools run and approvals
    decided in between, resuming by itself), read across dropped connections with
    ``Last-Event-ID``. Iterate it once; :meth:`result` gives the outcome."""

    def __init__(
        self,
        client: Client,
        fmt: _run.Format[E],
        first: Callable[[], httpx.Response],
        *,
        session_id: str | None,
        tools: Sequence[Tool[Any, Any] | ToolSpec] | None,
        on_approval: ApprovalCallback | None,
        on_cursor: _run.CursorCallback | None,
        last_event_id: int | None = None,
    ) -> None:
        self.session_id: str | None = session_id
        """The session, once the server named it."""
        self.last_event_id: int | None = last_event_id
        """The seq of the last event received (the ``Last-Event-ID`` to resume from)."""
        self.reconnects = 0
        """How many times the stream was reattached after a drop."""
        self._client = client
        self._fmt = fmt
        self._tools = tools
        self._on_approval = on_approval
        self._on_cursor = on_cursor
        self._iterated = False
        self._result: ExecuteResult | None = None
        self._failure: Exception | None = None
        self._end: _run.RunEnd | None = None
        self._generator = self._events(first)

    def __iter__(self) -> Iterator[E]:
        if self._iterated:
            raise RuntimeError("an ExecuteStream can be iterated once")
        self._iterated = True
        return self._generator

    def __enter__(self) -> ExecuteStream[E]:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """Stops reading (the run goes on on the server unless ``on_disconnect="cancel"``)."""
        self._generator.close()

    def result(self) -> ExecuteResult:
        """The outcome once the stream has ended (reading it to its end if nobody iterated it).
        Raises what ended the stream, if it failed."""
        if not self._iterated:
            for _ in self:
                pass
        if self._result is not None:
            return self._result
        if self._failure is not None:
            raise self._failure
        raise WeftError(0, "stream_unfinished", "the stream was closed before its end")

    def abort(self) -> None:
        """Aborts the run on the server (the stream then ends with its ``aborted`` end)."""
        if self.session_id is None:
            raise WeftError(0, "no_session", "the server has not named the session yet")
        self._client.abort(self.session_id)

    def _advance(self, seq: int | None) -> None:
        if seq is None:
            return
        self.last_event_id = seq
        if self._on_cursor is not None and self.session_id is not None:
            self._on_cursor(self.session_id, seq)

    def _named(self, session_id: str | None) -> None:
        if session_id:
            self.session_id = session_id

    def _events(self, first: Callable[[], httpx.Response]) -> Generator[E, None, None]:
        totals = _run.Totals()
        request = first
        try:
            while True:
                self._end = None
                with contextlib.closing(self._read(request, totals)) as events:
                    yield from events
                end = self._end
                if end is None:  # pragma: no cover - _read raises instead
                    raise StreamError(0, "stream_ended", "the stream ended before its run did")
                session_id = self.session_id or ""
                plan = _run.plan_resume(end, self._tools, self._on_approval is not None)
                if plan is None:
                    self._result = _run.result_of(session_id, end, totals)
                    return
                if plan.approvals and self._on_approval is not None:
                    answer = self._on_approval(plan.approvals)
                    if inspect.isawaitable(answer):
                        raise TypeError("the sync client's approval callback must not be async")
                    next_input: Any = _run.approvals_input(plan.approvals, answer)
                else:
                    results = []
                    for call, t in plan.calls:
                        yield from self._fmt.client_tool_started(call)
                        started, clock = time.time(), time.monotonic()
                        result = t.run(call, session_id)
                        latency = _run.latency_ms(clock)
                        yield from self._fmt.client_tool_ended(call, result, started, latency)
                        results.append(result)
                    next_input = [result.to_wire() for result in results]
                body = {"sessionId": session_id, "input": next_input}
                request = self._resume_request(body)
        except Exception as error:  # closing or cancelling it is no failure of the stream
            self._failure = error
            raise

    def _resume_request(self, body: dict[str, Any]) -> Callable[[], httpx.Response]:
        def request() -> httpx.Response:
            return self._client._open_execute(body, self._fmt.name)

        return request

    def _read(
        self, request: Callable[[], httpx.Response], totals: _run.Totals
    ) -> Generator[E, None, None]:
        """One run's events, reattaching after a drop; sets ``_end`` at the run's end."""
        response: httpx.Response | None = request()
        failures = 0
        while True:
            if response is not None:
                self._named(response.headers.get("x-session-id"))
                reader = _run.FrameReader()
                try:
                    for chunk in response.iter_bytes():
                        for released in reader.feed(chunk):
                            failures = 0
                            batch = [e for data in released.events for e in self._fmt.parse(data)]
                            for event in batch:
                                self._named(self._fmt.session_id(event))
                                end = self._fmt.run_end(event, totals)
                                if end is not None:
                                    self._end = end
                            if not batch:
                                self._advance(released.seq)
                            for i, event in enumerate(batch):
                                if i == len(batch) - 1:
                                    # The cursor moves as its event's last frame is handed
                                    # over: a reader that stops here has seen all of it.
                                    self._advance(released.seq)
                                yield event
                        if self._end is not None:
                            break
                except (httpx.TransportError, httpx.StreamError):
                    pass  # dropped: resumed below
                finally:
                    response.close()
                if self._end is not None:
                    return
            if self.session_id is None:
                raise StreamError(
                    0,
                    "stream_dropped",
                    "the connection dropped before the server named the session",
                )
            if failures >= self._client.config.max_reconnects:
                raise StreamError(
                    0,
                    "stream_dropped",
                    f"the stream dropped and could not be resumed after {failures} tries",
                )
            time.sleep(_run.backoff(self._client.config.reconnect_delay, failures))
            failures += 1
            self.reconnects += 1
            try:
                response = self._client._open_attach(
                    self.session_id, self.last_event_id, self._fmt.name
                )
            except WeftError as error:
                if 400 <= error.status < 500:
                    raise
                response = None


class Client:
    """A blocking client of one Weft server (``weft serve``).

    ``base_url`` is the server; ``api_key`` its bearer key; a dropped stream is reattached up to
    ``max_reconnects`` times in a row, waiting ``reconnect_delay`` seconds doubled each time (up
    to 2 s). ``transport`` or ``http_client`` replace the HTTP layer (tests, proxies).
    """

    def __init__(
        self,
        base_url: str = DEFAULT_BASE_URL,
        *,
        api_key: str | None = None,
        timeout: httpx.Timeout | float | None = DEFAULT_TIMEOUT,
        max_reconnects: int = _run.DEFAULT_MAX_RECONNECTS,
        reconnect_delay: float = _run.DEFAULT_RECONNECT_DELAY,
        headers: Mapping[str, str] | None = None,
        transport: httpx.BaseTransport | None = None,
        http_client: httpx.Client | None = None,
    ) -> None:
        self.config = ClientConfig(base_url, api_key, max_reconnects, reconnect_delay, headers)
        self._owns_http = http_client is None
        self._http = http_client or httpx.Client(timeout=timeout, transport=transport)

    @property
    def base_url(self) -> str:
        return self.config.base_url

    def __enter__(self) -> Client:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """Closes the connections (an ``http_client`` given to it is left open)."""
        if self._owns_http:
            self._http.close()

    # ---- HTTP ----

    def _send(self, request: httpx.Request, *, stream: bool) -> httpx.Response:
        try:
            response = self._http.send(request, stream=stream)
        except httpx.TransportError as error:
            raise APIConnectionError(
                0, "connection_error", f"cannot reach {self.base_url}: {error!r}"
            ) from error
        if response.status_code >= 400:
            try:
                body = response.read()
            except httpx.HTTPError:
                body = b""
            finally:
                response.close()
            raise error_for(response.status_code, body, response.headers)
        return response

    def _request(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        params: Mapping[str, Any] | None = None,
    ) -> httpx.Response:
        request = self._http.build_request(
            method,
            self.base_url + path,
            json=json,
            params=params,
            headers=self.config.headers(),
        )
        return self._send(request, stream=False)

    def _open_execute(self, body: Mapping[str, Any], protocol: str) -> httpx.Response:
        request = self._http.build_request(
            "POST",
            self.base_url + "/api/agent/execute",
            json=body,
            params={"protocol": protocol},
            headers=self.config.stream_headers(),
        )
        return self._send(request, stream=True)

    def _open_attach(
        self, session_id: str, last_event_id: int | None, protocol: str
    ) -> httpx.Response:
        request = self._http.build_request(
            "GET",
            self.base_url + _run.session_path(session_id, "/stream"),
            params={"protocol": protocol},
            headers=self.config.stream_headers(last_event_id),
        )
        return self._send(request, stream=True)

    # ---- streams ----

    def _execute(
        self,
        fmt: _run.Format[E],
        input: _run.InputLike,
        *,
        session_id: str | None,
        context: ExecuteContext | Mapping[str, Any] | None,
        tools: Sequence[Tool[Any, Any] | ToolSpec] | None,
        on_approval: ApprovalCallback | None,
        options: ExecuteOptions | Mapping[str, Any] | None,
        on_cursor: _run.CursorCallback | None,
    ) -> ExecuteStream[E]:
        body = _run.execute_body(
            input, session_id=session_id, context=context, tools=tools, options=options
        )
        return ExecuteStream(
            self,
            fmt,
            lambda: self._open_execute(body, fmt.name),
            session_id=session_id,
            tools=tools,
            on_approval=on_approval,
            on_cursor=on_cursor,
        )

    def execute(
        self,
        input: _run.InputLike,
        *,
        session_id: str | None = None,
        context: ExecuteContext | Mapping[str, Any] | None = None,
        tools: Sequence[Tool[Any, Any] | ToolSpec] | None = None,
        on_approval: ApprovalCallback | None = None,
        options: ExecuteOptions | Mapping[str, Any] | None = None,
        on_cursor: _run.CursorCallback | None = None,
    ) -> ExecuteStream[NativeEvent]:
        """Starts a run (text or a user message: in a new session unless ``session_id`` is
        given) or resumes one (tool results, ``{"approvals": [...]}``), and streams it.

        A new session gets ``context`` (``messages``, ``tools``, ``system_prompt``) with the
        specs of ``tools`` added; when the run waits for calls of ``tools`` they run here and
        the run resumes, and ``on_approval`` decides calls that need approval. Nothing is sent
        before the stream is iterated (or :meth:`ExecuteStream.result` called).
        """
        return self._execute(
            _run.NativeFormat(),
            input,
            session_id=session_id,
            context=context,
            tools=tools,
            on_approval=on_approval,
            options=options,
            on_cursor=on_cursor,
        )

    def attach(
        self,
        session_id: str,
        *,
        last_event_id: int | None = None,
        tools: Sequence[Tool[Any, Any] | ToolSpec] | None = None,
        on_approval: ApprovalCallback | None = None,
        on_cursor: _run.CursorCallback | None = None,
    ) -> ExecuteStream[NativeEvent]:
        """Attaches to the session's live run (or its last one), after ``last_event_id`` when
        given, and goes on as :meth:`execute` does."""
        return self._attach(
            _run.NativeFormat(),
            session_id,
            last_event_id=last_event_id,
            tools=tools,
            on_approval=on_approval,
            on_cursor=on_cursor,
        )

    def _attach(
        self,
        fmt: _run.Format[E],
        session_id: str,
        *,
        last_event_id: int | None,
        tools: Sequence[Tool[Any, Any] | ToolSpec] | None,
        on_approval: ApprovalCallback | None,
        on_cursor: _run.CursorCallback | None,
    ) -> ExecuteStream[E]:
        return ExecuteStream(
            self,
            fmt,
            lambda: self._open_attach(session_id, last_event_id, fmt.name),
            session_id=session_id,
            tools=tools,
            on_approval=on_approval,
            on_cursor=on_cursor,
            last_event_id=last_event_id,
        )

    # ---- sessions ----

    def abort(self, session_id: str) -> None:
        """Aborts the session's run (:class:`ConflictError` when nothing runs)."""
        self._request("POST", _run.session_path(session_id, "/abort"))

    def get_session(self, session_id: str) -> SessionView:
        """The session: messages, status, pending calls and approvals, usage, cost, last seq."""
        return SessionView.model_validate(
            self._request("GET", _run.session_path(session_id)).json()
        )

    def list_sessions(self, *, limit: int | None = None) -> list[SessionHead]:
        """The caller's sessions, most recently updated first (the server's default: 100)."""
        params = {"limit": limit} if limit is not None else None
        response = self._request("GET", "/api/agent/sessions", params=params)
        return [SessionHead.model_validate(s) for s in response.json().get("sessions", [])]

    def delete(self, session_id: str) -> None:
        """Deletes the session with its messages and events (a running one is aborted first)."""
        self._request("DELETE", _run.session_path(session_id))

    def fork(
        self,
        session_id: str,
        *,
        at_message: int | None = None,
        new_session_id: str | None = None,
    ) -> SessionView:
        """A new session whose history is the first ``at_message`` messages of this one (all by
        default), under ``new_session_id`` (default: a new UUID)."""
        body: dict[str, Any] = {}
        if at_message is not None:
            body["atMessage"] = at_message
        if new_session_id is not None:
            body["sessionId"] = new_session_id
        response = self._request("POST", _run.session_path(session_id, "/fork"), json=body)
        return SessionView.model_validate(response.json())
