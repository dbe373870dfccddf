"""What needs no server: liberal parsing, the SSE parser, tool schemas and validation, the
mapping of HTTP errors (statuses a faux server cannot be made to answer: 429, 5xx)."""

from __future__ import annotations

import json
from datetime import date, datetime, timezone
from typing import Annotated, Any

import httpx
import pytest
from helpers import weather_tool
from pydantic import BaseModel, Field

from weft_client import (
    AgentResponse,
    AssistantMessage,
    Client,
    ConflictError,
    ExecuteComplete,
    NotFoundError,
    RateLimitError,
    ServerError,
    SessionView,
    TextDelta,
    ThinkingContent,
    ToolCall,
    ToolContext,
    UnknownContent,
    UnknownEvent,
    UnknownMessage,
    WeftError,
    parse_event,
    parse_step_event,
    tool,
)
from weft_client.sse import SseParser

# ---- liberal parsing ----


def test_an_unknown_event_type_parses_and_keeps_its_fields() -> None:
    event = parse_event({"type": "brand_new_event", "sessionId": "s", "count": 3})
    assert isinstance(event, UnknownEvent)
    assert event.type == "brand_new_event"
    assert event.model_extra == {"sessionId": "s", "count": 3}


def test_a_known_event_with_an_unknown_field_keeps_it() -> None:
    event = parse_event({"type": "text_delta", "index": 0, "delta": "Hi", "tokenId": 7})
    assert isinstance(event, TextDelta)
    assert event.delta == "Hi"
    assert event.model_extra == {"tokenId": 7}


@pytest.mark.parametrize(
    "data",
    [
        {"type": "text_delta", "index": "zero"},  # a known type whose fields do not fit
        {"type": 5},
        {"no": "type"},
        ["not", "an", "object"],
        "plain text",
    ],
)
def test_anything_a_server_sends_parses(data: Any) -> None:
    event = parse_event(data)
    assert isinstance(event, UnknownEvent)


def test_unknown_roles_and_blocks_inside_known_events_parse() -> None:
    event = parse_event(
        {
            "type": "session_end",
            "sessionId": "s",
            "status": "some_new_status",
            "messages": [
                {"role": "critic", "content": "hm"},
                {
                    "role": "assistant",
                    "content": [
                        {"type": "thinking", "thinking": "t"},
                        {"type": "hologram", "frames": 3},
                    ],
                    "stopReason": "a_new_reason",
                    "provider": "p",
                    "model": "m",
                },
            ],
            "usage": {"input": 1, "output": 2, "total": 3, "future": 1},
            "cost": {"total": 0.5},
        }
    )
    assert event.type == "session_end"
    critic, assistant = event.messages  # type: ignore[union-attr]
    assert isinstance(critic, UnknownMessage) and critic.role == "critic"
    assert isinstance(assistant, AssistantMessage)
    assert isinstance(assistant.content[0], ThinkingContent)
    assert isinstance(assistant.content[1], UnknownContent)
    assert assistant.content[1].model_extra == {"frames": 3}
    assert assistant.stop_reason == "a_new_reason"


def test_execute_complete_reads_its_calls() -> None:
    event = parse_event(
        {
            "type": "execute_complete",
            "status": "awaiting_approval",
            "pendingToolCalls": [{"id": "c1", "name": "delete", "arguments": {"path": "a"}}],
            "pendingApprovals": [{"id": "c1", "name": "delete", "arguments": {"path": "a"}}],
        }
    )
    assert isinstance(event, ExecuteComplete)
    assert event.pending_approvals == [ToolCall(id="c1", name="delete", arguments={"path": "a"})]


def test_step_events_parse_liberally() -> None:
    unknown = parse_step_event({"event_type": "agent.planner.started", "step_index": 2, "x": 1})
    assert unknown.event_type == "agent.planner.started"
    assert unknown.step_index == 2 and unknown.model_extra == {"x": 1}
    broken = parse_step_event({"event_type": "agent.step.completed", "step": {"oops": True}})
    assert broken.event_type == "agent.step.completed"
    assert broken.step is None and broken.annotations["raw"]["step"] == {"oops": True}
    assert parse_step_event([1, 2]).event_type == ""


def test_the_rust_response_json_reads_as_the_spec_response() -> None:
    rust = {
        "steps": [
            {
                "stepId": "st0",
                "stepIndex": 0,
                "timestamp": 1_700_000_000_123,
                "llmResponse": {
                    "content": [{"type": "text", "text": "Hi"}],
                    "stopReason": "stop",
                    "provider": "faux",
                    "model": "faux",
                },
                "latencyMs": 4,
                "toolResults": [
                    {
                        "call": {"id": "c", "name": "echo", "arguments": {}},
                        "output": "x",
                        "startedAt": 1_700_000_000_200,
                        "latencyMs": 1,
                    }
                ],
            }
        ],
        "finalOutput": "Hi",
    }
    response = AgentResponse.model_validate(rust)
    (step,) = response.turns
    assert step.step_id == "st0" and step.latency_ms == 4
    assert step.timestamp == datetime(2023, 11, 14, 22, 13, 20, 123000, tzinfo=timezone.utc)
    assert step.tool_results[0].started_at is not None
    assert step.llm_response.text == "Hi" and response.final_output == "Hi"


# ---- SSE ----


def test_sse_frames_survive_any_chunking() -> None:
    stream = (
        'id: 1\ndata: {"a": "é"}\n\n'
        ": keep-alive\n\n"
        "data: first\r\ndata: second\r\n\r\n"
        "event: x\nid: 2\ndata: z\r\r"
    ).encode()
    expected = [("1", '{"a": "é"}', None), (None, "first\nsecond", None), ("2", "z", "x")]
    for size in (1, 2, 3, 7, len(stream)):
        parser = SseParser()
        frames = []
        for i in range(0, len(stream), size):
            frames += parser.feed(stream[i : i + size])
        assert [(f.id, f.data, f.event) for f in frames] == expected, size


# ---- tools ----


def test_a_tool_schema_comes_from_its_hints_and_docstring() -> None:
    get_weather = weather_tool([])
    assert get_weather.name == "get_weather"
    assert get_weather.description == "The weather in a city on a day."
    assert get_weather.parameters == {
        "type": "object",
        "properties": {
            "city": {"type": "string", "description": "The city's name, capitalised."},
            "day": {
                "type": "string",
                "format": "date",
                "description": "The day, as an ISO 8601 date.",
            },
            "unit": {
                "type": "string",
                "enum": ["C", "F"],
                "default": "C",
                "description": "Celsius or Fahrenheit.",
            },
        },
        "required": ["city", "day"],
        "additionalProperties": False,
    }
    spec = get_weather.spec().to_wire()
    assert spec["name"] == "get_weather" and "requiresApproval" not in spec


class Address(BaseModel):
    street: str
    zip: Annotated[str, Field(pattern=r"^\d{5}$")]


def test_a_call_is_validated_through_the_same_model() -> None:
    seen: list[Any] = []

    @tool(name="ship", requires_approval=True)
    def ship_parcel(to: Address, weight_kg: float, when: date, ctx: ToolContext) -> dict[str, Any]:
        """Ships a parcel."""
        seen.append((to, weight_kg, when, ctx.session_id, ctx.call.id))
        return {"ok": True, "to": to}

    assert ship_parcel.spec().requires_approval is True
    assert "ctx" not in ship_parcel.parameters["properties"]
    assert ship_parcel.parameters["properties"]["to"] == {"$ref": "#/$defs/Address"}
    call = ToolCall(
        id="c1",
        name="ship",
        arguments={
            "to": {"street": "Rue A", "zip": "75001"},
            "weight_kg": "2.5",
            "when": "2024-05-01",
        },
    )
    result = ship_parcel.run(call, "s1")
    assert not result.is_error
    assert seen == [(Address(street="Rue A", zip="75001"), 2.5, date(2024, 5, 1), "s1", "c1")]
    assert json.loads(result.content) == {"ok": True, "to": {"street": "Rue A", "zip": "75001"}}
    bad = ship_parcel.run(
        ToolCall(
            id="c2", name="ship", arguments={"to": {"street": "x", "zip": "1"}, "when": "soon"}
        ),
        "s1",
    )
    assert bad.is_error and len(seen) == 1
    assert bad.content.startswith("invalid arguments: ")
    for problem in ("to.zip", "weight_kg: Field required", "when"):
        assert problem in bad.content


@pytest.mark.anyio
async def test_sync_and_async_tools_run_both_ways_and_exceptions_become_error_results() -> None:
    @tool
    async def slow_double(n: int) -> int:
        return n * 2

    @tool
    def fails(n: int) -> str:
        raise RuntimeError(f"no luck with {n}")

    call = ToolCall(id="c", name="x", arguments={"n": 21})
    assert (await slow_double.arun(call)).content == "42"
    failed = await fails.arun(call)
    assert (failed.content, failed.is_error, failed.tool_call_id) == ("no luck with 21", True, "c")
    assert await slow_double(4) == 8  # still callable as the function it wraps
    assert fails.run(call).content == "no luck with 21"


# ---- HTTP errors a test server cannot be made to answer ----


def answering(status: int, body: Any, headers: dict[str, str] | None = None) -> Client:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(status, json=body, headers=headers)

    return Client("http://127.0.0.1:9", transport=httpx.MockTransport(handler))


def test_429_and_5xx_map_to_their_classes() -> None:
    with (
        answering(
            429, {"error": {"code": "rate_limited", "message": "slow down"}}, {"retry-after": "7"}
        ) as client,
        pytest.raises(RateLimitError) as limited,
    ):
        client.list_sessions()
    assert (limited.value.status, limited.value.code, limited.value.retry_after) == (
        429,
        "rate_limited",
        7.0,
    )
    with answering(503, {"error": {"code": "store_unavailable", "message": "later"}}) as client:
        with pytest.raises(ServerError) as failed:
            client.get_session("s")
    assert isinstance(failed.value, WeftError) and failed.value.code == "store_unavailable"
    with answering(
        409, {"error": {"code": "session_running", "message": "busy", "runId": "r1"}}
    ) as client:
        with pytest.raises(ConflictError) as busy:
            client.abort("s")
    assert busy.value.run_id == "r1"
    with answering(404, "<html>not json</html>") as client, pytest.raises(NotFoundError) as missing:
        client.delete("s")
    assert missing.value.code == "http_error" and "not json" in missing.value.message


def test_models_accept_the_server_session_view() -> None:
    view = SessionView.model_validate(
        {
            "id": "s",
            "status": "completed",
            "lastEventSeq": 9,
            "parentId": "p",
            "forkedAt": 1,
            "new": 1,
        }
    )
    assert (view.last_event_seq, view.parent_id, view.forked_at) == (9, "p", 1)


def test_a_stream_that_ends_before_its_run_is_resumed_after_its_last_whole_event() -> None:
    """The server's answer ends cleanly mid-run (as when it shuts down), after half of an
    event's frames: the client reattaches after the last event it had whole."""
    start = {"type": "session_start", "sessionId": "s1", "runId": "r1", "agent": "react"}
    delta = {"type": "text_delta", "index": 0, "delta": "Hi"}
    end = {"type": "session_end", "sessionId": "s1", "status": "completed", "messages": []}
    complete = {"type": "execute_complete", "status": "completed"}

    def sse(*frames: tuple[dict[str, Any], int | None]) -> bytes:
        out = ""
        for data, seq in frames:
            out += (f"id: {seq}\n" if seq is not None else "") + f"data: {json.dumps(data)}\n\n"
        return out.encode()

    requests: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        requests.append(request)
        headers = {"content-type": "text/event-stream", "x-session-id": "s1"}
        if request.method == "POST":  # session_end's frame arrives, not its id-carrying close
            return httpx.Response(
                200, headers=headers, content=sse((start, 1), (delta, 4), (end, None))
            )
        return httpx.Response(200, headers=headers, content=sse((end, None), (complete, 9)))

    with Client(
        "http://127.0.0.1:9", transport=httpx.MockTransport(handler), reconnect_delay=0
    ) as c:
        stream = c.execute("Hi")
        events = list(stream)
    assert [e.type for e in events] == [
        "session_start",
        "text_delta",
        "session_end",
        "execute_complete",
    ]
    assert stream.reconnects == 1 and stream.last_event_id == 9
    attach = requests[1]
    assert (attach.method, attach.url.path) == ("GET", "/api/agent/session/s1/stream")
    assert attach.headers["last-event-id"] == "4"
    assert attach.url.params["protocol"] == "native"
    assert stream.result().status == "completed"
