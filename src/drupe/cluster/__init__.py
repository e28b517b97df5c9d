"""Cluster mode on Redis: ownership leases with fencing tokens, the shared chunk log, and the
per-node log reader (``docs/lifecycles/cluster.md``).

* ``lease``: ``RedisLease`` (``SET NX PX`` + renewal + a monotonic fencing token per conversation);
* ``coalesce``: ``Coalescer``, the pure rule of when an owner writes deltas (25 ms windows);
* ``chunk_log``: ``RedisChunkLog``, one Redis Stream per turn whose ids are the resume cursors
  (compact entries written by one fenced Redis function call each);
* ``reader``: ``NodeReader``, one ``XREAD`` loop per node fanned out to local subscribers.

Needs the ``cluster`` extra (``redis[hiredis]``). Only this package imports Redis.
"""

from __future__ import annotations
