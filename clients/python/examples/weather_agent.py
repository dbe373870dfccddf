"""An agent on a Weft server with two Python tools, one of which needs approval.

The model (on the server) calls ``get_weather`` and ``book_table``; both run here, in this
process: the run suspends, this client validates the arguments through the functions' type
hints, calls them, and resumes the run. ``book_table`` asks first.

Offline, with the faux provider playing this folder's script (from the repository's root)::

    cargo run -p weft-cli -- serve --script clients/python/examples/weather.json
    python clients/python/examples/weather_agent.py --yes

Against a real model, start ``weft serve --provider anthropic --model …`` instead.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Awaitable, Callable
from datetime import date
from typing import Annotated

from pydantic import Field

from weft_client import (
    Agent,
    AsyncClient,
    ToolCall,
    ToolOutput,
    WeftError,
    steps,
    tool,
)


@tool
def get_weather(city: str, day: date) -> ToolOutput:
    """The weather forecast for a city on a day.

    Args:
        city: The city's name.
        day: The day, as an ISO 8601 date.
    """
    return ToolOutput(f"{city} on {day:%A %d %B}: sunny, 24°C", details={"celsius": 24})


@tool(requires_approval=True)
async def book_table(
    restaurant: str,
    guests: Annotated[int, Field(ge=1, le=12)],
    terrace: bool = False,
) -> str:
    """Books a table for tomorrow evening.

    Args:
        restaurant: The restaurant's name.
        guests: How many people.
        terrace: Whether to sit outside.
    """
    await asyncio.sleep(0)  # a real booking would call a service here
    where = "on the terrace" if terrace else "inside"
    return f"Table for {guests} at {restaurant}, {where}, confirmation W-1234."


def approver(always: bool) -> Callable[[list[ToolCall]], Awaitable[bool]]:
    """Asks on the terminal (or approves everything with ``--yes``)."""

    async def approve(calls: list[ToolCall]) -> bool:
        for call in calls:
            print(f"\n[approval] {call.name}({call.arguments})", end=" ")
            if always:
                print("-> approved (--yes)")
                continue
            answer = await asyncio.to_thread(input, "approve? [y/N] ")
            if answer.strip().lower() not in ("y", "yes"):
                return False
        return True

    return approve


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--server", default="http://127.0.0.1:8080")
    parser.add_argument("--api-key", default=os.environ.get("WEFT_API_KEY"))
    parser.add_argument("--yes", action="store_true", help="approve every call")
    parser.add_argument("prompt", nargs="?", default="Book me a table outside in Paris tomorrow.")
    args = parser.parse_args()

    async with AsyncClient(args.server, api_key=args.api_key) as client:
        agent = Agent(client, tools=[get_weather, book_table], on_approval=approver(args.yes))
        try:
            async for event in agent.stream(args.prompt):
                if event.event_type == steps.LLM_OUTPUT_TEXT_DELTA:
                    print(event.llm_delta, end="", flush=True)
                elif event.event_type == steps.LLM_STARTED and event.step_index > 0:
                    print()
                elif event.event_type in (steps.TOOL_COMPLETED, steps.TOOL_FAILED):
                    result = event.tool_result
                    assert result is not None
                    print(f"\n[{event.event_type}] {result.call.name}: {result.output}")
        except WeftError as error:
            print(f"\nweft: {error}", file=sys.stderr)
            return 1
        print()
        print(
            f"session {agent.session_id}: {agent.last_result.status if agent.last_result else '?'}"
        )
    return 0 if agent.last_result and agent.last_result.status == "completed" else 1


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
