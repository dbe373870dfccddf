"""A dropped connection mid-stream is resumed with ``Last-Event-ID``: no gap, no duplicate.

A TCP proxy in front of the server forwards everything, and cuts the client's connection (a
reset, mid-frame) once it has passed as many bytes of a response as the next entry of its plan
says, until the plan is used up. It also records the ``Last-Event-ID`` of every request."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable

import pytest
from conftest import Weft
from helpers import text_of

from weft_client import AsyncClient, Client, StreamError

pytestmark = pytest.mark.anyio


class CuttingProxy:
    def __init__(self, upstream_port: int, plan: list[int]) -> None:
        self.upstream_port = upstream_port
        self.plan = list(plan)
        """Where the next cuts happen: bytes of a connection's responses (0: at once)."""
        self.cuts_made = 0
        self.requests: list[str] = []
        """Each request's line, with its Last-Event-ID: ``"GET /… last-event-id=12"``."""
        self.port = 0
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def _serve(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        up_r, up_w = await asyncio.open_connection("127.0.0.1", self.upstream_port)
        up = asyncio.create_task(self._requests(client_r, up_w))
        down = asyncio.create_task(self._responses(up_r, client_w))
        self._tasks.update((up, down))
        await asyncio.wait({up, down}, return_when=asyncio.FIRST_COMPLETED)
        for task in (up, down):
            task.cancel()
        for writer in (up_w, client_w):
            with contextlib.suppress(Exception):
                writer.close()

    async def _requests(self, source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
        head = b""
        while data := await source.read(65536):
            head += data
            while b"\r\n\r\n" in head:
                request, head = head.split(b"\r\n\r\n", 1)
                lines = request.decode("latin-1").split("\r\n")
                cursor = [
                    line.split(":", 1)[1].strip()
                    for line in lines[1:]
                    if line.lower().startswith("last-event-id:")
                ]
                self.requests.append(lines[0] + (f" last-event-id={cursor[0]}" if cursor else ""))
                head = b""  # bodies are small JSON: not parsed further
            sink.write(data)
            await sink.drain()

    async def _responses(self, source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
        passed = 0
        while data := await source.read(65536):
            if self.plan and passed + len(data) > self.plan[0]:
                sink.write(data[: self.plan.pop(0) - passed])
                await sink.drain()
                self.cuts_made += 1
                sink.transport.abort()  # a reset, mid-frame
                return
            passed += len(data)
            sink.write(data)
            await sink.drain()


@contextlib.asynccontextmanager
async def proxy(upstream: Weft, plan: list[int]) -> AsyncIterator[CuttingProxy]:
    p = CuttingProxy(upstream.port, plan)
    await p.start()
    try:
        yield p
    finally:
        await p.stop()


async def test_a_dropped_stream_resumes_with_last_event_id_no_gap_no_duplicate(
    weft: Callable[..., Weft],
) -> None:
    server = weft("slow.json")
    async with proxy(server, plan=[1500, 1500, 1500]) as cutting:
        async with AsyncClient(cutting.base_url, reconnect_delay=0.02) as client:
            cursors: list[int] = []
            stream = client.execute("A story", on_cursor=lambda _, seq: cursors.append(seq))
            events = [event async for event in stream]
            result = await stream.result()

    assert cutting.cuts_made == 3 and stream.reconnects == 3
    attaches = [r for r in cutting.requests if "/stream" in r]
    assert len(attaches) == 3 and all(r.startswith("GET /api/agent/session/") for r in attaches)
    # Each reattach asks for what follows the last event the client had whole.
    resumed_from = [int(r.rsplit("last-event-id=", 1)[1]) for r in attaches]
    assert resumed_from == sorted(resumed_from) and all(seq > 0 for seq in resumed_from)
    assert set(resumed_from) <= set(cursors)
    assert cursors == sorted(set(cursors)), "the cursor only moves forward"

    # The events are exactly the run's, as an uncut connection replays them afterwards.
    async with AsyncClient(server.base_url) as direct:
        replayed = [event async for event in direct.attach(result.session_id)]
        session = await direct.get_session(result.session_id)
    assert [e.model_dump() for e in events] == [e.model_dump() for e in replayed]
    assert [e.type for e in events].count("session_start") == 1
    assert [e.type for e in events].count("execute_complete") == 1
    final = session.messages[-1]
    assert text_of(events) == final.text == result.messages[-1].text  # type: ignore[union-attr]
    assert len(final.text) > 250  # type: ignore[union-attr]
    assert result.status == "completed"


async def test_the_sync_client_resumes_the_same_way(weft: Callable[..., Weft]) -> None:
    server = weft("slow.json")
    async with proxy(server, plan=[2000, 2000]) as cutting:

        def read() -> tuple[str, int, str]:
            with Client(cutting.base_url, reconnect_delay=0.02) as client:
                stream = client.execute("A story")
                text = text_of(stream)
                result = stream.result()
                final = client.get_session(result.session_id).messages[-1]
                return text, stream.reconnects, final.text  # type: ignore[union-attr]

        text, reconnects, final = await asyncio.to_thread(read)
    assert reconnects == 2 and cutting.cuts_made == 2
    assert text == final


async def test_a_stream_that_keeps_dropping_fails_after_max_reconnects(
    weft: Callable[..., Weft],
) -> None:
    server = weft("slow.json")
    # Some events, then every reattach is cut before its answer's head: no progress.
    async with proxy(server, plan=[1500, 0, 0, 0]) as cutting:
        async with AsyncClient(cutting.base_url, max_reconnects=2, reconnect_delay=0.01) as client:
            stream = client.execute("A story")
            seen = []
            with pytest.raises(StreamError) as dropped:
                async for event in stream:
                    seen.append(event)
    assert dropped.value.code == "stream_dropped" and "after 2 tries" in dropped.value.message
    assert stream.reconnects == 2 and cutting.cuts_made == 3
    assert len([r for r in cutting.requests if "/stream" in r]) == 2
    assert seen and stream.last_event_id is not None
    with pytest.raises(StreamError):
        await stream.result()  # the stream's failure, again
