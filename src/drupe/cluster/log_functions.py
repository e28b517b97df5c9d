"""The chunk log's Redis functions: the fenced appends and the numbering of strings.

Owns: ``LIBRARY`` (the Lua source of the Redis function library ``drupe_log_1``) and the names
of its two functions, and ``MANY_LIBRARY`` (``drupe_log_2``, one function), which
``drupe.cluster.chunk_log.RedisChunkLog`` calls with ``FCALL`` (``LIBRARIES``: both, loaded
together):

* ``dl1`` (``APPEND``): ``XADD`` one entry (field ``p``) to a turn's log, only while the
  conversation's lease holds the writer's fence (its ``|<token>``), with ``MAXLEN ~`` trimming
  when asked and an ``EXPIRE`` for a terminal entry; answers the entry id, or nil when fenced out;
* ``dl1n`` (``INTERN``): give strings (execution ids, part ids) their numbers in the turn's hash
  (``#<n>`` -> string): a known string keeps its number, a new one gets the wanted number when
  free, else the next free one; the hash lives at least ``NAMES_TTL`` seconds;
* ``dl2m`` (``APPEND_MANY``): many fenced appends, to any logs, in ONE call: the leases of all
  of them are read with one ``MGET``, then each write is ``dl1``'s (``XADD``, ``MAXLEN ~`` when
  asked), in order; answers one value per write: the entry id, ``0`` when fenced out, or
  ``"!<error>"`` when that ``XADD`` failed (the writes to other logs still ran; the later
  writes to the same log did not, and answer ``"!..."`` too, so a retry keeps each log's
  order). A node's writer sends every batch that is due in one call, so Redis runs ~1 command
  per batch, not 3 (``FCALL``, the lease's ``GET``, the ``XADD``).

Must never: change a function's arguments or answers without a new library name (nodes of two
versions share one Redis during a rolling upgrade).
"""

from __future__ import annotations

from typing import Final

__all__ = [
    "APPEND",
    "APPEND_MANY",
    "INTERN",
    "LIBRARIES",
    "LIBRARY",
    "LIBRARY_NAME",
    "MANY_LIBRARY",
    "MANY_LIBRARY_NAME",
    "NAMES_TTL",
]

NAMES_TTL: Final = 24 * 3600
"""Seconds the execution numbers live at least once registered (a finished turn's end shortens
the hash's TTL to the log's, with the anchors)."""

LIBRARY_NAME: Final = "drupe_log_1"
APPEND: Final = "dl1"
INTERN: Final = "dl1n"
LIBRARY: Final = f"""#!lua name={LIBRARY_NAME}
-- The chunk log's writes (src/drupe/cluster/log_functions.py).

local function holds(key, fence)
  local held = redis.call('GET', key)
  if not held then return false end
  if string.byte(fence, 1) == 124 then -- '|<token>': the token part of '<node>|<token>'
    return #held > #fence and string.sub(held, -#fence) == fence
  end
  return held == fence
end

-- A fenced append. KEYS: log [, lease] (the lease when ARGV[1] is not '').
-- ARGV: fence or '', payload [, maxlen or '' [, ttl]]. Returns the entry id, or false.
redis.register_function('{APPEND}', function(keys, args)
  if args[1] ~= '' and not holds(keys[2], args[1]) then return false end
  local id
  if args[3] and args[3] ~= '' then
    id = redis.call('XADD', keys[1], 'MAXLEN', '~', args[3], '*', 'p', args[2])
  else
    id = redis.call('XADD', keys[1], '*', 'p', args[2])
  end
  if args[4] then redis.call('EXPIRE', keys[1], args[4]) end
  return id
end)

-- The numbers of strings (execution ids, part ids) in a turn's hash, '#<n>' -> string: a
-- string keeps its number; a new one gets the wanted number if free, else the next free one.
-- KEYS: names. ARGV: string, wanted number [, string, wanted number ...]. Returns the numbers.
redis.register_function('{INTERN}', function(keys, args)
  local all = redis.call('HGETALL', keys[1])
  local number_of, taken = {{}}, {{}}
  for i = 1, #all, 2 do
    if string.byte(all[i], 1) == 35 then
      local n = tonumber(string.sub(all[i], 2))
      taken[n] = true
      number_of[all[i + 1]] = n
    end
  end
  local out = {{}}
  for i = 1, #args, 2 do
    local n = number_of[args[i]]
    if not n then
      n = tonumber(args[i + 1])
      while taken[n] do n = n + 1 end
      taken[n] = true
      number_of[args[i]] = n
      redis.call('HSET', keys[1], '#' .. n, args[i])
    end
    out[#out + 1] = n
  end
  if redis.call('TTL', keys[1]) < {NAMES_TTL} then redis.call('EXPIRE', keys[1], {NAMES_TTL}) end
  return out
end)
"""

MANY_LIBRARY_NAME: Final = "drupe_log_2"
APPEND_MANY: Final = "dl2m"
MANY_LIBRARY: Final = f"""#!lua name={MANY_LIBRARY_NAME}
-- Many fenced appends in one call (src/drupe/cluster/log_functions.py).

-- KEYS: log_1, lease_1, log_2, lease_2, ... (an unfenced write names its log twice).
-- ARGV: fence_1 or '', payload_1, maxlen_1 or '', fence_2, ... (3 per write).
-- Returns one value per write: the entry id, 0 when fenced out, '!<error>' when its XADD failed.
redis.register_function('{APPEND_MANY}', function(keys, args)
  local n = #keys / 2
  local leases, slot = {{}}, {{}}
  for i = 1, n do
    if args[3 * i - 2] ~= '' then
      leases[#leases + 1] = keys[2 * i]
      slot[i] = #leases
    end
  end
  local held = {{}}
  if #leases > 0 then held = redis.call('MGET', unpack(leases)) end
  local out, failed = {{}}, {{}}
  for i = 1, n do
    local log, fence, ok = keys[2 * i - 1], args[3 * i - 2], true
    if failed[log] then
      ok = nil -- an earlier write to this log failed: none after it, so a retry keeps the order
    elseif fence ~= '' then
      local value = held[slot[i]]
      if not value then
        ok = false
      elseif string.byte(fence, 1) == 124 then -- '|<token>': the token part of '<node>|<token>'
        ok = #value > #fence and string.sub(value, -#fence) == fence
      else
        ok = value == fence
      end
    end
    if ok == nil then
      out[i] = '!an earlier write to this log in the same call failed'
    elseif not ok then
      out[i] = 0
    else
      local r
      if args[3 * i] ~= '' then
        r = redis.pcall('XADD', log, 'MAXLEN', '~', args[3 * i], '*', 'p', args[3 * i - 1])
      else
        r = redis.pcall('XADD', log, '*', 'p', args[3 * i - 1])
      end
      if type(r) == 'table' and r.err then
        out[i] = '!' .. r.err
        failed[log] = true
      else
        out[i] = r
      end
    end
  end
  return out
end)
"""

LIBRARIES: Final = (LIBRARY, MANY_LIBRARY)
"""Every library the chunk log calls (a Redis that lost its functions gets all of them again)."""
