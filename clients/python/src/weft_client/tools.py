"""Client tools: Python callables the server's model calls, run by this client.

:func:`tool` turns a function into a :class:`Tool`: its type hints become a pydantic model
(``pydantic.create_model``) whose JSON Schema is the tool's ``parameters``, its docstring the
description (an ``Args:`` section, or ``:param x:`` lines, describe the parameters). A new
session gets the specs in ``context.tools``; since the server has no executor for them they are
remote: the run suspends with ``awaiting_tool_execution``, the client validates each call's
arguments through the same model, calls the function (sync or async), and posts the results. An
exception (invalid arguments included) becomes an error result the model sees.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import json
import re
import typing
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Generic, ParamSpec, TypeVar, overload

import pydantic_core
from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model
from pydantic.fields import FieldInfo
from pydantic.json_schema import GenerateJsonSchema

from .models import ToolCall, ToolResultInput, ToolSpec

P = ParamSpec("P")
R = TypeVar("R")


@dataclass(frozen=True)
class ToolContext:
    """What a tool may ask for besides its arguments: give it a parameter annotated
    ``ToolContext`` (left out of the schema) and it receives the session and the call."""

    session_id: str
    call: ToolCall


@dataclass(frozen=True)
class ToolOutput:
    """A tool's result with more than text: ``details`` for user interfaces (never sent to the
    model), ``is_error`` to report a failure without raising."""

    output: str
    details: Any = None
    is_error: bool = False


_SECTION = re.compile(r"^\s*(Args|Arguments|Parameters|Params|Keyword Args)\s*:\s*$", re.I)
_OTHER_SECTION = re.compile(
    r"^\s*(Returns?|Raises|Yields?|Examples?|Notes?|See Also|Warnings?)\s*:\s*$", re.I
)
_ARG = re.compile(r"^(\s*)\*{0,2}(\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")
_REST_PARAM = re.compile(r"^\s*:param\s+(?:[^:]*\s)?(\w+)\s*:\s*(.*)$")


def parse_docstring(doc: str | None) -> tuple[str, dict[str, str]]:
    """A docstring's description (the text before its sections) and its parameters'
    descriptions (Google-style ``Args:`` or reST ``:param name:``)."""
    if not doc:
        return "", {}
    lines = inspect.cleandoc(doc).splitlines()
    description: list[str] = []
    params: dict[str, str] = {}
    section = "description"
    current: str | None = None
    indent = 0
    for line in lines:
        rest = _REST_PARAM.match(line)
        if rest:
            section, current = "rest", rest.group(1)
            params[current] = rest.group(2).strip()
            continue
        if _SECTION.match(line):
            section, current = "args", None
            continue
        if _OTHER_SECTION.match(line) or line.lstrip().startswith(":"):
            section, current = "other", None
            continue
        if section == "description":
            description.append(line)
        elif section == "args":
            arg = _ARG.match(line)
            if arg and (current is None or len(arg.group(1)) <= indent):
                indent = len(arg.group(1))
                current = arg.group(2)
                params[current] = arg.group(3).strip()
            elif current is not None and line.strip():
                params[current] = f"{params[current]} {line.strip()}".strip()
        elif section == "rest" and current is not None and line.strip():
            params[current] = f"{params[current]} {line.strip()}".strip()
    return "\n".join(description).strip(), params


def _error_text(error: BaseException) -> str:
    if isinstance(error, ValidationError):
        problems = "; ".join(
            f"{'.'.join(str(part) for part in e['loc']) or 'arguments'}: {e['msg']}"
            for e in error.errors()
        )
        return f"invalid arguments: {problems}"
    return str(error) or type(error).__name__


def _output_text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, BaseModel):
        return value.model_dump_json()
    return json.dumps(pydantic_core.to_jsonable_python(value), ensure_ascii=False)


class _Schema(GenerateJsonSchema):
    """JSON Schema without the titles pydantic derives from parameter names (noise for the
    model; a title given with ``Field(title=…)`` is kept)."""

    def field_title_should_be_set(self, schema: Any) -> bool:
        return False


class Tool(Generic[P, R]):
    """A client tool made by :func:`tool`. Calling it calls the function; :meth:`spec` is what
    the server gets; :meth:`run` / :meth:`arun` answer a call."""

    def __init__(
        self,
        fn: Callable[P, R],
        *,
        name: str | None = None,
        description: str | None = None,
        label: str | None = None,
        requires_approval: bool = False,
    ) -> None:
        self.fn = fn
        self.name: str = name or fn.__name__
        doc_description, doc_params = parse_docstring(inspect.getdoc(fn))
        self.description: str = description if description is not None else doc_description
        self.label = label
        self.requires_approval = requires_approval
        self.is_async = inspect.iscoroutinefunction(fn)
        self._context_params: list[str] = []
        self._positional: list[str] = []
        self.arguments_model: type[BaseModel] = self._model(fn, doc_params)
        schema = self.arguments_model.model_json_schema(schema_generator=_Schema)
        schema.pop("title", None)
        self.parameters: dict[str, Any] = schema
        """The JSON Schema of the arguments."""
        functools.update_wrapper(self, fn)

    def _model(self, fn: Callable[..., Any], docs: dict[str, str]) -> type[BaseModel]:
        try:
            hints = typing.get_type_hints(fn, include_extras=True)
        except NameError as error:
            raise TypeError(
                f"tool {self.name!r}: cannot resolve a type hint ({error}); define the types "
                "it uses at module level"
            ) from error
        fields: dict[str, Any] = {}
        for pname, param in inspect.signature(fn).parameters.items():
            if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
                raise TypeError(f"tool {self.name!r}: *args and **kwargs cannot be described")
            annotation = hints.get(pname, Any)
            if annotation is ToolContext:
                self._context_params.append(pname)
                continue
            if param.kind is param.POSITIONAL_ONLY:
                self._positional.append(pname)
            default = param.default
            if isinstance(default, FieldInfo):
                info = default
                if info.description is None and pname in docs:
                    info.description = docs[pname]
            else:
                info = Field(
                    default=... if default is param.empty else default,
                    description=docs.get(pname),
                )
            fields[pname] = (annotation, info)
        model_name = "".join(part.capitalize() for part in self.name.split("_")) + "Arguments"
        model: type[BaseModel] = create_model(
            model_name, __config__=ConfigDict(extra="forbid"), **fields
        )
        return model

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        return self.fn(*args, **kwargs)

    def __repr__(self) -> str:
        return f"Tool(name={self.name!r}, requires_approval={self.requires_approval})"

    def spec(self) -> ToolSpec:
        """The tool as the server (and its model) sees it."""
        return ToolSpec(
            name=self.name,
            label=self.label,
            description=self.description,
            parameters=self.parameters,
            requires_approval=True if self.requires_approval else None,
        )

    def validate(self, arguments: Any) -> BaseModel:
        """The call's arguments, validated by the tool's model (``ValidationError`` if not)."""
        return self.arguments_model.model_validate({} if arguments is None else arguments)

    def _bind(self, call: ToolCall, session_id: str) -> tuple[list[Any], dict[str, Any]]:
        validated = self.validate(call.arguments)
        values = {name: getattr(validated, name) for name in type(validated).model_fields}
        args = [values.pop(name) for name in self._positional]
        context = ToolContext(session_id=session_id, call=call)
        for name in self._context_params:
            values[name] = context
        return args, values

    def _result(self, call: ToolCall, value: Any) -> ToolResultInput:
        if isinstance(value, ToolOutput):
            return ToolResultInput(
                tool_call_id=call.id,
                tool_name=call.name,
                content=value.output,
                details=value.details,
                is_error=value.is_error,
            )
        return ToolResultInput(
            tool_call_id=call.id, tool_name=call.name, content=_output_text(value)
        )

    def _failure(self, call: ToolCall, error: BaseException) -> ToolResultInput:
        return ToolResultInput(
            tool_call_id=call.id, tool_name=call.name, content=_error_text(error), is_error=True
        )

    def run(self, call: ToolCall, session_id: str = "") -> ToolResultInput:
        """Answers ``call`` here and now (an async tool runs in its own event loop, so this must
        not be called from inside one). Never raises: a failure is an error result."""
        try:
            args, kwargs = self._bind(call, session_id)
            value: Any = self.fn(*args, **kwargs)
            if inspect.isawaitable(value):
                value = asyncio.run(_awaited(value))
            return self._result(call, value)
        except Exception as error:
            return self._failure(call, error)

    async def arun(self, call: ToolCall, session_id: str = "") -> ToolResultInput:
        """Answers ``call``: an async tool is awaited, a sync one runs in a worker thread. Never
        raises: a failure is an error result."""
        try:
            args, kwargs = self._bind(call, session_id)
            if self.is_async:
                value: Any = await typing.cast(Awaitable[Any], self.fn(*args, **kwargs))
            else:
                value = await asyncio.to_thread(self.fn, *args, **kwargs)
                if inspect.isawaitable(value):
                    value = await value
            return self._result(call, value)
        except Exception as error:
            return self._failure(call, error)


async def _awaited(value: Awaitable[Any]) -> Any:
    return await value


@overload
def tool(fn: Callable[P, R], /) -> Tool[P, R]: ...


@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    label: str | None = None,
    requires_approval: bool = False,
) -> Callable[[Callable[P, R]], Tool[P, R]]: ...


def tool(
    fn: Callable[P, R] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    label: str | None = None,
    requires_approval: bool = False,
) -> Tool[P, R] | Callable[[Callable[P, R]], Tool[P, R]]:
    """Makes a function a client tool: ``@tool`` or ``@tool(name=…, requires_approval=True)``.

    The name defaults to the function's, the description to its docstring; each parameter's
    type hint (``Annotated[…, Field(…)]`` and pydantic types included) and default become the
    JSON Schema the model sees and the validation each call's arguments go through.
    ``requires_approval`` makes every call wait for the approval callback first.
    """

    def wrap(f: Callable[P, R]) -> Tool[P, R]:
        return Tool(
            f,
            name=name,
            description=description,
            label=label,
            requires_approval=requires_approval,
        )

    if fn is not None:
        return wrap(fn)
    return wrap
