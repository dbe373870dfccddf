"""Tools and small helpers the tests share."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import date
from typing import Annotated, Any, Literal

from pydantic import AfterValidator

from weft_client import (
    NativeEvent,
    TextDelta,
    ThinkingDelta,
    Tool,
    ToolContext,
    ToolOutput,
    tool,
)


def capitalised(city: str) -> str:
    """A check JSON Schema cannot express: only the client's validation catches it."""
    if not city[:1].isupper():
        raise ValueError("a city's name starts with a capital letter")
    return city


City = Annotated[str, AfterValidator(capitalised)]

WeatherCall = tuple[str, date, str]


def weather_tool(ran: list[WeatherCall]) -> Tool[..., ToolOutput]:
    """``get_weather``, logging each call it gets (after validation) into ``ran``."""

    @tool
    def get_weather(city: City, day: date, unit: Literal["C", "F"] = "C") -> ToolOutput:
        """The weather in a city on a day.

        Args:
            city: The city's name, capitalised.
            day: The day, as an ISO 8601 date.
            unit: Celsius or Fahrenheit.
        """
        ran.append((city, day, unit))
        return ToolOutput(f"Sunny in {city} on {day:%d %B}, 21°{unit}", details={"celsius": 21})

    return get_weather


def theme_tool(ran: list[dict[str, Any]]) -> Tool[..., Any]:
    """``set_theme``, which needs approval; async, and told its context."""

    @tool(requires_approval=True)
    async def set_theme(theme: Literal["light", "dark"], context: ToolContext) -> str:
        """Switches the page's theme."""
        ran.append({"theme": theme, "call": context.call.id, "session": context.session_id})
        return f"The theme is {theme}."

    return set_theme


def text_of(events: Iterable[NativeEvent]) -> str:
    return "".join(e.delta for e in events if isinstance(e, TextDelta))


def thinking_of(events: Iterable[NativeEvent]) -> str:
    return "".join(e.delta for e in events if isinstance(e, ThinkingDelta))


def types_of(events: Iterable[NativeEvent]) -> list[str]:
    return [e.type for e in events]
