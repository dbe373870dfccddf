"""The blocking client against a real ``weft serve``: text and thinking, the remote tool loop,
approvals, sessions (get, list, fork, delete), and the server's errors as typed exceptions."""

from __future__ import annotations

from collections.abc import Callable
from datetime import date
from typing import Any

import pytest
from conftest import Weft
from helpers import WeatherCall, text_of, theme_tool, thinking_of, types_of, weather_tool

from weft_client import (
    ApprovalDecision,
    ApprovalRequired,
    AssistantMessage,
    AuthenticationError,
    BadRequestError,
    Client,
    ConflictError,
    ExecuteComplete,
    ExecuteOptions,
    MessageEnd,
    NotFoundError,
    PayloadTooLargeError,
    ToolCall,
    ToolResultInput,
    ToolResultMessage,
    ToolSpec,
    UnknownEvent,
    UnprocessableEntityError,
    WeftError,
)

GREETING = "Hello! How can I help you today?"
GREETING_THINKING = "The user says hello; a short, friendly greeting will do."


def test_text_and_thinking_stream_as_typed_events(weft: Callable[..., Weft]) -> None:
    with Client(weft("text.json").base_url) as client:
        cursors: list[tuple[str, int]] = []
        stream = client.execute(
            "Hello",
            options=ExecuteOptions(system_prompt="Be brief."),
            on_cursor=lambda sid, seq: cursors.append((sid, seq)),
        )
        events = list(stream)
        result = stream.result()
        session = client.get_session(result.session_id)

    assert not [e for e in events if isinstance(e, UnknownEvent)], "every event has its model"
    assert text_of(events) == GREETING
    assert thinking_of(events) == GREETING_THINKING
    kinds = types_of(events)
    assert kinds[0] == "session_start" and kinds[-2:] == ["session_end", "execute_complete"]
    assert kinds.index("thinking_start") < kinds.index("text_start")
    (assistant,) = [
        e.message
        for e in events
        if isinstance(e, MessageEnd) and isinstance(e.message, AssistantMessage)
    ]
    assert isinstance(assistant, AssistantMessage)
    assert (assistant.text, assistant.thinking, assistant.stop_reason) == (
        GREETING,
        GREETING_THINKING,
        "stop",
    )
    assert (assistant.usage.input, assistant.usage.output) == (12, 9)

    assert result.status == "completed" and result.session_id == stream.session_id
    assert [m.role for m in result.messages] == ["user", "assistant"]
    assert (result.usage.input, result.usage.output) == (12, 9)
    assert session.status == "completed" and session.system_prompt == "Be brief."
    assert session.last_event_seq == stream.last_event_id
    seqs = [seq for _, seq in cursors]
    assert seqs == sorted(set(seqs)) and seqs[-1] == stream.last_event_id
    assert {sid for sid, _ in cursors} == {result.session_id}


def test_a_python_tool_runs_when_the_run_suspends_and_the_run_resumes(
    weft: Callable[..., Weft],
) -> None:
    ran: list[WeatherCall] = []
    with Client(weft("tools.json").base_url) as client:
        stream = client.execute("Weather in Paris and Lyon?", tools=[weather_tool(ran)])
        events = list(stream)
        result = stream.result()
        session = client.get_session(result.session_id)

    # The valid call ran with its arguments validated (a date, the default unit); the one the
    # model got wrong (a check only pydantic makes) never reached the function.
    assert ran == [("Paris", date(2024, 5, 1), "C")]
    completes = [e for e in events if isinstance(e, ExecuteComplete)]
    assert [c.status for c in completes] == ["awaiting_tool_execution", "completed"]
    assert [c.id for c in completes[0].pending_tool_calls] == ["call_w1", "call_w2"]
    assert (
        text_of(events) == "Let me look that up." + "Paris is sunny on 1 May; I could not get Lyon."
    )

    assert result.status == "completed"
    results = [m for m in result.messages if isinstance(m, ToolResultMessage)]
    assert [(r.tool_call_id, r.is_error) for r in results] == [
        ("call_w1", False),
        ("call_w2", True),
    ]
    assert results[0].text == "Sunny in Paris on 01 May, 21°C"
    assert results[0].details == {"celsius": 21}
    assert "city" in results[1].text and "capital letter" in results[1].text
    # The model's next call had them: they are in its history, before its final answer.
    assert [m.role for m in session.messages] == [
        "user",
        "assistant",
        "toolResult",
        "toolResult",
        "assistant",
    ]
    assert session.messages[2] == results[0] and session.messages[3] == results[1]
    assert isinstance(session.messages[4], AssistantMessage)
    assert session.messages[4].text == "Paris is sunny on 1 May; I could not get Lyon."
    # Usage of both runs.
    assert (result.usage.input, result.usage.output) == (130, 32)


def test_without_a_handler_the_stream_ends_suspended_and_a_manual_resume_completes(
    weft: Callable[..., Weft],
) -> None:
    with Client(weft("tools.json").base_url) as client:
        first = client.execute(
            "Weather?", tools=[ToolSpec(name="get_weather", parameters={"type": "object"})]
        ).result()
        assert first.status == "awaiting_tool_execution"
        assert first.pending_tool_calls == [
            ToolCall(
                id="call_w1",
                name="get_weather",
                arguments={"city": "Paris", "day": "2024-05-01", "unit": "C"},
            ),
            ToolCall(
                id="call_w2", name="get_weather", arguments={"city": "lyon", "day": "2024-05-02"}
            ),
        ]
        # A result for a call the session does not wait for: 422.
        with pytest.raises(UnprocessableEntityError) as unknown:
            client.execute(
                [ToolResultInput(tool_call_id="call_nope", tool_name="get_weather", content="?")],
                session_id=first.session_id,
            ).result()
        assert (unknown.value.status, unknown.value.code) == (422, "unknown_tool_call")
        # A new prompt while it waits: 409.
        with pytest.raises(ConflictError) as waiting:
            client.execute("Hello?", session_id=first.session_id).result()
        assert waiting.value.code == "awaiting_tool_calls"
        second = client.execute(
            [
                {"role": "toolResult", "toolCallId": "call_w1", "content": "Rain"},
                ToolResultInput(tool_call_id="call_w2", content="Fog", is_error=True),
            ],
            session_id=first.session_id,
        ).result()
    assert second.status == "completed"
    results = [m for m in second.messages if isinstance(m, ToolResultMessage)]
    assert [(r.text, r.is_error, r.tool_name) for r in results] == [
        ("Rain", False, "get_weather"),
        ("Fog", True, "get_weather"),
    ]


def test_an_approved_call_runs_and_a_denied_one_does_not(weft: Callable[..., Weft]) -> None:
    base = weft("approval.json").base_url
    ran: list[dict[str, Any]] = []
    asked: list[list[str]] = []

    def approve(calls: list[ToolCall]) -> bool:
        asked.append([c.id for c in calls])
        return True

    with Client(base) as client:
        stream = client.execute("Dark mode please", tools=[theme_tool(ran)], on_approval=approve)
        events = list(stream)
        approved = stream.result()

        denied_ran: list[dict[str, Any]] = []
        denied = client.execute(
            "Dark mode please",
            tools=[theme_tool(denied_ran)],
            on_approval=lambda calls: [
                ApprovalDecision(tool_call_id=c.id, approved=False, reason="not today")
                for c in calls
            ],
        ).result()
        denied_session = client.get_session(denied.session_id)

    assert asked == [["call_theme_1"]]
    assert any(isinstance(e, ApprovalRequired) for e in events)
    completes = [e.status for e in events if isinstance(e, ExecuteComplete)]
    assert completes == ["awaiting_approval", "awaiting_tool_execution", "completed"]
    assert ran == [{"theme": "dark", "call": "call_theme_1", "session": approved.session_id}]
    (result,) = [m for m in approved.messages if isinstance(m, ToolResultMessage)]
    assert (result.text, result.is_error) == ("The theme is dark.", False)

    assert denied_ran == [] and denied.status == "completed"
    assert [m.role for m in denied_session.messages] == [
        "user",
        "assistant",
        "toolResult",
        "assistant",
    ]
    denial = denied_session.messages[2]
    assert isinstance(denial, ToolResultMessage) and denial.is_error and "not today" in denial.text


def test_without_an_approval_callback_the_stream_ends_awaiting_approval(
    weft: Callable[..., Weft],
) -> None:
    with Client(weft("approval.json").base_url) as client:
        result = client.execute("Dark mode please", tools=[theme_tool([])]).result()
        assert result.status == "awaiting_approval"
        assert [c.id for c in result.pending_approvals] == ["call_theme_1"]
        # An answer of the wrong kind: a result for a call waiting for approval.
        with pytest.raises(UnprocessableEntityError) as wrong:
            client.execute(
                [ToolResultInput(tool_call_id="call_theme_1", content="done")],
                session_id=result.session_id,
            ).result()
        assert wrong.value.code == "wrong_answer_kind"
        resumed = client.execute(
            {"approvals": [{"toolCallId": "call_theme_1", "approved": False}]},
            session_id=result.session_id,
        ).result()
    assert resumed.status == "completed"


def test_sessions_get_list_fork_and_delete(weft: Callable[..., Weft]) -> None:
    with Client(weft("text.json").base_url) as client:
        sid = client.execute("Hello").result().session_id
        other = client.execute("Hello again").result().session_id

        heads = client.list_sessions()
        assert {sid, other} <= {h.id for h in heads}
        head = next(h for h in heads if h.id == sid)
        assert (head.status, head.message_count, head.usage.output) == ("completed", 2, 9)
        assert heads[0].updated_at >= heads[-1].updated_at
        assert len(client.list_sessions(limit=1)) == 1

        fork = client.fork(sid, at_message=1, new_session_id=f"{sid}-fork")
        assert (fork.id, fork.parent_id, fork.forked_at) == (f"{sid}-fork", sid, 1)
        assert [m.role for m in fork.messages] == ["user"]
        assert client.get_session(fork.id).parent_id == sid
        whole = client.fork(sid)
        assert whole.id not in (sid, fork.id) and len(whole.messages) == 2
        with pytest.raises(ConflictError) as taken:
            client.fork(sid, new_session_id=fork.id)
        assert taken.value.code == "session_exists"
        with pytest.raises(UnprocessableEntityError) as past_the_end:
            client.fork(sid, at_message=7)
        assert past_the_end.value.code == "invalid_fork"

        client.delete(fork.id)
        with pytest.raises(NotFoundError):
            client.get_session(fork.id)
        with pytest.raises(NotFoundError):
            client.delete(fork.id)
        assert fork.id not in {h.id for h in client.list_sessions()}
        assert client.get_session(sid).status == "completed"  # the parent is untouched


def test_errors_are_typed_exceptions(weft: Callable[..., Weft]) -> None:
    with Client(weft("text.json").base_url) as client:
        with pytest.raises(NotFoundError) as missing:
            client.get_session("no-such-session")
        assert (missing.value.status, missing.value.code) == (404, "session_not_found")
        assert isinstance(missing.value, WeftError) and "no-such-session" in missing.value.message

        with pytest.raises(NotFoundError):
            client.execute("Hi", session_id="no-such-session", context=None).result()

        with pytest.raises(BadRequestError) as malformed:
            client.execute("Hi", options={"multitask": "later"}).result()
        assert malformed.value.code == "bad_request"
        assert "options.multitask" in malformed.value.message

        with pytest.raises(BadRequestError) as bad_id:
            client.get_session("no spaces allowed")
        assert bad_id.value.code == "invalid_session_id"

        with pytest.raises(BadRequestError) as bad_tool:
            client.execute("Hi", tools=[ToolSpec(name="no spaces")]).result()
        assert bad_tool.value.code == "invalid_tool_name"

        with pytest.raises(PayloadTooLargeError) as too_large:
            client.execute("x" * (1 << 20)).result()
        assert (too_large.value.status, too_large.value.code) == (413, "body_too_large")

        with pytest.raises(ConflictError) as idle:
            client.abort(client.execute("Hi").result().session_id)
        assert idle.value.code == "not_running"


def test_the_bearer_key_is_sent_and_sessions_are_the_owners(weft: Callable[..., Weft]) -> None:
    server = weft("text.json", api_keys="sk-alice-0123=alice,sk-bob-0123=bob")
    with Client(server.base_url) as anonymous, pytest.raises(AuthenticationError) as refused:
        anonymous.list_sessions()
    assert (refused.value.status, refused.value.code) == (401, "unauthorized")
    with Client(server.base_url, api_key="sk-wrong") as wrong, pytest.raises(AuthenticationError):
        wrong.list_sessions()
    with Client(server.base_url, api_key="sk-alice-0123") as alice:
        sid = alice.execute("Hello").result().session_id
        assert [h.id for h in alice.list_sessions()] == [sid]
    with Client(server.base_url, api_key="sk-bob-0123") as bob:
        assert bob.list_sessions() == []
        with pytest.raises(NotFoundError):
            bob.get_session(sid)
