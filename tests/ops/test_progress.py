"""Progress output of the one-shot commands: redrawn in place on a terminal, plain lines elsewhere."""

from __future__ import annotations

import io

from supervisor.ops.progress import Progress
from supervisor.ops.status import ServerStatus


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_terminal_gets_one_line_per_server_redrawn_in_place() -> None:
    terminal = _Terminal()
    progress = Progress(terminal, ["files", "search"])
    progress(ServerStatus("files", state="connecting"))
    progress(ServerStatus("files", state="ready", tool_count=3))
    progress(ServerStatus("search", state="failed", attempt=2, max_attempts=2, last_error="no route"))
    frames = terminal.getvalue().split("\x1b[2F")
    assert len(frames) == 3, "every update after the first moves back up over the two lines"
    last = frames[-1].replace("\x1b[2K", "").splitlines()
    assert last == ["files   ready, 3 tools", "search  failed after 2/2 attempts; last error: no route"]


def test_a_pipe_gets_a_plain_line_per_change_and_no_repeats() -> None:
    pipe = io.StringIO()
    progress = Progress(pipe, ["files"])
    progress(ServerStatus("files", state="connecting"))
    progress(ServerStatus("files", state="connecting"))
    progress(ServerStatus("files", state="ready", tool_count=1))
    assert pipe.getvalue().splitlines() == ["files: connecting", "files: ready, 1 tools"]
    assert "\x1b" not in pipe.getvalue()
