"""Task log lines as the server streams them.

The node keeps each line of a task's log with the time it was written: 19
decimal digits of Unix nanoseconds and a space, then the line
(src/api/log_lines.h). LogLine holds the two apart.
"""
from __future__ import annotations

import dataclasses
from typing import Iterator, Optional

STAMP_DIGITS = 19


@dataclasses.dataclass(frozen=True)
class LogLine:
    """One line of a task's output.

    Attributes:
        task: the task, JOB-ROLE-INDEX.
        attempt: which attempt of the task wrote it (0 = the first).
        stderr: True for standard error, False for standard output.
        text: the line as written, without its newline.
        unix_nanos: when the node read it (0 for a line without a stamp).
    """

    task: str
    attempt: int
    stderr: bool
    text: str
    unix_nanos: int = 0


def split_stamp(line: str) -> tuple[int, str]:
    """(unix_nanos, text) of a stored log line; (0, line) when it has no stamp."""
    head = line[:STAMP_DIGITS]
    if len(line) > STAMP_DIGITS and head.isdigit() and head.isascii() and line[STAMP_DIGITS] == " ":
        nanos = int(head)
        if nanos < 2**63:
            return nanos, line[STAMP_DIGITS + 1:]
    return 0, line


class LineAssembler:
    """Joins the byte chunks of one output of one attempt into whole lines."""

    def __init__(self) -> None:
        self._held = b""

    def add(self, data: bytes) -> Iterator[str]:
        """The lines `data` completes (a partial last line waits for more)."""
        parts = (self._held + data).split(b"\n")
        self._held = parts.pop()
        for raw in parts:
            yield raw.decode("utf-8", errors="replace")

    def finish(self) -> Optional[str]:
        """The last line when it had no newline; None when nothing waits."""
        held, self._held = self._held, b""
        return held.decode("utf-8", errors="replace") if held else None
