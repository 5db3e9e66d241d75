"""Per-server progress for the one-shot commands (``tools``, ``call``) on stderr.

On a terminal it keeps one line per server and redraws them in place
(connecting → ready, N tools / failed: reason); anywhere else it prints a plain
line per change, so logs and pipes stay readable. Called synchronously from
ServerActor status updates; it never blocks beyond a write to stderr.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final, TextIO

from supervisor.ops.status import ServerStatus

_SHOWN_STATES: Final = frozenset({"connecting", "ready", "failed", "reconnecting", "needs_login"})
_CLEAR_LINE: Final = "\x1b[2K"


class Progress:
    """Render server status changes to ``stream``."""

    def __init__(self, stream: TextIO, names: Iterable[str]) -> None:
        self._stream = stream
        self._tty = stream.isatty()
        self._lines: dict[str, str] = {name: "waiting" for name in names}
        self._drawn = 0

    def __call__(self, status: ServerStatus) -> None:
        if status.state not in _SHOWN_STATES:
            return
        line = status.describe()
        if self._lines.get(status.name) == line:
            return
        self._lines[status.name] = line
        if self._tty:
            self._redraw()
        else:
            print(f"{status.name}: {line}", file=self._stream, flush=True)

    def _redraw(self) -> None:
        # Move to the start of the block drawn last time, then rewrite every line in place.
        up = f"\x1b[{self._drawn}F" if self._drawn else ""
        width = max(len(name) for name in self._lines)
        body = "".join(f"{_CLEAR_LINE}{name:<{width}}  {line}\n" for name, line in self._lines.items())
        self._stream.write(up + body)
        self._stream.flush()
        self._drawn = len(self._lines)
