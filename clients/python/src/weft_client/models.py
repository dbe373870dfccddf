"""The API's data: messages, tool calls, sessions, usage and requests.

They mirror the Rust types' JSON (``crates/weft-core``: ``message.rs``, ``usage.rs``;
``crates/weft-server``: ``api.rs``): camelCase on the wire, snake_case in Python. Every model
keeps unknown fields, and unknown message roles or content types parse as ``Unknown*``.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Union

from pydantic import BeforeValidator, Discriminator, Field, Tag, WrapValidator

from ._wire import WireModel, fallback_to, tag_of

# ---- usage and cost (weft-core usage.rs) ----


class Usage(WireModel):
    """Tokens: ``input`` counts every input token (cached included), ``output`` every output
    token (reasoning included)."""

    input: int = 0
    output: int = 0
    cache_read: int = 0
    cache_write: int = 0
    reasoning: int | None = None
    total: int = 0

    def __add__(self, other: Usage) -> Usage:
        reasoning = None
        if self.reasoning is not None or other.reasoning is not None:
            reasoning = (self.reasoning or 0) + (other.reasoning or 0)
        return Usage(
            input=self.input + other.input,
            output=self.output + other.output,
            cache_read=self.cache_read + other.cache_read,
            cache_write=self.cache_write + other.cache_write,
            reasoning=reasoning,
            total=self.total + other.total,
        )


class Cost(WireModel):
    """What calls cost, in dollars."""

    input: float = 0.0
    output: float = 0.0
    cache_read: float = 0.0
    cache_write: float = 0.0
    total: float = 0.0

    def __add__(self, other: Cost) -> Cost:
        return Cost(
            input=self.input + other.input,
            output=self.output + other.output,
            cache_read=self.cache_read + other.cache_read,
            cache_write=self.cache_write + other.cache_write,
            total=self.total + other.total,
        )


# ---- content blocks (weft-core message.rs) ----


class TextContent(WireModel):
    """Text."""

    type: Literal["text"] = "text"
    text: str


class ThinkingContent(WireModel):
    """A model's reasoning, with the provider's opaque signature when it sent one."""

    type: Literal["thinking"] = "thinking"
    thinking: str
    signature: str | None = None


class ImageContent(WireModel):
    """An image, base64-encoded."""

    type: Literal["image"] = "image"
    data: str
    mime_type: str


class ToolCallContent(WireModel):
    """A tool call inside an assistant message."""

    type: Literal["toolCall"] = "toolCall"
    id: str
    name: str
    arguments: Any = None


class UnknownContent(WireModel):
    """A content block of a type this client does not know (its fields are in ``model_extra``)."""

    type: str = ""


UserContent = Annotated[
    Union[
        Annotated[TextContent, Tag("text")],
        Annotated[ImageContent, Tag("image")],
        Annotated[UnknownContent, Tag("unknown")],
    ],
    Discriminator(tag_of("type", ("text", "image"))),
    WrapValidator(fallback_to(UnknownContent)),
]
"""A block of a user message or a tool result."""

AssistantContent = Annotated[
    Union[
        Annotated[TextContent, Tag("text")],
        Annotated[ThinkingContent, Tag("thinking")],
        Annotated[ToolCallContent, Tag("toolCall")],
        Annotated[UnknownContent, Tag("unknown")],
    ],
    Discriminator(tag_of("type", ("text", "thinking", "toolCall"))),
    WrapValidator(fallback_to(UnknownContent)),
]
"""A block of an assistant message."""


def _blocks(value: Any) -> Any:
    """A plain string is one text block (as the server accepts it)."""
    if isinstance(value, str):
        return [{"type": "text", "text": value}]
    return value


# ---- tool calls and messages ----


class ToolCall(WireModel):
    """A call the model asks for: the tool's name and its JSON arguments."""

    id: str
    name: str
    arguments: Any = None


StopReason = Literal["stop", "length", "toolUse", "error", "aborted"]
"""Why a model stopped (``AssistantMessage.stop_reason`` is typed ``str`` to accept new ones)."""


def _join_text(content: list[Any]) -> str:
    return "".join(block.text for block in content if isinstance(block, TextContent))


class UserMessage(WireModel):
    """A message from the user."""

    role: Literal["user"] = "user"
    content: Annotated[list[UserContent], BeforeValidator(_blocks)]
    timestamp: int = 0
    id: str | None = None

    @property
    def text(self) -> str:
        """The concatenated text of its text blocks."""
        return _join_text(self.content)


class AssistantMessage(WireModel):
    """A message from the model (the step trace's ``llm_response``)."""

    role: Literal["assistant"] = "assistant"
    content: list[AssistantContent] = Field(default_factory=list)
    stop_reason: str = "stop"
    error_message: str | None = None
    usage: Usage = Field(default_factory=Usage)
    cost: Cost | None = None
    provider: str = ""
    model: str = ""
    timestamp: int = 0

    @property
    def text(self) -> str:
        """The concatenated text of its text blocks."""
        return _join_text(self.content)

    @property
    def thinking(self) -> str:
        """The concatenated text of its thinking blocks."""
        return "".join(b.thinking for b in self.content if isinstance(b, ThinkingContent))

    @property
    def tool_calls(self) -> list[ToolCall]:
        """Its tool calls, in order."""
        return [
            ToolCall(id=b.id, name=b.name, arguments=b.arguments)
            for b in self.content
            if isinstance(b, ToolCallContent)
        ]


LLMResponse = AssistantMessage
"""The spec's name of a model's whole response: the canonical assistant message."""


class ToolResultMessage(WireModel):
    """A tool's result, as the model sees it."""

    role: Literal["toolResult"] = "toolResult"
    tool_call_id: str
    tool_name: str = ""
    content: Annotated[list[UserContent], BeforeValidator(_blocks)] = Field(default_factory=list)
    details: Any = None
    is_error: bool = False
    timestamp: int = 0

    @property
    def text(self) -> str:
        """The concatenated text of its text blocks."""
        return _join_text(self.content)


class UnknownMessage(WireModel):
    """A message of a role this client does not know (its fields are in ``model_extra``)."""

    role: str = ""


Message = Annotated[
    Union[
        Annotated[UserMessage, Tag("user")],
        Annotated[AssistantMessage, Tag("assistant")],
        Annotated[ToolResultMessage, Tag("toolResult")],
        Annotated[UnknownMessage, Tag("unknown")],
    ],
    Discriminator(tag_of("role", ("user", "assistant", "toolResult"))),
    WrapValidator(fallback_to(UnknownMessage)),
]
"""A message of the conversation, told apart by ``role``."""


# ---- sessions ----

SessionStatus = Literal[
    "idle",
    "running",
    "completed",
    "awaiting_tool_execution",
    "awaiting_approval",
    "error",
    "aborted",
    "max_turns",
]
"""Where a session stands (fields holding one are typed ``str`` to accept new ones)."""


class ToolSpec(WireModel):
    """A tool as the model sees it. A session's tool the server has no executor for is the
    client's (remote): the run suspends until the client posts its result."""

    name: str
    label: str | None = None
    description: str | None = None
    parameters: Any = None
    requires_approval: bool | None = None


class SessionView(WireModel):
    """``GET /api/agent/session/{id}``: the whole session."""

    id: str
    status: str
    provider: str = ""
    model: str = ""
    system_prompt: str | None = None
    tools: list[ToolSpec] = Field(default_factory=list)
    messages: list[Message] = Field(default_factory=list)
    pending_tool_calls: list[ToolCall] = Field(default_factory=list)
    pending_approvals: list[ToolCall] = Field(default_factory=list)
    usage: Usage = Field(default_factory=Usage)
    cost: Cost = Field(default_factory=Cost)
    run_id: str | None = None
    last_event_seq: int = 0
    step_count: int = 0
    created_at: int = 0
    updated_at: int = 0
    parent_id: str | None = None
    """The session it was forked from."""
    forked_at: int | None = None
    """How many of the parent's messages it kept."""
    branch_id: str | None = None


class SessionHead(WireModel):
    """One entry of ``GET /api/agent/sessions``."""

    id: str
    owner: str | None = None
    status: str
    provider: str = ""
    model: str = ""
    system_prompt: str | None = None
    tools: list[ToolSpec] = Field(default_factory=list)
    options: Any = None
    usage: Usage = Field(default_factory=Usage)
    cost: Cost = Field(default_factory=Cost)
    message_count: int = 0
    step_count: int = 0
    next_deadline: int | None = None
    version: int = 0
    created_at: int = 0
    updated_at: int = 0


# ---- requests (weft-server api.rs) ----


class ApprovalDecision(WireModel):
    """A decision on a call waiting for approval; a denial's ``reason`` is what the model sees."""

    tool_call_id: str
    approved: bool
    reason: str | None = None


class ToolResultInput(WireModel):
    """A remote tool's result, as a client posts it (``content`` is the output text)."""

    role: Literal["toolResult"] = "toolResult"
    tool_call_id: str
    tool_name: str = ""
    content: str
    details: Any = None
    is_error: bool = False


class UserInput(WireModel):
    """A user message that starts a run."""

    role: Literal["user"] = "user"
    content: str | list[dict[str, Any]]


class ExecuteOptions(WireModel):
    """Options of an execute request. ``provider``, ``model``, ``system_prompt``, ``max_turns``
    and ``mode`` apply to a new session (an existing one keeps its own)."""

    provider: str | None = None
    model: str | None = None
    system_prompt: str | None = None
    max_turns: int | None = None
    mode: str | None = None
    """``react`` (default), ``tot`` or ``got``."""
    mode_options: dict[str, Any] | None = None
    multitask: Literal["reject", "enqueue", "interrupt"] | None = None
    """While a run is under way: refuse (409, the default), wait for it, or abort it."""
    on_disconnect: Literal["continue", "cancel"] | None = None
    durability: Literal["sync", "async", "exit"] | None = None


class ExecuteContext(WireModel):
    """The context of a new session: the messages it starts with, its tools, its system prompt."""

    messages: list[Message] = Field(default_factory=list)
    tools: list[ToolSpec] = Field(default_factory=list)
    system_prompt: str | None = None


class ExecuteResult(WireModel):
    """What a stream (all its runs, resumed automatically) ended with."""

    session_id: str
    status: str
    """How the last run ended."""
    messages: list[Message] = Field(default_factory=list)
    """The messages the runs added, in order."""
    pending_tool_calls: list[ToolCall] = Field(default_factory=list)
    """Calls still waiting for results (no handler for them)."""
    pending_approvals: list[ToolCall] = Field(default_factory=list)
    """Calls still waiting for approval (no approval callback)."""
    usage: Usage = Field(default_factory=Usage)
    cost: Cost = Field(default_factory=Cost)
