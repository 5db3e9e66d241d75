"""The fleet store's Lua scripts and key layout (DESIGN I14).

Every key of one upstream target carries the same hash tag ``{<target id>}``,
so each script touches one cluster slot and Redis Cluster works. Per target:

* ``P:{T}:epoch``: the epoch token, ``<run_id>:<random>``. It is replaced
  when missing (a flush) or when it names another server run (a restart), so
  entries written before either are never trusted.
* ``P:{T}:gen:<method>``: the eviction generation, only ever ``INCR``'d.
* ``P:{T}:idx:<method>``: the set of entry keys written under that method.
* ``P:{T}:e:<method>:<arm digest>``: an entry, ``<epoch>|<generation>|<json>``
  with ``PX`` = the entry's remaining lifetime (no absolute time is stored).
* ``P:{T}:lock:<method>``: the re-list lock, ``<generation>|<owner>`` with ``PX``; a
  newer generation takes it over, the same or an older one is refused.

Events go to one channel, ``P:events``, as ``kind|target id|method|origin|generation``.
Scripts run atomically inside Redis, so the generation compare of a write
cannot be raced by an eviction, even when the client that sent it was
cancelled and the write lands late.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Final

# KEYS: epoch, gen. ARGV: candidate epoch, run_id prefix ("<run_id>:").
# Returns {epoch, generation}.
PREPARE: Final = """
local epoch = redis.call('GET', KEYS[1])
if (not epoch) or string.sub(epoch, 1, #ARGV[2]) ~= ARGV[2] then
  redis.call('SET', KEYS[1], ARGV[1])
  epoch = ARGV[1]
end
return {epoch, tonumber(redis.call('GET', KEYS[2]) or '0')}
"""

# KEYS: epoch, gen, entry. ARGV: candidate epoch, run_id prefix.
# Returns {epoch, generation, value or false, pttl}.
READ: Final = (
    PREPARE.rsplit("return", 1)[0]
    + """
local value = redis.call('GET', KEYS[3])
local pttl = redis.call('PTTL', KEYS[3])
return {epoch, tonumber(redis.call('GET', KEYS[2]) or '0'), value, pttl}
"""
)

# KEYS: epoch, gen, entry, index. ARGV: epoch, generation (both captured before
# the fetch), payload, px ms, index px ms, channel, event.
# Returns 1 when written, 0 when refused (an eviction or a flush/restart intervened).
WRITE: Final = """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
if tonumber(redis.call('GET', KEYS[2]) or '0') ~= tonumber(ARGV[2]) then return 0 end
redis.call('SET', KEYS[3], ARGV[1] .. '|' .. ARGV[2] .. '|' .. ARGV[3], 'PX', ARGV[4])
redis.call('SADD', KEYS[4], KEYS[3])
redis.call('PEXPIRE', KEYS[4], ARGV[5])
redis.call('PUBLISH', ARGV[6], ARGV[7] .. ARGV[2])
return 1
"""

# KEYS: gen, index, lock. ARGV: lock owner, lock px ms, channel, event prefix.
# INCR first, then UNLINK every indexed entry and the index, take the re-list lock of
# the new generation for the evicting sidecar, and PUBLISH. Returns the new generation.
EVICT: Final = """
local generation = redis.call('INCR', KEYS[1])
local members = redis.call('SMEMBERS', KEYS[2])
for i = 1, #members, 500 do
  redis.call('UNLINK', unpack(members, i, math.min(i + 499, #members)))
end
redis.call('UNLINK', KEYS[2])
redis.call('SET', KEYS[3], generation .. '|' .. ARGV[1], 'PX', ARGV[2])
redis.call('PUBLISH', ARGV[3], ARGV[4] .. generation)
return generation
"""

# KEYS: lock. ARGV: generation, owner, px ms. Returns 1 if this owner now holds the
# re-list lock of that generation, 0 if it is held for the same or a newer one.
TRY_LOCK: Final = """
local held = redis.call('GET', KEYS[1])
if held then
  local generation = tonumber(string.match(held, '^(%d+)|'))
  if generation and generation >= tonumber(ARGV[1]) then return 0 end
end
redis.call('SET', KEYS[1], ARGV[1] .. '|' .. ARGV[2], 'PX', ARGV[3])
return 1
"""


def target_id(target: str) -> str:
    """A short, stable, secret-free id of a configured transport target (the hash tag)."""
    return hashlib.sha256(target.encode()).hexdigest()[:16]


@dataclass(frozen=True, slots=True)
class TargetKeys:
    """The key names of one target (all in one slot)."""

    prefix: str
    tid: str

    @property
    def base(self) -> str:
        return f"{self.prefix}:{{{self.tid}}}"

    @property
    def epoch(self) -> str:
        return f"{self.base}:epoch"

    def generation(self, method: str) -> str:
        return f"{self.base}:gen:{method}"

    def index(self, method: str) -> str:
        return f"{self.base}:idx:{method}"

    def entry(self, method: str, arm: str) -> str:
        return f"{self.base}:e:{method}:{hashlib.sha256(arm.encode()).hexdigest()[:24]}"

    def lock(self, method: str) -> str:
        return f"{self.base}:lock:{method}"


def channel(prefix: str) -> str:
    """The one pub/sub channel of a key prefix."""
    return f"{prefix}:events"


def event_prefix(kind: str, tid: str, method: str, origin: str) -> str:
    """An event up to its generation (the script appends the generation)."""
    return f"{kind}|{tid}|{method}|{origin}|"


@dataclass(frozen=True, slots=True)
class FleetEvent:
    """One parsed pub/sub event."""

    kind: str
    """``evict``, ``write`` or ``heartbeat``."""
    tid: str
    method: str
    origin: str
    generation: int


def parse_event(data: str) -> FleetEvent | None:
    """Parse ``kind|tid|method|origin|generation``; None for anything else."""
    parts = data.split("|")
    if len(parts) != 5 or not parts[4].isdigit():
        return None
    return FleetEvent(parts[0], parts[1], parts[2], parts[3], int(parts[4]))
