"""A real ``weft serve`` per faux script, started once per test session on 127.0.0.1.

The faux provider plays its script from the first turn in every session (it has no way to pick
a turn by input), so each scenario has a script of its own in ``tests/scripts`` and a server of
its own, started the first time a test asks for it and stopped at the end of the session.
``WEFT_BIN`` names the binary (default: the repository's ``target/debug/weft``).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

HERE = Path(__file__).resolve().parent
SCRIPTS = HERE / "scripts"
REPO = HERE.parents[2]
DEFAULT_BIN = REPO / "target" / "debug" / "weft"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def weft_bin_path() -> Path:
    return Path(os.environ.get("WEFT_BIN") or DEFAULT_BIN)


@pytest.fixture(scope="session")
def weft_bin() -> Path:
    path = weft_bin_path()
    if not path.is_file() or not os.access(path, os.X_OK):
        pytest.fail(
            f"no weft binary at {path}: build it (cargo build -p weft-cli) or set WEFT_BIN",
            pytrace=False,
        )
    return path


def clean_env(home: Path) -> dict[str, str]:
    """The process environment without any WEFT_* setting, with its own WEFT_HOME."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("WEFT_") and k != "RUST_LOG"}
    env.update(WEFT_HOME=str(home), NO_COLOR="1")
    return env


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@dataclass
class Weft:
    """A running server."""

    base_url: str
    port: int
    script: Path
    process: subprocess.Popen[bytes]
    home: Path
    log: Path

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        shutil.rmtree(self.home, ignore_errors=True)


def start_weft(weft_bin: Path, script: str, api_keys: str | None = None) -> Weft:
    """``weft serve`` playing ``tests/scripts/SCRIPT`` (or an absolute path) on a free loopback
    port, its sessions in a temporary WEFT_HOME; returns once ``/healthz`` answers."""
    script_path = Path(script) if Path(script).is_absolute() else SCRIPTS / script
    for _attempt in range(5):
        home = Path(tempfile.mkdtemp(prefix="weft-py-"))
        env = clean_env(home)
        if api_keys:
            env["WEFT_API_KEYS"] = api_keys
        port = free_port()
        log = home / "serve.log"
        with open(log, "wb") as out:
            process = subprocess.Popen(
                [
                    str(weft_bin),
                    "serve",
                    "--provider",
                    "faux",
                    "--script",
                    str(script_path),
                    "--addr",
                    f"127.0.0.1:{port}",
                ],
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        weft = Weft(f"http://127.0.0.1:{port}", port, script_path, process, home, log)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and process.poll() is None:
            try:
                if httpx.get(f"{weft.base_url}/healthz", timeout=1).status_code == 200:
                    return weft
            except httpx.TransportError:
                pass
            time.sleep(0.02)  # polling /healthz: the server offers nothing to wait on
        said = log.read_text(errors="replace")
        weft.stop()
        if "cannot listen" not in said:  # a port taken meanwhile is retried; anything else fails
            raise RuntimeError(f"weft serve did not become healthy:\n{said}")
    raise RuntimeError("weft serve found no free port in 5 tries")


@pytest.fixture(scope="session")
def weft(weft_bin: Path) -> Iterator[Callable[..., Weft]]:
    """``weft("script.json")``: the server playing that script (one per script and key set)."""
    servers: dict[tuple[str, str | None], Weft] = {}

    def get(script: str, api_keys: str | None = None) -> Weft:
        key = (script, api_keys)
        if key not in servers:
            servers[key] = start_weft(weft_bin, script, api_keys)
        return servers[key]

    yield get
    for server in servers.values():
        server.stop()
