"""The asyncio client of Weft's native HTTP API: :class:`AsyncClient` and the
:class:`AsyncExecuteStream` its ``execute`` and ``attach`` return."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import time
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Mapping, Sequence
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
    ToolResultInput,
    ToolSpec,
)
from .tools import Tool

E = TypeVar("E")

AsyncApprovalCallback = Callable[
    [list[ToolCall]], "_run.ApprovalAnswer | Awaitable[_run.ApprovalAnswer]"
]
"""Decides on calls waiting for approval (sync or async): ``True`` approves them all, ``False``
denies them all, or per-call decisions."""


class AsyncExecuteStream(Generic[E]):
    """The events of one execution: every run it leads to (client tools run and approvals
    decided in between, resuming by itself), read across dropped connections with
    ``Last-Event-ID``. Iterate it once (``async for``); :meth:`result` gives the outcome."""

    def __init__(
        self,
        client: AsyncClient,
        fmt: _run.Format[E],
        first: Callable[[], Awaitable[httpx.Response]],
        *,
        session_id: str | None,
        tools: Sequence[Tool[Any, Any] | ToolSpec] | None,
        on_approval: AsyncApprovalCallback | None,
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
        self._session_known = asyncio.Event()
        if session_id is not None:
            self._session_known.set()
        self._iterated = False
        self._result: ExecuteResult | None = None
        self._failure: Exception | None = None
        self._end: _run.RunEnd | None = None
        self._generator = self._events(first)

    def __aiter__(self) -> AsyncIterator[E]:
        if self._iterated:
            raise RuntimeError("an AsyncExecuteStream can be iterated once")
        self._iterated = True
        return self._generator

    async def __aenter__(self) -> AsyncExecuteStream[E]:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Stops reading (the run goes on on the server unless ``on_disconnect="cancel"``)."""
        await self._generator.aclose()

    async def result(self) -> ExecuteResult:
        """The outcome once the stream has ended (reading it to its end if nobody iterated it).
        Raises what ended the stream, if it failed."""
        if not self._iterated:
            async for _ in self:
                pass
        if self._result is not None:
            return self._result
        if self._failure is not None:
            raise self._failure
        raise WeftError(0, "stream_unfinished", "the stream was closed before its end")

    async def abort(self) -> None:
        """Aborts the run on the server (the stream then ends with its ``aborted`` end)."""
        if self.session_id is None and self._iterated:
            # The request is on its way: the server names the session in its answer's head.
            try:
                await asyncio.wait_for(self._session_known.wait(), timeout=10)
            except asyncio.TimeoutError:
                pass
        if self.session_id is None:
            raise WeftError(0, "no_session", "the server has not named the session yet")
        await self._client.abort(self.session_id)

    def _advance(self, seq: int | None) -> None:
        if seq is None:
            return
        self.last_event_id = seq
        if self._on_cursor is not None and self.session_id is not None:
            self._on_cursor(self.session_id, seq)

    def _named(self, session_id: str | None) -> None:
        if session_id:
            self.session_id = session_id
            self._session_known.set()

    async def _events(
        self, first: Callable[[], Awaitable[httpx.Response]]
    ) -> AsyncGenerator[E, None]:
        totals = _run.Totals()
        request = first
        try:
            while True:
                self._end = None
                async with contextlib.aclosing(self._read(request, totals)) as events:
                    async for event in events:
                        yield event
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
                        answer = await answer
                    next_input: Any = _run.approvals_input(plan.approvals, answer)
                else:
                    for call, _ in plan.calls:
                        for event in self._fmt.client_tool_started(call):
                            yield event
                    done = await asyncio.gather(
                        *(self._run_tool(call, t, session_id) for call, t in plan.calls)
                    )
                    for (call, _), (result, started, latency) in zip(plan.calls, done, strict=True):
                        for event in self._fmt.client_tool_ended(call, result, started, latency):
                            yield event
                    next_input = [result.to_wire() for result, _, _ in done]
                body = {"sessionId": session_id, "input": next_input}
                request = self._resume_request(body)
        except Exception as error:  # closing or cancelling it is no failure of the stream
            self._failure = error
            raise

    def _resume_request(self, body: dict[str, Any]) -> Callable[[], Awaitable[httpx.Response]]:
        def request() -> Awaitable[httpx.Response]:
            return self._client._open_execute(body, self._fmt.name)

        return request

    @staticmethod
    async def _run_tool(
        call: ToolCall, t: Tool[Any, Any], session_id: str
    ) -> tuple[ToolResultInput, float, int]:
        started = time.time()
        clock = time.monotonic()
        result = await t.arun(call, session_id)
        return result, started, _run.latency_ms(clock)

    async def _read(
        self, request: Callable[[], Awaitable[httpx.Response]], totals: _run.Totals
    ) -> AsyncGenerator[E, None]:
        """One run's events, reattaching after a drop; sets ``_end`` at the run's end."""
        response: httpx.Response | None = await request()
        failures = 0
        while True:
            if response is not None:
                self._named(response.headers.get("x-session-id"))
                reader = _run.FrameReader()
                try:
                    async for chunk in response.aiter_bytes():
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
                    await response.aclose()
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
            await asyncio.sleep(_run.backoff(self._client.config.reconnect_delay, failures))
            failures += 1
            self.reconnects += 1
            try:
                response = await self._client._open_attach(
                    self.session_id, self.last_event_id, self._fmt.name
                )
            except WeftError as error:
                if 400 <= error.status < 500:
                    raise
                response = None


class AsyncClient:
    """An asyncio client of one Weft server (``weft serve``).

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
        transport: httpx.AsyncBaseTransport | None = None,
        http_client: httpx.AsyncClient | None = None,
    ) -> None:
        self.config = ClientConfig(base_url, api_key, max_reconnects, reconnect_delay, headers)
        self._owns_http = http_client is None
        self._http = http_client or httpx.AsyncClient(timeout=timeout, transport=transport)

    @property
    def base_url(self) -> str:
        return self.config.base_url

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Closes the connections (an ``http_client`` given to it is left open)."""
        if self._owns_http:
            await self._http.aclose()

    # ---- HTTP ----

    async def _send(self, request: httpx.Request, *, stream: bool) -> httpx.Response:
        try:
            response = await self._http.send(request, stream=stream)
        except httpx.TransportError as error:
            raise APIConnectionError(
                0, "connection_error", f"cannot reach {self.base_url}: {error!r}"
            ) from error
        if response.status_code >= 400:
            try:
                body = await response.aread()
            except httpx.HTTPError:
                body = b""
            finally:
                await response.aclose()
            raise error_for(response.status_code, body, response.headers)
        return response

    async def _request(
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
        return await self._send(request, stream=False)

    async def _open_execute(self, body: Mapping[str, Any], protocol: str) -> httpx.Response:
        request = self._http.build_request(
            "POST",
            self.base_url + "/api/agent/execute",
            json=body,
            params={"protocol": protocol},
            headers=self.config.stream_headers(),
        )
        return await self._send(request, stream=True)

    async def _open_attach(
        self, session_id: str, last_event_id: int | None, protocol: str
    ) -> httpx.Response:
        request = self._http.build_request(
            "GET",
            self.base_url + _run.session_path(session_id, "/stream"),
            params={"protocol": protocol},
            headers=self.config.stream_headers(last_event_id),
        )
        return await self._send(request, stream=True)

    # ---- streams ----

    def _execute(
        self,
        fmt: _run.Format[E],
        input: _run.InputLike,
        *,
        session_id: str | None,
        context: ExecuteContext | Mapping[str, Any] | None,
        tools: Sequence[Tool[Any, Any] | ToolSpec] | None,
        on_approval: AsyncApprovalCallback | None,
        options: ExecuteOptions | Mapping[str, Any] | None,
        on_cursor: _run.CursorCallback | None,
    ) -> AsyncExecuteStream[E]:
        body = _run.execute_body(
            input, session_id=session_id, context=context, tools=tools, options=options
        )
        return AsyncExecuteStream(
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
        on_approval: AsyncApprovalCallback | None = None,
        options: ExecuteOptions | Mapping[str, Any] | None = None,
        on_cursor: _run.CursorCallback | None = None,
    ) -> AsyncExecuteStream[NativeEvent]:
        """Starts a run (text or a user message: in a new session unless ``session_id`` is
        given) or resumes one (tool results, ``{"approvals": [...]}``), and streams it.

        A new session gets ``context`` (``messages``, ``tools``, ``system_prompt``) with the
        specs of ``tools`` added; when the run waits for calls of ``tools`` they run here and
        the run resumes, and ``on_approval`` decides calls that need approval. Nothing is sent
        before the stream is iterated (or :meth:`AsyncExecuteStream.result` awaited).
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
        on_approval: AsyncApprovalCallback | None = None,
        on_cursor: _run.CursorCallback | None = None,
    ) -> AsyncExecuteStream[NativeEvent]:
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
        on_approval: AsyncApprovalCallback | None,
        on_cursor: _run.CursorCallback | None,
    ) -> AsyncExecuteStream[E]:
        return AsyncExecuteStream(
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

    async def abort(self, session_id: str) -> None:
        """Aborts the session's run (:class:`ConflictError` when nothing runs)."""
        await self._request("POST", _run.session_path(session_id, "/abort"))

    async def get_session(self, session_id: str) -> SessionView:
        """The session: messages, status, pending calls and approvals, usage, cost, last seq."""
        response = await self._request("GET", _run.session_path(session_id))
        return SessionView.model_validate(response.json())

    async def list_sessions(self, *, limit: int | None = None) -> list[SessionHead]:
        """The caller's sessions, most recently updated first (the server's default: 100)."""
        params = {"limit": limit} if limit is not None else None
        response = await self._request("GET", "/api/agent/sessions", params=params)
        return [SessionHead.model_validate(s) for s in response.json().get("sessions", [])]

    async def delete(self, session_id: str) -> None:
        """Deletes the session with its messages and events (a running one is aborted first)."""
        await self._request("DELETE", _run.session_path(session_id))

    async def fork(
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
        response = await self._request("POST", _run.session_path(session_id, "/fork"), json=body)
        return SessionView.model_validate(response.json())
