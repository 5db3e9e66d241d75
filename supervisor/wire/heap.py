"""glibc's heap kept warm for the large-message path, within a bound (issue 11).

A spliced 1 MB ``tools/call`` allocates a few 1 MB buffers per direction (the
line cut from the read, the string ``pydantic_core.from_json`` builds while it
proves the line, a join when a writer is busy) and frees them at once. glibc's
defaults serve them badly: its mmap threshold adapts to the last freed mapping,
and its trim threshold (twice that, ~2 MB) gives the top of the heap back to the
kernel whenever more than that is free, so most of these buffers land on pages
that are fresh again: 160-460 minor faults per call (each page faulted in and
zeroed by the kernel, then charged to the memory cgroup). Fewer copies alone
(``LineBuffer``, ``write_pieces``) left the sidecar at ~2.1 ms of CPU per 1 MB
call (faults rose from 160 to 460 a call: the buffers left were fresher); with
these thresholds, 0 faults and 1.3-1.5 ms.

``keep_large_buffers_warm`` fixes both thresholds (which also turns the
adaptation off): a buffer under ``MMAP_THRESHOLD_BYTES`` comes from the heap,
and up to ``TRIM_THRESHOLD_BYTES`` of free heap top is kept for the next call.
So the RSS this costs is bounded by the trim threshold, not by the burst's
peak (round 2 measured 256 MB thresholds: 0.6 ms less per call, RSS kept at
its peak). Larger buffers are mapped and unmapped as before. Measured: RSS
after 180 1 MB calls 94.7 -> 96.4 MB; p3's lite fleet 130.3 -> 131.0 MB; p6's
peak (a 100,000-tool server) 122.0 -> 123.5 MB, where a 4 MiB mmap threshold
gave 125.5 (more medium buffers from the heap).

``large_buffers_warm`` says whether this process got those thresholds: only
then does ``wire.pipes.PipeReader`` read a large message into a ``bytes`` of its own
per read (``SplitRead``); elsewhere (a process on glibc's defaults, such as the
test fixture server) each such buffer would land on fresh pages (306 minor
faults per 1 MB call measured in the fixture, against 5), so it keeps reading
into its one reused buffer.

Called once by ``serve`` before anything starts; nothing here awaits.
"""

from __future__ import annotations

import ctypes
import logging
from typing import Final

logger = logging.getLogger(__name__)

MMAP_THRESHOLD_BYTES: Final = 2 * 1024 * 1024
"""Buffers below this come from the heap (glibc ``M_MMAP_THRESHOLD``; default: adaptive, 128 KiB to 32 MiB)."""
TRIM_THRESHOLD_BYTES: Final = 8 * 1024 * 1024
"""Free heap top kept before it is returned to the kernel (glibc ``M_TRIM_THRESHOLD``; default: adaptive)."""
_M_TRIM_THRESHOLD: Final = -1
_M_MMAP_THRESHOLD: Final = -3
"""``mallopt`` parameters, from glibc's ``malloc.h``."""


_warm = False
"""Set once the thresholds are fixed in this process (``keep_large_buffers_warm``)."""


def large_buffers_warm() -> bool:
    """Whether ``keep_large_buffers_warm`` fixed this process's thresholds (1 MB buffers are reused warm)."""
    return _warm


def keep_large_buffers_warm() -> bool:
    """Set glibc's mmap and trim thresholds (module docstring); False where ``mallopt`` is missing or refuses."""
    try:
        mallopt = ctypes.CDLL(None).mallopt  # the C library this process runs on
    except (OSError, AttributeError):  # no glibc (e.g. macOS): its allocator's defaults stand
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    done: bool = mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES) == 1
    done = mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES) == 1 and done
    if not done:
        logger.debug("mallopt refused the heap thresholds; the allocator's defaults stand")
    global _warm  # noqa: PLW0603 - one fact about this process, set once at start-up
    _warm = _warm or done
    return done
