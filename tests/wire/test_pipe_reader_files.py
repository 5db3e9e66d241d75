"""``PipeReader`` over descriptors epoll refuses: a regular file and ``/dev/null`` as stdin (issue 57, item 6).

``mcp-supervisor run < requests.jsonl`` and a launcher's ``< /dev/null`` hand the
wire a descriptor epoll cannot watch (``EPERM``); parking on it raised out of the
reader. It is read directly instead, to its end.
"""

from __future__ import annotations

import os
from pathlib import Path

import trio

from supervisor.wire.pipes import PipeReader, pollable


def test_pipes_are_pollable_and_files_and_dev_null_are_not(tmp_path: Path) -> None:
    read_end, write_end = os.pipe()
    path = tmp_path / "requests.jsonl"
    path.write_bytes(b"{}\n")
    try:
        assert pollable(read_end)
        with path.open("rb") as file, Path(os.devnull).open("rb") as null:
            assert not pollable(file.fileno())
            assert not pollable(null.fileno())
    finally:
        os.close(read_end)
        os.close(write_end)


async def test_a_regular_file_is_read_to_its_end_in_chunks(tmp_path: Path) -> None:
    data = b"".join(b'{"jsonrpc":"2.0","id":%d,"method":"ping"}\n' % n for n in range(2000))
    path = tmp_path / "requests.jsonl"
    path.write_bytes(data)
    with trio.fail_after(5):
        stream = trio.lowlevel.FdStream(os.open(path, os.O_RDONLY))
        reader = PipeReader(stream, 4096)
        got = bytearray()
        while chunk := await reader.receive():
            assert len(chunk) <= 4096
            got += bytes(chunk)
        await stream.aclose()
    assert bytes(got) == data


async def test_dev_null_is_an_empty_stream() -> None:
    with trio.fail_after(5):
        stream = trio.lowlevel.FdStream(os.open(os.devnull, os.O_RDONLY))
        reader = PipeReader(stream, 4096)
        assert len(await reader.receive()) == 0
        assert len(await reader.receive(linger_sec=0.01)) == 0
        await stream.aclose()
