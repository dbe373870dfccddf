"""The step-trace API: ``agent.stream()`` (the ``agent.*`` events), ``agent.handle()`` (the
``AgentResponse``), with the agent's own tools and approvals; and ``handle()`` against the
Rust library's ``Agent::respond()`` (``weft run --response``) on the same script."""

from __future__ import annotations

import json
import subprocess
import tempfile
from collections.abc import Callable
from datetime import date
from pathlib import Path
from typing import Any

import pytest
from conftest import SCRIPTS, Weft, clean_env
from helpers import WeatherCall, theme_tool, weather_tool

from weft_client import (
    Agent,
    AgentResponse,
    AgentStep,
    AgentStepEvent,
    ApprovalDecision,
    AsyncClient,
    Client,
    SyncAgent,
    ToolCall,
    steps,
)

pytestmark = pytest.mark.anyio

ECHO_INPUT = "Echo please"


def of_type(events: list[AgentStepEvent], kind: str) -> list[AgentStepEvent]:
    return [e for e in events if e.event_type == kind]


def call_id(event: AgentStepEvent) -> str | None:
    if event.tool_call is not None:
        return event.tool_call.id
    return event.tool_result.call.id if event.tool_result is not None else None


async def test_stream_yields_the_agent_taxonomy_step_by_step(weft: Callable[..., Weft]) -> None:
    async with AsyncClient(weft("respond.json").base_url) as client:
        agent = Agent(client)
        events = [event async for event in agent.stream(ECHO_INPUT)]
    kinds = [e.event_type for e in events]
    assert set(kinds) <= set(steps.EVENT_TYPES)
    for kind in (
        steps.LLM_STARTED,
        steps.LLM_REASONING,
        steps.LLM_OUTPUT_TEXT_DELTA,
        steps.LLM_TOOL_CALL_DELTA,
        steps.LLM_COMPLETED,
        steps.TOOL_STARTED,
        steps.TOOL_OUTPUT,
        steps.TOOL_COMPLETED,
        steps.STEP_COMPLETED,
        steps.RUN_COMPLETED,
    ):
        assert kind in kinds, kind
    assert steps.TOOL_FAILED not in kinds and steps.RUN_SUSPENDED not in kinds
    assert kinds.count(steps.RUN_COMPLETED) == 1 and kinds[-1] == steps.RUN_COMPLETED
    assert events[-1].status == "completed" and agent.session_id is not None

    # Two steps, each opened by agent.llm.started and closed by agent.step.completed; every
    # event names the step it belongs to.
    started = of_type(events, steps.LLM_STARTED)
    assert [e.step_index for e in started] == [0, 1]
    second = kinds.index(steps.LLM_STARTED, 1)
    assert {(e.step_index, e.step_id) for e in events[:second]} == {(0, started[0].step_id)}
    assert {(e.step_index, e.step_id) for e in events[second:]} == {(1, started[1].step_id)}
    for index, step_events in ((0, events[:second]), (1, events[second:])):
        k = [e.event_type for e in step_events]
        assert k[0] == steps.LLM_STARTED
        assert k.index(steps.LLM_COMPLETED) < k.index(steps.STEP_COMPLETED), index

    first = events[:second]
    reasoning = "".join(e.llm_delta or "" for e in of_type(first, steps.LLM_REASONING))
    text = "".join(e.llm_delta or "" for e in of_type(first, steps.LLM_OUTPUT_TEXT_DELTA))
    arguments = "".join(
        e.tool_call.arguments_delta or ""
        for e in of_type(first, steps.LLM_TOOL_CALL_DELTA)
        if e.tool_call
    )
    (completed,) = of_type(first, steps.LLM_COMPLETED)
    assert completed.step is not None and completed.step.tool_results == []
    response = completed.step.llm_response
    assert (
        reasoning == response.thinking == "The user wants an echo; the echo tool repeats its text."
    )
    assert text == response.text == "Let me echo that."
    assert json.loads(arguments) == {"text": "hello brave new world"}
    assert response.tool_calls == [
        ToolCall(id="call_echo_1", name="echo", arguments={"text": "hello brave new world"})
    ]

    # The server's echo tool: started, its output streamed, completed.
    (tool_started,) = of_type(first, steps.TOOL_STARTED)
    assert tool_started.tool_call is not None
    assert (tool_started.tool_call.name, tool_started.tool_call.arguments) == (
        "echo",
        {"text": "hello brave new world"},
    )
    output = "".join(
        e.tool_result.output for e in of_type(first, steps.TOOL_OUTPUT) if e.tool_result
    )
    (tool_completed,) = of_type(first, steps.TOOL_COMPLETED)
    assert tool_completed.tool_result is not None
    assert output == tool_completed.tool_result.output == "hello brave new world"
    assert tool_completed.tool_result.error is None
    (step0,) = of_type(first, steps.STEP_COMPLETED)
    assert step0.step is not None and step0.step.latency_ms is not None
    assert [r.output for r in step0.step.tool_results] == ["hello brave new world"]


async def test_handle_returns_the_steps_and_the_final_output(weft: Callable[..., Weft]) -> None:
    async with AsyncClient(weft("respond.json").base_url) as client:
        response = await Agent(client).handle(ECHO_INPUT)
    assert response.status == "completed" and response.session_id
    assert [t.step_index for t in response.turns] == [0, 1]
    assert response.final_output == "The echo said: hello brave new world."
    first, last = response.turns
    assert first.llm_response.stop_reason == "toolUse" and last.llm_response.stop_reason == "stop"
    assert (
        first.tool_results[0].call.name == "echo" and first.tool_results[0].started_at is not None
    )
    assert last.timestamp >= first.timestamp


def rust_response(weft_bin: Path, script: str, prompt: str) -> AgentResponse:
    """``weft run PROMPT --provider faux --script SCRIPT --response``: ``Agent::respond()``."""
    with tempfile.TemporaryDirectory(prefix="weft-py-run-") as home:
        done = subprocess.run(
            [
                str(weft_bin),
                "run",
                prompt,
                "--provider",
                "faux",
                "--script",
                str(SCRIPTS / script),
                "--response",
            ],
            env=clean_env(Path(home)),
            capture_output=True,
            timeout=60,
            check=False,
        )
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    return AgentResponse.model_validate(json.loads(done.stdout))


def comparable(step: AgentStep) -> dict[str, Any]:
    """What two runs of one script must agree on: not times, latencies or generated ids."""
    llm = step.llm_response
    return {
        "step_index": step.step_index,
        "content": [block.model_dump(mode="json") for block in llm.content],
        "text": llm.text,
        "thinking": llm.thinking,
        "tool_calls": [c.model_dump(mode="json") for c in llm.tool_calls],
        "stop_reason": llm.stop_reason,
        "error_message": llm.error_message,
        "usage": (llm.usage.input, llm.usage.output, llm.usage.total),
        "provider": llm.provider,
        "model": llm.model,
        "tool_results": [
            {
                "call": (r.call.id, r.call.name, r.call.arguments),
                "output": r.output,
                "error": r.error,
                "details": r.details,
            }
            for r in step.tool_results
        ],
        "annotations": step.annotations.model_dump(mode="json"),
    }


async def test_handle_matches_the_rust_agent_respond(
    weft: Callable[..., Weft], weft_bin: Path
) -> None:
    rust = rust_response(weft_bin, "respond.json", ECHO_INPUT)
    async with AsyncClient(weft("respond.json").base_url) as client:
        python = await Agent(client).handle(ECHO_INPUT)
    assert len(python.turns) == len(rust.turns) == 2
    for ours, theirs in zip(python.turns, rust.turns, strict=True):
        assert comparable(ours) == comparable(theirs)
    assert python.final_output == rust.final_output == "The echo said: hello brave new world."
    # And the sync agent says the same.
    with Client(weft("respond.json").base_url) as sync_client:
        again = SyncAgent(sync_client).handle(ECHO_INPUT)
    assert [comparable(t) for t in again.turns] == [comparable(t) for t in rust.turns]


async def test_the_agent_runs_its_python_tools_between_runs(weft: Callable[..., Weft]) -> None:
    ran: list[WeatherCall] = []
    async with AsyncClient(weft("tools.json").base_url) as client:
        agent = Agent(client, tools=[weather_tool(ran)], system_prompt="Answer briefly.")
        events = [event async for event in agent.stream("Weather in Paris and Lyon?")]
        assert agent.session_id is not None
        view = await client.get_session(agent.session_id)
    assert ran == [("Paris", date(2024, 5, 1), "C")]
    assert view.system_prompt == "Answer briefly." and [t.name for t in view.tools] == [
        "get_weather"
    ]
    kinds = [e.event_type for e in events]
    # The first run suspends on the calls and ends; the agent runs them; the next run goes on.
    suspended = kinds.index(steps.RUN_SUSPENDED)
    assert kinds[suspended + 1] == steps.RUN_COMPLETED
    assert events[suspended + 1].status == "awaiting_tool_execution"
    pending = events[suspended].annotations["tool_calls"]
    assert [c["id"] for c in pending] == ["call_w1", "call_w2"]
    client_events = [e for e in events if e.annotations.get("executor") == "client"]
    assert [(e.event_type, call_id(e)) for e in client_events] == [
        (steps.TOOL_STARTED, "call_w1"),
        (steps.TOOL_STARTED, "call_w2"),
        (steps.TOOL_COMPLETED, "call_w1"),
        (steps.TOOL_FAILED, "call_w2"),
    ]
    assert kinds.index(steps.TOOL_STARTED) > suspended + 1
    # The error result is reported once (the server's own report at the step's end is the same).
    assert len(of_type(events, steps.TOOL_FAILED)) == 1
    failed = of_type(events, steps.TOOL_FAILED)[0].tool_result
    assert failed is not None and failed.error is not None and "capital letter" in failed.error
    # The resumed run's events before its step ends still name step 0 (the server sends -1).
    assert all(e.step_index >= 0 and e.step_id for e in events)
    step0 = of_type(events, steps.STEP_COMPLETED)[0]
    assert step0.step_index == 0 and step0.step is not None
    assert [(r.call.id, r.output, r.error is not None) for r in step0.step.tool_results] == [
        ("call_w1", "Sunny in Paris on 01 May, 21°C", False),
        ("call_w2", failed.output, True),
    ]
    assert kinds.count(steps.RUN_COMPLETED) == 2 and events[-1].status == "completed"
    assert agent.last_result is not None and agent.last_result.status == "completed"

    # handle(): the same to the end, as an AgentResponse.
    async with AsyncClient(weft("tools.json").base_url) as client:
        response = await Agent(client, tools=[weather_tool([])]).handle("Weather?")
    assert [len(t.tool_results) for t in response.turns] == [2, 0]
    assert response.turns[0].tool_results[0].details == {"celsius": 21}
    assert response.final_output == "Paris is sunny on 1 May; I could not get Lyon."


async def test_the_agent_asks_for_approvals(weft: Callable[..., Weft]) -> None:
    ran: list[dict[str, Any]] = []
    asked: list[str] = []

    async def approve(calls: list[ToolCall]) -> bool:
        asked.extend(c.id for c in calls)
        return True

    async with AsyncClient(weft("approval.json").base_url) as client:
        agent = Agent(client, tools=[theme_tool(ran)], on_approval=approve)
        events = [event async for event in agent.stream("Dark mode please")]
    assert asked == ["call_theme_1"] and [r["theme"] for r in ran] == ["dark"]
    (requested,) = of_type(events, steps.TOOL_APPROVAL_REQUESTED)
    assert requested.tool_call is not None and requested.tool_call.arguments == {"theme": "dark"}
    statuses = [e.status for e in of_type(events, steps.RUN_COMPLETED)]
    assert statuses == ["awaiting_approval", "awaiting_tool_execution", "completed"]
    step0 = of_type(events, steps.STEP_COMPLETED)[0].step
    assert step0 is not None
    assert [(r.call.name, r.output, r.error) for r in step0.tool_results] == [
        ("set_theme", "The theme is dark.", None)
    ]

    # Denied (the sync agent): the tool never runs, and the model sees the reason.
    with Client(weft("approval.json").base_url) as sync_client:
        denied = SyncAgent(
            sync_client,
            tools=[theme_tool(ran)],
            on_approval=lambda calls: [
                ApprovalDecision(tool_call_id=c.id, approved=False, reason="not today")
                for c in calls
            ],
        ).handle("Dark mode please")
    assert len(ran) == 1
    (result,) = denied.turns[0].tool_results
    assert result.error is not None and "not today" in result.output
    assert (
        denied.final_output == "Done: the theme call has its answer."
        and denied.status == "completed"
    )


async def test_a_sync_agent_continues_its_session(weft: Callable[..., Weft]) -> None:
    with Client(weft("text.json").base_url) as client:
        agent = SyncAgent(client)
        first = agent.handle("Hello")
        assert first.final_output == "Hello! How can I help you today?"
        assert first.turns[0].llm_response.thinking.startswith("The user says hello")
        session_id = agent.session_id
        # The script has one turn: the session's second model call has none left and fails,
        # in the same session, as a failed step.
        second = agent.handle("Hello again")
        view = client.get_session(session_id or "")
    assert agent.session_id == session_id and second.session_id == session_id
    assert second.status == "error"
    assert [t.step_index for t in second.turns] == [1]
    assert second.turns[0].llm_response.stop_reason == "error"
    assert "no turn left" in (second.turns[0].llm_response.error_message or "")
    assert [m.role for m in view.messages] == ["user", "assistant", "user", "assistant"]
