"""The step-trace API (``specs/agent-response.zh.md``): an agent is a client, a session, the
client's tools and an approval callback. :meth:`Agent.stream` yields the ``agent.*`` step
events of the server's AceAI format (``?protocol=aceai``) while the agent runs its tools and
asks for approvals between runs; :meth:`Agent.handle` runs to the end and returns the
:class:`~weft_client.steps.AgentResponse` (every step, and the final answer).

The first ``stream``/``handle`` creates the session (the tools' specs in its context); later
ones continue it, so the model sees the whole conversation.

Each server run ends with ``agent.run.completed`` (``annotations.status``): when it is
``awaiting_tool_execution`` or ``awaiting_approval`` and the agent can answer (it has the tools,
or an approval callback), more runs follow in the same stream; the stream's last event is the
``agent.run.completed`` of the run that ended it. The agent's own tool executions appear as
``agent.tool.started`` and ``agent.tool.completed``/``agent.tool.failed`` with
``annotations["executor"] == "client"``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Iterator, Mapping, Sequence
from typing import Any

from . import _run
from . import steps as st
from .async_client import AsyncApprovalCallback, AsyncClient
from .client import ApprovalCallback, Client
from .models import ExecuteOptions, ExecuteResult, Message, ToolSpec
from .tools import Tool


class _Collector:
    """The response a stream of step events adds up to."""

    def __init__(self) -> None:
        self.steps: dict[str, st.AgentStep] = {}
        self.status: str | None = None

    def see(self, event: st.AgentStepEvent) -> None:
        if event.event_type in (st.STEP_COMPLETED, st.STEP_FAILED) and event.step is not None:
            self.steps[event.step.step_id] = event.step
        elif event.event_type == st.RUN_COMPLETED:
            self.status = event.status

    def response(self, session_id: str | None) -> st.AgentResponse:
        turns = list(self.steps.values())
        return st.AgentResponse(
            turns=turns,
            final_output=st.AgentResponse.final_output_of(turns),
            session_id=session_id,
            status=self.status,
        )


class _AgentBase:
    def __init__(
        self,
        *,
        session_id: str | None,
        tools: Iterable[Tool[Any, Any] | ToolSpec],
        system_prompt: str | None,
        messages: Sequence[Message | Mapping[str, Any]] | None,
        options: ExecuteOptions | Mapping[str, Any] | None,
    ) -> None:
        self.session_id: str | None = session_id
        """The agent's session, once it has one."""
        self.tools: list[Tool[Any, Any] | ToolSpec] = list(tools)
        self.system_prompt = system_prompt
        self.messages = list(messages or [])
        self.options = options
        self.last_result: ExecuteResult | None = None
        """What the last stream ended with (status, pending calls, usage, cost)."""

    def _context(self) -> dict[str, Any] | None:
        if self.session_id is not None:
            return None
        context: dict[str, Any] = {"messages": _run.wire(self.messages)}
        if self.system_prompt is not None:
            context["systemPrompt"] = self.system_prompt
        return context

    def _options(self) -> ExecuteOptions | Mapping[str, Any] | None:
        # A continued session keeps the options it was created with.
        return self.options if self.session_id is None else None


class Agent(_AgentBase):
    """An agent on a Weft server, over an :class:`AsyncClient`.

    ``tools`` are the client's (:func:`~weft_client.tool`), run here when the model calls them
    (a :class:`ToolSpec` alone is declared but not run: the stream ends waiting for it);
    ``on_approval`` decides calls that need approval; ``session_id`` continues an existing
    session; ``system_prompt``, ``messages`` and ``options`` shape a new one.
    """

    def __init__(
        self,
        client: AsyncClient,
        *,
        session_id: str | None = None,
        tools: Iterable[Tool[Any, Any] | ToolSpec] = (),
        on_approval: AsyncApprovalCallback | None = None,
        system_prompt: str | None = None,
        messages: Sequence[Message | Mapping[str, Any]] | None = None,
        options: ExecuteOptions | Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(
            session_id=session_id,
            tools=tools,
            system_prompt=system_prompt,
            messages=messages,
            options=options,
        )
        self.client = client
        self.on_approval = on_approval

    async def stream(self, input: _run.InputLike) -> AsyncIterator[st.AgentStepEvent]:
        """The step events of ``input``'s runs, to the end (tools run and approvals asked in
        between)."""
        stream = self.client._execute(
            _run.AceaiFormat(),
            input,
            session_id=self.session_id,
            context=self._context(),
            tools=self.tools,
            on_approval=self.on_approval,
            options=self._options(),
            on_cursor=None,
        )
        async with stream:
            async for event in stream:
                if self.session_id is None and stream.session_id is not None:
                    self.session_id = stream.session_id
                yield event
            self.last_result = await stream.result()
            self.session_id = stream.session_id or self.session_id

    async def handle(self, input: _run.InputLike) -> st.AgentResponse:
        """Runs ``input`` to the end and returns every step with the final answer."""
        collector = _Collector()
        async for event in self.stream(input):
            collector.see(event)
        return collector.response(self.session_id)


class SyncAgent(_AgentBase):
    """:class:`Agent` over a blocking :class:`Client`: ``stream`` is an iterator, ``handle``
    returns the response."""

    def __init__(
        self,
        client: Client,
        *,
        session_id: str | None = None,
        tools: Iterable[Tool[Any, Any] | ToolSpec] = (),
        on_approval: ApprovalCallback | None = None,
        system_prompt: str | None = None,
        messages: Sequence[Message | Mapping[str, Any]] | None = None,
        options: ExecuteOptions | Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(
            session_id=session_id,
            tools=tools,
            system_prompt=system_prompt,
            messages=messages,
            options=options,
        )
        self.client = client
        self.on_approval = on_approval

    def stream(self, input: _run.InputLike) -> Iterator[st.AgentStepEvent]:
        """The step events of ``input``'s runs, to the end (tools run and approvals asked in
        between)."""
        stream = self.client._execute(
            _run.AceaiFormat(),
            input,
            session_id=self.session_id,
            context=self._context(),
            tools=self.tools,
            on_approval=self.on_approval,
            options=self._options(),
            on_cursor=None,
        )
        with stream:
            for event in stream:
                if self.session_id is None and stream.session_id is not None:
                    self.session_id = stream.session_id
                yield event
            self.last_result = stream.result()
            self.session_id = stream.session_id or self.session_id

    def handle(self, input: _run.InputLike) -> st.AgentResponse:
        """Runs ``input`` to the end and returns every step with the final answer."""
        collector = _Collector()
        for event in self.stream(input):
            collector.see(event)
        return collector.response(self.session_id)
