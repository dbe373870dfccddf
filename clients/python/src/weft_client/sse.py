"""An incremental Server-Sent Events parser (the WHATWG event-stream format): bytes in, frames
out, whatever the chunking (a frame, a line or a UTF-8 character may be cut anywhere)."""

from __future__ import annotations

import codecs
from dataclasses import dataclass


@dataclass(frozen=True)
class SseFrame:
    """One dispatched frame."""

    data: str
    """The ``data:`` lines joined by ``\\n``."""
    id: str | None = None
    """The ``id:`` field, when the frame had one."""
    event: str | None = None
    """The ``event:`` field, when the frame had one."""


class SseParser:
    """Feed it bytes; it returns the frames they complete."""

    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._buffer = ""
        self._saw_cr = False
        self._data: list[str] = []
        self._id: str | None = None
        self._event: str | None = None

    def feed(self, chunk: bytes) -> list[SseFrame]:
        """Parses ``chunk`` (a piece of the stream) and returns the frames it completes."""
        return self._push(self._decoder.decode(chunk))

    def _push(self, text: str) -> list[SseFrame]:
        frames: list[SseFrame] = []
        if self._saw_cr and text.startswith("\n"):
            text = text[1:]
        self._saw_cr = False
        buffer = self._buffer + text
        start = 0
        i = 0
        n = len(buffer)
        while i < n:
            c = buffer[i]
            if c != "\n" and c != "\r":
                i += 1
                continue
            line = buffer[start:i]
            if c == "\r":
                if i + 1 == n:
                    self._saw_cr = True
                elif buffer[i + 1] == "\n":
                    i += 1
            i += 1
            start = i
            self._line(line, frames)
        self._buffer = buffer[start:]
        return frames

    def _line(self, line: str, frames: list[SseFrame]) -> None:
        if line == "":
            if self._data or self._id is not None:
                frames.append(SseFrame(data="\n".join(self._data), id=self._id, event=self._event))
            self._data = []
            self._id = None
            self._event = None
            return
        if line.startswith(":"):
            return
        field, colon, value = line.partition(":")
        if colon and value.startswith(" "):
            value = value[1:]
        if field == "data":
            self._data.append(value)
        elif field == "id" and "\0" not in value:
            self._id = value
        elif field == "event":
            self._event = value
