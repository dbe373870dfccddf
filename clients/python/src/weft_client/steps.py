"""The step trace (``specs/agent-response.zh.md``): :class:`AgentStep`,
:class:`ToolExecutionResult`, :class:`AgentResponse`, and the ``agent.*`` events
(:class:`AgentStepEvent`) of the server's AceAI format (``?protocol=aceai``, documented in
``crates/weft-protocol/src/aceai/mod.rs``).

Their JSON is the spec's snake_case; the camelCase of the Rust library's ``AgentResponse``
(``weft run --response``) is read too. Canonical objects carried whole (``llm_response``,
``usage``, ``cost``) keep their camelCase JSON. Unknown fields are kept, and an unknown
``event_type`` parses like any other.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Final, Literal

from pydantic import AliasChoices, Field, ValidationError

from ._wire import SnakeModel
from .models import AssistantMessage, ToolCall

# ---- event types, as the aceai module names them ----

LLM_STARTED: Final = "agent.llm.started"
"""A step's model request starts."""
LLM_OUTPUT_TEXT_DELTA: Final = "agent.llm.output_text.delta"
"""More text: ``llm_delta``."""
LLM_REASONING: Final = "agent.llm.reasoning"
"""More reasoning (thinking): ``llm_delta``."""
LLM_TOOL_CALL_DELTA: Final = "agent.llm.tool_call.delta"
"""A tool call's start (empty ``arguments_delta``) or more of its arguments."""
LLM_COMPLETED: Final = "agent.llm.completed"
"""The model's whole response (``step.llm_response``, no tool results yet)."""
TOOL_STARTED: Final = "agent.tool.started"
"""A tool starts (``tool_call``)."""
TOOL_OUTPUT: Final = "agent.tool.output"
"""A running tool's output increment (``tool_result.output``)."""
TOOL_COMPLETED: Final = "agent.tool.completed"
"""A tool succeeded (``tool_result``)."""
TOOL_FAILED: Final = "agent.tool.failed"
"""A call's result is an error (``tool_result.error``)."""
TOOL_APPROVAL_REQUESTED: Final = "agent.tool.approval_requested"
"""A call waits for approval (``tool_call``)."""
STEP_COMPLETED: Final = "agent.step.completed"
"""A step ended, with all of its tool results (``step``)."""
STEP_FAILED: Final = "agent.step.failed"
"""A step failed (``step`` and ``error``), or without ``step``: something else failed."""
RUN_SUSPENDED: Final = "agent.run.suspended"
"""The run waits for remote results (``annotations.tool_calls``)."""
RUN_COMPLETED: Final = "agent.run.completed"
"""The run ended (``annotations.status``, ``usage``, ``cost``); a run's last frame."""
CUSTOM: Final = "agent.custom"
"""Progress the spec has no event for (``annotations.event``)."""

AgentEventType = Literal[
    "agent.llm.started",
    "agent.llm.output_text.delta",
    "agent.llm.reasoning",
    "agent.llm.tool_call.delta",
    "agent.llm.completed",
    "agent.tool.started",
    "agent.tool.output",
    "agent.tool.completed",
    "agent.tool.failed",
    "agent.tool.approval_requested",
    "agent.step.completed",
    "agent.step.failed",
    "agent.run.suspended",
    "agent.run.completed",
    "agent.custom",
]
"""Every ``event_type`` the server sends (``AgentStepEvent.event_type`` is typed ``str`` so that
a newer server's types parse too)."""

EVENT_TYPES: Final[tuple[str, ...]] = (
    LLM_STARTED,
    LLM_OUTPUT_TEXT_DELTA,
    LLM_REASONING,
    LLM_TOOL_CALL_DELTA,
    LLM_COMPLETED,
    TOOL_STARTED,
    TOOL_OUTPUT,
    TOOL_COMPLETED,
    TOOL_FAILED,
    TOOL_APPROVAL_REQUESTED,
    STEP_COMPLETED,
    STEP_FAILED,
    RUN_SUSPENDED,
    RUN_COMPLETED,
    CUSTOM,
)


class LLMToolCall(SnakeModel):
    """A tool call record ``{id, name, arguments}``, or a piece of one (``arguments_delta``)."""

    id: str = ""
    name: str = ""
    arguments: Any = None
    arguments_delta: str | None = None

    def to_call(self) -> ToolCall:
        """The call as the native format types it."""
        return ToolCall(id=self.id, name=self.name, arguments=self.arguments)


class ToolExecutionResult(SnakeModel):
    """One tool execution of a step: the call, its output (on failure the error text the model
    saw), and ``error`` when it failed."""

    call: LLMToolCall
    output: str = ""
    error: str | None = None
    details: Any = None
    started_at: datetime | None = None
    latency_ms: int | None = None


class AgentSafetyNote(SnakeModel):
    """A safety verdict attached to a step."""

    verdict: str = "allow"
    """``allow``, ``review`` or ``block``."""
    category: str = ""


class AgentCitationRef(SnakeModel):
    """A citation attached to a step."""

    label: str = ""
    url: str | None = None
    provider_ref: Any = None


class AgentStepAnnotations(SnakeModel):
    """A step's annotations: safety verdicts, citations and anything else."""

    safety: list[AgentSafetyNote] = Field(default_factory=list)
    citations: list[AgentCitationRef] = Field(default_factory=list)
    extra: dict[str, Any] = Field(default_factory=dict)


class AgentStep(SnakeModel):
    """One model call and the tool executions it caused."""

    step_id: str
    step_index: int = -1
    timestamp: datetime
    """When the model call started."""
    llm_response: AssistantMessage
    """The model's whole response, as the provider layer gave it."""
    latency_ms: int | None = None
    """How long the model call took (absent on ``agent.llm.completed``)."""
    tool_results: list[ToolExecutionResult] = Field(default_factory=list)
    annotations: AgentStepAnnotations = Field(default_factory=AgentStepAnnotations)


class AgentStepEvent(SnakeModel):
    """One ``agent.*`` event of the step trace. ``step_index``/``step_id`` name the step it
    belongs to; ``step`` is set on ``agent.llm.completed``, ``agent.step.*`` and (the run's
    last step) ``agent.run.completed``."""

    event_type: str
    step_index: int = -1
    step_id: str = ""
    step: AgentStep | None = None
    llm_delta: str | None = None
    tool_call: LLMToolCall | None = None
    tool_result: ToolExecutionResult | None = None
    error: str | None = None
    annotations: dict[str, Any] = Field(default_factory=dict)

    @property
    def status(self) -> str | None:
        """``annotations.status``: on ``agent.run.completed`` how the run ended."""
        status = self.annotations.get("status")
        return status if isinstance(status, str) else None


class AgentResponse(SnakeModel):
    """What :meth:`Agent.handle` returns: every step, and the final answer (the text of the
    last step whose response has text, as the Rust library's ``AgentResponse::from_steps``)."""

    turns: list[AgentStep] = Field(
        default_factory=list, validation_alias=AliasChoices("turns", "steps")
    )
    final_output: str = ""
    session_id: str | None = None
    """The session the steps ran in (not part of the spec; ``None`` when read from elsewhere)."""
    status: str | None = None
    """How the last run ended (not part of the spec)."""

    @property
    def steps(self) -> list[AgentStep]:
        """The Rust library's name of :attr:`turns`."""
        return self.turns

    @staticmethod
    def final_output_of(steps: list[AgentStep]) -> str:
        """The text of the last step whose response has text."""
        for step in reversed(steps):
            text = step.llm_response.text
            if text:
                return text
        return ""


def parse_step_event(data: Any) -> AgentStepEvent:
    """The event of a frame's JSON value. A value that does not fit the model (not an object, a
    step without its response …) becomes an event with its ``event_type`` (empty when it has
    none) and the whole value in ``annotations["raw"]``: never an exception."""
    if isinstance(data, dict):
        try:
            return AgentStepEvent.model_validate(data)
        except ValidationError:
            pass
        kind = data.get("event_type")
        index = data.get("step_index")
        step_id = data.get("step_id")
        return AgentStepEvent(
            event_type=kind if isinstance(kind, str) else "",
            step_index=index if isinstance(index, int) else -1,
            step_id=step_id if isinstance(step_id, str) else "",
            annotations={"raw": data},
        )
    return AgentStepEvent(event_type="", annotations={"raw": data})
