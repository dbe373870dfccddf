"""The native format's events: the agent plan's (``crates/weft-core/src/event.rs``, the subset
``crates/weft-protocol/src/native`` sends), and ``execute_complete``, which closes each run.

:func:`parse_event` never fails on what a server sends: an unknown ``type``, or a known one
whose fields do not fit, is an :class:`UnknownEvent` holding every field.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Union

from pydantic import Discriminator, Field, Tag, TypeAdapter, ValidationError, WrapValidator

from ._wire import WireModel, fallback_to, tag_of
from .models import Cost, Message, ToolCall, Usage


class SessionStart(WireModel):
    """A run starts."""

    type: Literal["session_start"] = "session_start"
    session_id: str
    run_id: str
    agent: str = ""


class SessionEnd(WireModel):
    """A run ends; ``messages`` are the messages it added."""

    type: Literal["session_end"] = "session_end"
    session_id: str
    status: str
    messages: list[Message] = Field(default_factory=list)
    usage: Usage = Field(default_factory=Usage)
    cost: Cost = Field(default_factory=Cost)


class AwaitingToolExecution(WireModel):
    """The run suspends until these remote calls have results."""

    type: Literal["awaiting_tool_execution"] = "awaiting_tool_execution"
    session_id: str
    tool_calls: list[ToolCall] = Field(default_factory=list)


class ApprovalRequired(WireModel):
    """The run suspends until these calls are approved or denied."""

    type: Literal["approval_required"] = "approval_required"
    session_id: str
    tool_calls: list[ToolCall] = Field(default_factory=list)


class MessageStart(WireModel):
    """A message starts (``user``, ``assistant`` or ``toolResult``)."""

    type: Literal["message_start"] = "message_start"
    role: str


class MessageEnd(WireModel):
    """A message ends; an assistant message carries its usage and cost."""

    type: Literal["message_end"] = "message_end"
    message: Message


class TextStart(WireModel):
    """A text block starts at ``index`` of the assistant message's content."""

    type: Literal["text_start"] = "text_start"
    index: int


class TextDelta(WireModel):
    """More text."""

    type: Literal["text_delta"] = "text_delta"
    index: int
    delta: str


class TextEnd(WireModel):
    """A text block ends, with its whole text."""

    type: Literal["text_end"] = "text_end"
    index: int
    text: str


class ThinkingStart(WireModel):
    """A thinking block starts."""

    type: Literal["thinking_start"] = "thinking_start"
    index: int


class ThinkingDelta(WireModel):
    """More thinking."""

    type: Literal["thinking_delta"] = "thinking_delta"
    index: int
    delta: str


class ThinkingEnd(WireModel):
    """A thinking block ends, with its whole text."""

    type: Literal["thinking_end"] = "thinking_end"
    index: int
    thinking: str
    signature: str | None = None


class ToolcallStart(WireModel):
    """A tool call starts."""

    type: Literal["toolcall_start"] = "toolcall_start"
    index: int
    id: str
    name: str


class ToolcallDelta(WireModel):
    """More of a tool call's JSON arguments."""

    type: Literal["toolcall_delta"] = "toolcall_delta"
    index: int
    delta: str


class ToolcallEnd(WireModel):
    """A tool call is complete, with its parsed arguments."""

    type: Literal["toolcall_end"] = "toolcall_end"
    index: int
    tool_call: ToolCall


class ToolExecutionStart(WireModel):
    """A server-side tool starts running."""

    type: Literal["tool_execution_start"] = "tool_execution_start"
    tool_call_id: str
    tool_name: str
    args: Any = None


class ToolExecutionDelta(WireModel):
    """A running server-side tool's output so far."""

    type: Literal["tool_execution_delta"] = "tool_execution_delta"
    tool_call_id: str
    delta: str


class ToolExecutionEnd(WireModel):
    """A server-side tool has finished."""

    type: Literal["tool_execution_end"] = "tool_execution_end"
    tool_call_id: str
    tool_name: str
    output: str
    details: Any = None
    is_error: bool = False


class ErrorEvent(WireModel):
    """The run failed (``error`` says why; ``message`` is the failed model call's, if any)."""

    type: Literal["error"] = "error"
    error: str
    message: Message | None = None


class ExecuteComplete(WireModel):
    """The frame that closes each run: its status and the calls it left waiting."""

    type: Literal["execute_complete"] = "execute_complete"
    status: str
    pending_tool_calls: list[ToolCall] = Field(default_factory=list)
    """Every call the run left waiting (results and approvals)."""
    pending_approvals: list[ToolCall] = Field(default_factory=list)
    """The subset waiting for an approval."""


class UnknownEvent(WireModel):
    """An event this client does not know, or whose fields do not fit its type: every field is
    kept in ``model_extra`` (``raw`` holds a frame that was not a JSON object)."""

    type: str = ""
    raw: Any = None


_EVENTS: dict[str, type[WireModel]] = {
    "session_start": SessionStart,
    "session_end": SessionEnd,
    "awaiting_tool_execution": AwaitingToolExecution,
    "approval_required": ApprovalRequired,
    "message_start": MessageStart,
    "message_end": MessageEnd,
    "text_start": TextStart,
    "text_delta": TextDelta,
    "text_end": TextEnd,
    "thinking_start": ThinkingStart,
    "thinking_delta": ThinkingDelta,
    "thinking_end": ThinkingEnd,
    "toolcall_start": ToolcallStart,
    "toolcall_delta": ToolcallDelta,
    "toolcall_end": ToolcallEnd,
    "tool_execution_start": ToolExecutionStart,
    "tool_execution_delta": ToolExecutionDelta,
    "tool_execution_end": ToolExecutionEnd,
    "error": ErrorEvent,
    "execute_complete": ExecuteComplete,
}

NATIVE_EVENT_TYPES: tuple[str, ...] = tuple(_EVENTS)
"""Every ``type`` of the native format."""

NativeEvent = Annotated[
    Union[
        Annotated[SessionStart, Tag("session_start")],
        Annotated[SessionEnd, Tag("session_end")],
        Annotated[AwaitingToolExecution, Tag("awaiting_tool_execution")],
        Annotated[ApprovalRequired, Tag("approval_required")],
        Annotated[MessageStart, Tag("message_start")],
        Annotated[MessageEnd, Tag("message_end")],
        Annotated[TextStart, Tag("text_start")],
        Annotated[TextDelta, Tag("text_delta")],
        Annotated[TextEnd, Tag("text_end")],
        Annotated[ThinkingStart, Tag("thinking_start")],
        Annotated[ThinkingDelta, Tag("thinking_delta")],
        Annotated[ThinkingEnd, Tag("thinking_end")],
        Annotated[ToolcallStart, Tag("toolcall_start")],
        Annotated[ToolcallDelta, Tag("toolcall_delta")],
        Annotated[ToolcallEnd, Tag("toolcall_end")],
        Annotated[ToolExecutionStart, Tag("tool_execution_start")],
        Annotated[ToolExecutionDelta, Tag("tool_execution_delta")],
        Annotated[ToolExecutionEnd, Tag("tool_execution_end")],
        Annotated[ErrorEvent, Tag("error")],
        Annotated[ExecuteComplete, Tag("execute_complete")],
        Annotated[UnknownEvent, Tag("unknown")],
    ],
    Discriminator(tag_of("type", NATIVE_EVENT_TYPES)),
    WrapValidator(fallback_to(UnknownEvent)),
]
"""A native stream's event, told apart by ``type`` (``isinstance`` or ``match`` on the class)."""

_ADAPTER: TypeAdapter[NativeEvent] = TypeAdapter(NativeEvent)


def parse_event(data: Any) -> NativeEvent:
    """The event of a frame's JSON value; anything that is not an event object is an
    :class:`UnknownEvent` (never an exception)."""
    if not isinstance(data, dict):
        return UnknownEvent(raw=data)
    try:
        return _ADAPTER.validate_python(data)
    except ValidationError:  # e.g. a `type` that is not a string
        return UnknownEvent(raw=data)
