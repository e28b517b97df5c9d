"""The chunk log's Redis functions: the fenced append and the numbering of strings.

Owns: ``LIBRARY`` (the Lua source of the Redis function library ``drupe_log_1``) and the names
of its two functions, which ``drupe.cluster.chunk_log.RedisChunkLog`` calls with ``FCALL``:

* ``dl1`` (``APPEND``): ``XADD`` one entry (field ``p``) to a turn's log, only while the
  conversation's lease holds the writer's fence (its ``|<token>``), with ``MAXLEN ~`` trimming
  when asked and an ``EXPIRE`` for a terminal entry; answers the entry id, or nil when fenced out;
* ``dl1n`` (``INTERN``): give strings (execution ids, part ids) their numbers in the turn's hash
  (``#<n>`` -> string): a known string keeps its number, a new one gets the wanted number when
  free, else the next free one; the hash lives at least ``NAMES_TTL`` seconds.

Must never: change a function's arguments or answers without a new library name (nodes of two
versions share one Redis during a rolling upgrade).
"""

from __future__ import annotations

from typing import Final

__all__ = ["APPEND", "INTERN", "LIBRARY", "LIBRARY_NAME", "NAMES_TTL"]

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
