"""The asyncio client against a real ``weft serve``: text, the remote tool loop and approvals
(async callbacks), abort, a second execute on a running session (409), attach with a cursor."""

from __future__ import annotations

from collections.abc import Callable
from datetime import date
from typing import Any

import pytest
from conftest import Weft
from helpers import WeatherCall, text_of, theme_tool, thinking_of, types_of, weather_tool

from weft_client import (
    AssistantMessage,
    AsyncClient,
    ConflictError,
    ExecuteComplete,
    NativeEvent,
    SessionStart,
    TextDelta,
    ToolCall,
    ToolResultMessage,
    WeftError,
)

pytestmark = pytest.mark.anyio

STORY = (
    "Once upon a time a quick brown fox jumped over a lazy dog. The dog did not mind: it was "
    "asleep, dreaming of bones and long walks. The fox, proud of itself, jumped back and forth a "
    "dozen times, until the farmer came out with a lantern and everyone went to bed. The end."
)


async def test_text_streams_and_the_result_says_how_it_ended(weft: Callable[..., Weft]) -> None:
    async with AsyncClient(weft("text.json").base_url) as client:
        stream = client.execute("Hello")
        events = [event async for event in stream]
        result = await stream.result()
        view = await client.get_session(result.session_id)
    assert text_of(events) == "Hello! How can I help you today?"
    assert thinking_of(events) == "The user says hello; a short, friendly greeting will do."
    assert types_of(events)[-1] == "execute_complete"
    assert result.status == "completed" and view.last_event_seq == stream.last_event_id


async def test_python_tools_and_approvals_with_async_callbacks(weft: Callable[..., Weft]) -> None:
    ran: list[WeatherCall] = []
    async with AsyncClient(weft("tools.json").base_url) as client:
        result = await client.execute("Weather?", tools=[weather_tool(ran)]).result()
    assert ran == [("Paris", date(2024, 5, 1), "C")]
    assert result.status == "completed"
    assert [
        (m.tool_call_id, m.is_error) for m in result.messages if isinstance(m, ToolResultMessage)
    ] == [
        ("call_w1", False),
        ("call_w2", True),
    ]

    themed: list[dict[str, Any]] = []
    asked: list[ToolCall] = []

    async def decide(calls: list[ToolCall]) -> dict[str, bool]:
        asked.extend(calls)
        return {call.id: True for call in calls}

    async with AsyncClient(weft("approval.json").base_url) as client:
        approved = await client.execute(
            "Dark mode please", tools=[theme_tool(themed)], on_approval=decide
        ).result()
    assert [c.id for c in asked] == ["call_theme_1"] and asked[0].arguments == {"theme": "dark"}
    assert [t["theme"] for t in themed] == ["dark"]
    assert approved.status == "completed"


async def test_abort_stops_a_running_run_and_the_stream_ends_aborted(
    weft: Callable[..., Weft],
) -> None:
    async with AsyncClient(weft("stall.json").base_url) as client:
        stream = client.execute("Go")
        seen: list[NativeEvent] = []
        async for event in stream:
            seen.append(event)
            if (
                isinstance(event, TextDelta)
                and len([e for e in seen if isinstance(e, TextDelta)]) == 1
            ):
                await stream.abort()  # the run stalls after its text: only the abort ends it
        result = await stream.result()
        assert result.status == "aborted"
        (assistant,) = [m for m in result.messages if isinstance(m, AssistantMessage)]
        assert assistant.stop_reason == "aborted" and assistant.text == "Working on it"
        assert (await client.get_session(result.session_id)).status == "aborted"
        with pytest.raises(ConflictError) as nothing:
            await client.abort(result.session_id)
        assert nothing.value.code == "not_running"
    completes = [e for e in seen if isinstance(e, ExecuteComplete)]
    assert [c.status for c in completes] == ["aborted"]


async def test_a_second_execute_on_a_running_session_is_a_409_with_its_run_id(
    weft: Callable[..., Weft],
) -> None:
    async with AsyncClient(weft("stall.json").base_url) as client:
        stream = client.execute("Go")
        run_id = None
        async for event in stream:
            if isinstance(event, SessionStart):
                run_id = event.run_id
            if isinstance(event, TextDelta):
                break  # the run is under way (and stalls until aborted)
        assert stream.session_id is not None and run_id is not None
        with pytest.raises(ConflictError) as running:
            await client.execute(
                "Again", session_id=stream.session_id, options={"multitask": "reject"}
            ).result()
        assert (running.value.status, running.value.code) == (409, "session_running")
        assert running.value.run_id == run_id
        await client.abort(stream.session_id)
        # The abandoned stream's run ended: attaching replays it to its aborted end.
        replay = client.attach(stream.session_id)
        assert (await replay.result()).status == "aborted"
        await stream.aclose()


async def test_attach_resumes_after_a_given_event(weft: Callable[..., Weft]) -> None:
    async with AsyncClient(weft("slow.json").base_url) as client:
        cursor: list[tuple[str, int]] = []
        before: list[NativeEvent] = []
        reading = client.execute("A story", on_cursor=lambda sid, seq: cursor.append((sid, seq)))
        async for event in reading:
            before.append(event)
            if len(text_of(before)) > 40:
                break  # go away mid-run: the run goes on on the server
        await reading.aclose()
        session_id, last_seen = cursor[-1]
        rest_stream = client.attach(session_id, last_event_id=last_seen)
        rest = [event async for event in rest_stream]
        result = await rest_stream.result()
    assert text_of(before) + text_of(rest) == STORY
    assert "session_start" not in types_of(rest)
    assert types_of(rest)[-1] == "execute_complete" and result.status == "completed"
    assert rest_stream.last_event_id is not None and rest_stream.last_event_id > last_seen


async def test_a_stream_left_early_has_no_result_and_the_run_goes_on(
    weft: Callable[..., Weft],
) -> None:
    async with AsyncClient(weft("slow.json").base_url) as client:
        stream = client.execute("A story")
        async for event in stream:
            if isinstance(event, TextDelta):
                break
        await stream.aclose()
        with pytest.raises(WeftError) as unfinished:
            await stream.result()
        assert unfinished.value.code == "stream_unfinished"
        assert stream.session_id is not None
        # Nobody reads it any more, and the run still ends on the server.
        rest = await client.attach(stream.session_id, last_event_id=stream.last_event_id).result()
        assert rest.status == "completed"
        with pytest.raises(WeftError) as early:
            await client.execute("Not sent yet").abort()
        assert early.value.code == "no_session"
