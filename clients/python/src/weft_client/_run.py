"""What the sync and async clients share, without any IO: request bodies, the frames of one
response held until their event's ``id:`` arrives, the two wire formats a stream is read in
(native events, or AceAI step events), and what to post after a run suspends.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Generic, TypeVar, Union
from urllib.parse import quote

from pydantic import BaseModel

from . import steps as st
from .events import (
    ExecuteComplete,
    NativeEvent,
    SessionEnd,
    SessionStart,
    parse_event,
)
from .models import (
    ApprovalDecision,
    Cost,
    ExecuteContext,
    ExecuteOptions,
    ExecuteResult,
    Message,
    ToolCall,
    ToolResultInput,
    ToolSpec,
    Usage,
    UserInput,
)
from .sse import SseParser
from .tools import Tool

E = TypeVar("E")

InputLike = Union[
    str,
    UserInput,
    ToolResultInput,
    Sequence[Union[ToolResultInput, Mapping[str, Any]]],
    Mapping[str, Any],
]
"""What ``execute`` takes: text (a user message), a :class:`UserInput`, tool results, or
``{"approvals": [...]}`` (any JSON object the server reads as an input)."""

ApprovalAnswer = Union[
    bool,
    Sequence[Union[ApprovalDecision, Mapping[str, Any]]],
    Mapping[str, bool],
]
"""What an approval callback returns: ``True``/``False`` for every call, per-call
:class:`ApprovalDecision` s, or ``{tool_call_id: approved}``."""

CursorCallback = Callable[[str, int], None]
"""Called after every event with the session id and the stream's cursor (its last event seq)."""

DEFAULT_MAX_RECONNECTS = 5
DEFAULT_RECONNECT_DELAY = 0.1
MAX_RECONNECT_DELAY = 2.0


def session_path(session_id: str, suffix: str = "") -> str:
    return f"/api/agent/session/{quote(session_id, safe='')}{suffix}"


def wire(value: Any) -> Any:
    """A model as the server's JSON, a mapping or sequence with its models converted."""
    if isinstance(value, BaseModel):
        to_wire = getattr(value, "to_wire", None)
        if callable(to_wire):
            return to_wire()
        return value.model_dump(mode="json", by_alias=True, exclude_none=True)
    if isinstance(value, Mapping):
        return {k: wire(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [wire(v) for v in value]
    return value


def input_body(value: InputLike) -> Any:
    if isinstance(value, str):
        return {"role": "user", "content": value}
    return wire(value)


def execute_body(
    value: InputLike,
    *,
    session_id: str | None,
    context: ExecuteContext | Mapping[str, Any] | None,
    tools: Sequence[Tool[Any, Any] | ToolSpec] | None,
    options: ExecuteOptions | Mapping[str, Any] | None,
) -> dict[str, Any]:
    """The body of ``POST /api/agent/execute``. A new session (no ``session_id``) always gets a
    context; the client tools' specs are added to it."""
    body: dict[str, Any] = {"input": input_body(value)}
    if session_id is not None:
        body["sessionId"] = session_id
    if context is not None or session_id is None:
        ctx: dict[str, Any] = {"messages": []}
        ctx.update(wire(context) if context is not None else {})
        specs = [t.spec() if isinstance(t, Tool) else t for t in tools or ()]
        if specs:
            ctx["tools"] = list(ctx.get("tools") or []) + [wire(s) for s in specs]
        body["context"] = ctx
    if options is not None:
        body["options"] = wire(options)
    return body


def approvals_input(calls: Sequence[ToolCall], answer: ApprovalAnswer) -> dict[str, Any]:
    """The ``{"approvals": [...]}`` input an approval callback's answer stands for."""
    decisions: list[Any]
    if isinstance(answer, bool):
        decisions = [{"toolCallId": c.id, "approved": answer} for c in calls]
    elif isinstance(answer, Mapping):
        decisions = [
            {"toolCallId": call_id, "approved": bool(approved)}
            for call_id, approved in answer.items()
        ]
    else:
        decisions = [wire(d) for d in answer]
    return {"approvals": decisions}


@dataclass
class Released(Generic[E]):
    """Events whose last frame carried ``id:`` = ``seq``, released together."""

    events: list[E]
    seq: int | None


class FrameReader:
    """One response's SSE frames as JSON values, held until a frame with ``id:`` arrives: an
    event's frames before its last are sent again after a drop, so nothing is shown twice."""

    def __init__(self) -> None:
        self._parser = SseParser()
        self._held: list[Any] = []

    def feed(self, chunk: bytes) -> list[Released[Any]]:
        out: list[Released[Any]] = []
        for frame in self._parser.feed(chunk):
            if frame.data != "":
                try:
                    self._held.append(json.loads(frame.data))
                except ValueError:
                    self._held.append(frame.data)
            if frame.id is None:
                continue
            try:
                seq: int | None = int(frame.id)
            except ValueError:
                seq = None
            out.append(Released(self._held, seq))
            self._held = []
        return out


@dataclass
class RunEnd:
    """How one run ended, and the calls it left waiting."""

    status: str
    pending_tool_calls: list[ToolCall] = field(default_factory=list)
    pending_approvals: list[ToolCall] = field(default_factory=list)


@dataclass
class Totals:
    """What a stream's runs added up to."""

    messages: list[Message] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    cost: Cost = field(default_factory=Cost)


class Format(Generic[E]):
    """A wire format a stream is read in: how its frames become events, which event ends a run,
    and what the run's end says."""

    name: str

    def parse(self, data: Any) -> list[E]:
        """The events of one frame's JSON value (a format may drop or add some)."""
        raise NotImplementedError

    def run_end(self, event: E, totals: Totals) -> RunEnd | None:
        """Notes what ``event`` says; the run's end when it is the event that closes it."""
        raise NotImplementedError

    def session_id(self, event: E) -> str | None:
        """The session id an event names, if any."""
        return None

    def client_tool_started(self, call: ToolCall) -> list[E]:
        """Events of the client starting a call of its own (none by default)."""
        return []

    def client_tool_ended(
        self, call: ToolCall, result: ToolResultInput, started: float, latency_ms: int
    ) -> list[E]:
        """Events of the client's call ending (none by default)."""
        return []


class NativeFormat(Format[NativeEvent]):
    """The native format: the plan's events, ``execute_complete`` closing each run."""

    name = "native"

    def parse(self, data: Any) -> list[NativeEvent]:
        return [parse_event(data)]

    def session_id(self, event: NativeEvent) -> str | None:
        if isinstance(event, SessionStart):
            return event.session_id
        return None

    def run_end(self, event: NativeEvent, totals: Totals) -> RunEnd | None:
        if isinstance(event, SessionEnd):
            totals.messages.extend(event.messages)
            totals.usage = totals.usage + event.usage
            totals.cost = totals.cost + event.cost
        if isinstance(event, ExecuteComplete):
            return RunEnd(event.status, event.pending_tool_calls, event.pending_approvals)
        return None


class AceaiFormat(Format[st.AgentStepEvent]):
    """The AceAI step events, as one encoder over the session's runs would write them.

    A stream that starts with a resumed run does not know its step until the step ends, and the
    server names it ``step_index: -1``: those events get the step this stream was in. The
    client's own tool executions are reported as ``agent.tool.started`` and
    ``agent.tool.completed``/``failed`` (with ``annotations.executor = "client"``); the server's
    ``agent.tool.failed`` for the same error result, at the step's end, is then not repeated.
    """

    name = "aceai"

    def __init__(self) -> None:
        self._step_index = -1
        self._step_id = ""
        self._reported: set[str] = set()
        self._approvals: list[ToolCall] = []
        self._suspended: list[ToolCall] = []

    def parse(self, data: Any) -> list[st.AgentStepEvent]:
        event = st.parse_step_event(data)
        if event.step_index >= 0:
            self._step_index, self._step_id = event.step_index, event.step_id
        elif self._step_index >= 0 and event.event_type:
            event = event.model_copy(
                update={"step_index": self._step_index, "step_id": self._step_id}
            )
        if event.event_type == st.TOOL_FAILED and event.tool_result is not None:
            if event.tool_result.call.id in self._reported:
                return []
        if event.event_type in (st.STEP_COMPLETED, st.STEP_FAILED):
            self._reported.clear()
        return [event]

    def run_end(self, event: st.AgentStepEvent, totals: Totals) -> RunEnd | None:
        if event.event_type == st.TOOL_APPROVAL_REQUESTED and event.tool_call is not None:
            self._approvals.append(event.tool_call.to_call())
        elif event.event_type == st.RUN_SUSPENDED:
            calls = event.annotations.get("tool_calls") or []
            for call in calls if isinstance(calls, list) else []:
                try:
                    self._suspended.append(ToolCall.model_validate(call))
                except ValueError:
                    continue
        elif event.event_type == st.RUN_COMPLETED:
            usage, cost = event.annotations.get("usage"), event.annotations.get("cost")
            if isinstance(usage, dict):
                totals.usage = totals.usage + Usage.model_validate(usage)
            if isinstance(cost, dict):
                totals.cost = totals.cost + Cost.model_validate(cost)
            end = RunEnd(
                event.status or "",
                self._approvals + self._suspended,
                list(self._approvals),
            )
            self._approvals, self._suspended = [], []
            return end
        return None

    def _event(self, kind: str, **fields: Any) -> st.AgentStepEvent:
        return st.AgentStepEvent(
            event_type=kind,
            step_index=self._step_index,
            step_id=self._step_id,
            annotations={"executor": "client"},
            **fields,
        )

    def client_tool_started(self, call: ToolCall) -> list[st.AgentStepEvent]:
        record = st.LLMToolCall(id=call.id, name=call.name, arguments=call.arguments)
        return [self._event(st.TOOL_STARTED, tool_call=record)]

    def client_tool_ended(
        self, call: ToolCall, result: ToolResultInput, started: float, latency_ms: int
    ) -> list[st.AgentStepEvent]:
        self._reported.add(call.id)
        record = st.ToolExecutionResult(
            call=st.LLMToolCall(id=call.id, name=call.name, arguments=call.arguments),
            output=result.content,
            error=result.content if result.is_error else None,
            details=result.details,
            started_at=datetime.fromtimestamp(started, tz=timezone.utc),
            latency_ms=latency_ms,
        )
        kind = st.TOOL_FAILED if result.is_error else st.TOOL_COMPLETED
        return [self._event(kind, tool_result=record)]


@dataclass
class Resume:
    """What to do after a run suspended: ask for approvals, or run client tools."""

    approvals: list[ToolCall] = field(default_factory=list)
    calls: list[tuple[ToolCall, Tool[Any, Any]]] = field(default_factory=list)


def plan_resume(
    end: RunEnd,
    tools: Sequence[Tool[Any, Any] | ToolSpec] | None,
    can_approve: bool,
) -> Resume | None:
    """What the client can do to go on after ``end`` (as the TypeScript client does), or
    ``None``: the stream ends there."""
    if end.status == "awaiting_approval" and end.pending_approvals and can_approve:
        return Resume(approvals=list(end.pending_approvals))
    if end.status != "awaiting_tool_execution":
        return None
    approval_ids = {c.id for c in end.pending_approvals}
    calls = [c for c in end.pending_tool_calls if c.id not in approval_ids]
    handlers = {t.name: t for t in tools or () if isinstance(t, Tool)}
    if not calls or not all(c.name in handlers for c in calls):
        return None
    return Resume(calls=[(c, handlers[c.name]) for c in calls])


def result_of(session_id: str, end: RunEnd, totals: Totals) -> ExecuteResult:
    return ExecuteResult(
        session_id=session_id,
        status=end.status,
        messages=totals.messages,
        pending_tool_calls=end.pending_tool_calls,
        pending_approvals=end.pending_approvals,
        usage=totals.usage,
        cost=totals.cost,
    )


def backoff(base: float, failures: int) -> float:
    return float(min(MAX_RECONNECT_DELAY, base * 2**failures))


def now() -> float:
    return time.time()


def latency_ms(started_monotonic: float) -> int:
    return int((time.monotonic() - started_monotonic) * 1000)
