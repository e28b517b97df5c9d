"""The stream manager: at most one live stream per conversation, equal subscribers.

Pure decisions live in ``status`` (conversation status reducer), ``ring`` (replay ring) and
``steering`` (the chat steer queue); ``manager`` and ``live`` are the thin async shell that
feeds them and performs their effects. ``context`` prepares turns (dispatch + providers) and
``listeners`` consume them. This package never imports the web framework, SQL or Redis.
See ``docs/lifecycles/stream.md``.
"""

from __future__ import annotations
