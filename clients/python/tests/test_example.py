"""The example runs as its docstring says, against a server playing its script."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from conftest import Weft

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def test_the_weather_agent_example_books_its_table(weft: Callable[..., Weft]) -> None:
    server = weft(str(EXAMPLES / "weather.json"))
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / "weather_agent.py"), "--server", server.base_url, "--yes"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "Let me check tomorrow's weather in Paris." in out
    assert "[agent.tool.completed] get_weather: Paris on Saturday 01 June: sunny, 24°C" in out
    booking = "book_table({'guests': 2, 'restaurant': 'Le Jardin', 'terrace': True})"
    assert f"[approval] {booking} -> approved" in out
    assert "[agent.tool.completed] book_table: Table for 2 at Le Jardin, on the terrace" in out
    assert "Booked: a terrace table for two at Le Jardin tomorrow. Enjoy the sun!" in out
    assert out.rstrip().endswith(": completed")
