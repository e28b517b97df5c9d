"""The chunk log's Redis functions: the fenced appends and the numbering of strings.

Owns: ``LIBRARY`` (the Lua source of the Redis function library ``drupe_log_1``) and the names
of its two functions, ``MANY_LIBRARY`` (``drupe_log_2``, two functions) and
``REGISTERED_LIBRARY`` (``drupe_log_3``, one function), which
``drupe.cluster.chunk_log.RedisChunkLog`` calls with ``FCALL`` (``LIBRARIES``: all three, loaded
together). This version appends with ``dl2`` (single writes) and ``dl3m`` (a writer's batches)
and numbers strings with ``dl1n``; ``dl1`` and ``dl2m`` stay for nodes of earlier versions
sharing the Redis during a rolling upgrade.

* ``dl1`` (``APPEND``): ``XADD`` one entry (field ``p``) to a turn's log, only while the
  conversation's lease holds the writer's fence (its ``|<token>``), with ``MAXLEN ~`` trimming
  when asked and an ``EXPIRE`` for a terminal entry; answers the entry id, or nil when fenced out;
* ``dl1n`` (``INTERN``): give strings (execution ids, part ids) their numbers in the turn's hash
  (``#<n>`` -> string): a known string keeps its number, a new one gets the wanted number when
  free, else the next free one; the hash lives at least ``NAMES_TTL`` seconds;
* ``dl2`` (``APPEND_FED``): ``dl1``, and the entry is fed: one item (the log key, the entry
  id, the payload) appended to the log's feed (a Redis Stream, ``MINID ~`` trimmed to
  ``FEED_KEEP_MS``; ``drupe.cluster.log_encoding.feed_items`` reads it), in the same call, so
  a log entry and its feed item exist together or not at all;
* ``dl2m`` (``APPEND_MANY``): many fenced appends, to any logs, in ONE call: the leases of all
  of them are read with one ``MGET``, then each write is ``dl1``'s (``XADD``, ``MAXLEN ~`` when
  asked), in order, and what was written is fed (one feed entry per feed per call); answers
  one value per write: the entry id, ``0`` when fenced out, or
  ``"!<error>"`` when that ``XADD`` failed (the writes to other logs still ran; the later
  writes to the same log did not, and answer ``"!..."`` too, so a retry keeps each log's
  order). A node's writer sends every batch that is due in one call, so Redis runs ~1 command
  per batch, not 3 (``FCALL``, the lease's ``GET``, the ``XADD``).

* ``dl3m`` (``APPEND_REGISTERED``): ``dl2m``'s writes, but naming no keys per write: a writer
  registers each turn once in its registry hash (KEYS[1]; turn number -> the log, lease, fence
  token, feed and maxlen), and a write is its turn's number (doubled, plus a trim flag) and the
  payload, all writes in one MessagePack array (Redis's ``cmsgpack`` decodes it in C; the
  writer encodes with ``log_encoding.msgpack_array``); the function reads the turns it needs
  with one ``HMGET`` and answers ``?`` for a write whose turn it does not find (the writer
  registers it again). ~20 bytes per one-word batch instead of ~200.

Must never: change a function's arguments or answers without a new library name (nodes of two
versions share one Redis during a rolling upgrade).
"""

from __future__ import annotations

from typing import Final

__all__ = [
    "APPEND",
    "APPEND_FED",
    "APPEND_MANY",
    "APPEND_REGISTERED",
    "FEED_KEEP_MS",
    "INTERN",
    "LIBRARIES",
    "LIBRARY",
    "LIBRARY_NAME",
    "MANY_LIBRARY",
    "MANY_LIBRARY_NAME",
    "NAMES_TTL",
    "REGISTERED_LIBRARY",
    "REGISTERED_LIBRARY_NAME",
    "REGISTRY_TTL",
]

NAMES_TTL: Final = 24 * 3600
"""Seconds the execution numbers live at least once registered (a finished turn's end shortens
the hash's TTL to the log's, with the anchors)."""

FEED_KEEP_MS: Final = 8_000
"""Milliseconds of entries a feed keeps (``MINID ~`` trimming at each write): a reader that has
not read a feed to its end for half of this catches up from the turns' logs
(``drupe.cluster.reader``). Short, because a feed holds every log write a second time."""
_COMMON: Final = f"""
local function holds(value, fence)
  if not value then return false end
  if string.byte(fence, 1) == 124 then -- '|<token>': the token part of '<node>|<token>'
    return #value > #fence and string.sub(value, -#fence) == fence
  end
  return value == fence
end

-- XADD one entry (field p), trimmed to maxlen when one is given; call: redis.call or pcall.
local function xadd(call, log, maxlen, payload)
  if maxlen and maxlen ~= '' then
    return call('XADD', log, 'MAXLEN', '~', maxlen, '*', 'p', payload)
  end
  return call('XADD', log, '*', 'p', payload)
end

-- One feed item: the log key, the entry id and the payload, each as '<length>:<bytes>'.
local function item(log, id, payload)
  return #log .. ':' .. log .. #id .. ':' .. id .. #payload .. ':' .. payload
end

-- One batch appended to log (trimmed when maxlen is given), its feed item queued in
-- items[feed_key] (last[feed_key]: the newest id); returns the entry id, or '!<error>'.
local function append_one(log, maxlen, payload, feed_key, items, last)
  local r = xadd(redis.pcall, log, maxlen, payload)
  if type(r) == 'table' and r.err then return '!' .. r.err end
  items[feed_key] = items[feed_key] or {{}}
  table.insert(items[feed_key], item(log, r, payload))
  last[feed_key] = r
  return r
end

-- A feed that cannot be written (never expected) fails alone: the logs hold the entries, and
-- readers catch a turn up from its log when its feed misses them.
local function feed(key, items, id)
  local ms = tonumber(string.match(id, '^(%d+)'))
  redis.pcall('XADD', key, 'MINID', '~', ms - {FEED_KEEP_MS}, '*', 'f', table.concat(items))
end
"""
"""Lua every library defines (a library cannot call another's local functions)."""

LIBRARY_NAME: Final = "drupe_log_1"
APPEND: Final = "dl1"
INTERN: Final = "dl1n"
LIBRARY: Final = f"""#!lua name={LIBRARY_NAME}
-- The chunk log's writes (src/drupe/cluster/log_functions.py).
{_COMMON}
-- A fenced append. KEYS: log [, lease] (the lease when ARGV[1] is not '').
-- ARGV: fence or '', payload [, maxlen or '' [, ttl]]. Returns the entry id, or false.
redis.register_function('{APPEND}', function(keys, args)
  if args[1] ~= '' and not holds(redis.call('GET', keys[2]), args[1]) then return false end
  local id = xadd(redis.call, keys[1], args[3], args[2])
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
APPEND_FED: Final = "dl2"
APPEND_MANY: Final = "dl2m"
MANY_LIBRARY: Final = f"""#!lua name={MANY_LIBRARY_NAME}
-- Fenced appends that also feed (src/drupe/cluster/log_functions.py).
{_COMMON}
-- One fenced append, fed. KEYS: log, lease (the log again when unfenced), feed.
-- ARGV: fence or '', payload, maxlen or '', ttl or ''. Returns the entry id, or false.
redis.register_function('{APPEND_FED}', function(keys, args)
  if args[1] ~= '' and not holds(redis.call('GET', keys[2]), args[1]) then return false end
  local id = xadd(redis.call, keys[1], args[3], args[2])
  if args[4] and args[4] ~= '' then redis.call('EXPIRE', keys[1], args[4]) end
  feed(keys[3], {{item(keys[1], id, args[2])}}, id)
  return id
end)

-- Many fenced appends in one call, fed. KEYS: log_1, lease_1, ..., log_n, lease_n (an
-- unfenced write names its log twice), then the feeds. ARGV: n, then per write: fence or '',
-- payload, maxlen or '', the number of its feed among the feed keys (1-based).
-- Returns one value per write: the entry id, 0 when fenced out, '!<error>' when not written.
redis.register_function('{APPEND_MANY}', function(keys, args)
  local n = tonumber(args[1])
  local leases, slot = {{}}, {{}}
  for i = 1, n do
    if args[4 * i - 2] ~= '' then
      leases[#leases + 1] = keys[2 * i]
      slot[i] = #leases
    end
  end
  local held = {{}}
  if #leases > 0 then held = redis.call('MGET', unpack(leases)) end
  local out, failed, items, last = {{}}, {{}}, {{}}, {{}}
  for i = 1, n do
    local log, fence, payload = keys[2 * i - 1], args[4 * i - 2], args[4 * i - 1]
    if failed[log] then
      -- an earlier write to this log failed: none after it, so a retry keeps the order
      out[i] = '!an earlier write to this log in the same call failed'
    elseif fence ~= '' and not holds(held[slot[i]], fence) then
      out[i] = 0
    else
      out[i] = append_one(log, args[4 * i], payload, tonumber(args[4 * i + 1]), items, last)
      if string.byte(out[i], 1) == 33 then failed[log] = true end -- '!<error>'
    end
  end
  for f, list in pairs(items) do feed(keys[2 * n + f], list, last[f]) end
  return out
end)
"""

REGISTERED_LIBRARY_NAME: Final = "drupe_log_3"
APPEND_REGISTERED: Final = "dl3m"
REGISTRY_TTL: Final = 24 * 3600
"""Seconds a writer's registry of turns lives after its last registration (a writer that
outlives it registers its turns again: the function answers ``?`` for a turn it does not find)."""
REGISTERED_LIBRARY: Final = f"""#!lua name={REGISTERED_LIBRARY_NAME}
-- Fenced appends to registered turns, fed (src/drupe/cluster/log_functions.py).
{_COMMON}
-- Many fenced appends to the turns a writer registered, in one call, fed. Arguments are
-- MessagePack arrays (Redis's cmsgpack decodes them in C).
-- KEYS: the writer's registry (a hash: turn number -> its log, lease, fence token, feed and
-- maxlen, a MessagePack array of five strings; the lease and token empty for an unfenced log).
-- ARGV[1]: the writes, [head, payload, head, payload, ...], head = 2 * turn number (+ 1 to
-- trim the log to its maxlen with this write);
-- ARGV[2]: registrations first applied, [number, registry value, check, ...], or ''; with
-- check = 1 (a turn registered again that has entries) the turn's log must exist, else the
-- registration is not applied and its writes answer '?';
-- ARGV[3]: turn numbers to drop from the registry after the writes, ',' separated, or ''.
-- Returns one value per write: the entry id, 0 when fenced out, '?' when its turn is not
-- registered, '!<error>' when not written (an earlier write to its log in this call failed,
-- or its own XADD did).
redis.register_function('{APPEND_REGISTERED}', function(keys, args)
  local registry, turns, asked = keys[1], {{}}, {{}}
  if args[2] ~= '' then
    local registrations, fields = cmsgpack.unpack(args[2]), {{}}
    for i = 1, #registrations, 3 do
      local number, value = registrations[i], registrations[i + 1]
      local turn = cmsgpack.unpack(value)
      if registrations[i + 2] == 1 and redis.call('EXISTS', turn[1]) == 0 then
        asked[number] = true -- its log is gone (Redis lost its data): its writes answer '?'
      else
        turns[number] = turn
        fields[#fields + 1] = number
        fields[#fields + 1] = value
      end
    end
    if #fields > 0 then
      redis.call('HSET', registry, unpack(fields))
      redis.call('EXPIRE', registry, {REGISTRY_TTL})
    end
  end
  local writes = cmsgpack.unpack(args[1])
  local wanted = {{}}
  for i = 1, #writes, 2 do
    local number = math.floor(writes[i] / 2)
    if not turns[number] and not asked[number] then
      asked[number] = true
      wanted[#wanted + 1] = number
    end
  end
  if #wanted > 0 then
    local got = redis.call('HMGET', registry, unpack(wanted))
    for i, number in ipairs(wanted) do
      if got[i] then turns[number] = cmsgpack.unpack(got[i]) end
    end
  end
  local leases, slot = {{}}, {{}}
  for number, turn in pairs(turns) do
    if turn[3] ~= '' then
      leases[#leases + 1] = turn[2]
      slot[number] = #leases
    end
  end
  local held = {{}}
  if #leases > 0 then held = redis.call('MGET', unpack(leases)) end
  local out, failed, items, last = {{}}, {{}}, {{}}, {{}}
  for i = 1, #writes, 2 do
    local head, payload = writes[i], writes[i + 1]
    local number = math.floor(head / 2)
    local turn = turns[number]
    local n = #out + 1
    if not turn then
      out[n] = '?'
    elseif failed[number] then
      out[n] = '!an earlier write to this log in the same call failed'
    elseif turn[3] ~= '' and not holds(held[slot[number]], turn[3]) then
      out[n] = 0
    else
      out[n] = append_one(turn[1], head % 2 == 1 and turn[5], payload, turn[4], items, last)
      if string.byte(out[n], 1) == 33 then failed[number] = true end -- '!<error>'
    end
  end
  for f, list in pairs(items) do feed(f, list, last[f]) end
  if args[3] ~= '' then
    local gone = {{}}
    for number in string.gmatch(args[3], '[^,]+') do gone[#gone + 1] = number end
    redis.call('HDEL', registry, unpack(gone))
  end
  return out
end)
"""

LIBRARIES: Final = (LIBRARY, MANY_LIBRARY, REGISTERED_LIBRARY)
"""Every library the chunk log calls (a Redis that lost its functions gets all of them again)."""
