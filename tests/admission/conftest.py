"""The admission tests run on the streaming tests' runtime (a real manager, dispatcher and
SQLite database, scripted sources)."""

from tests.streaming.conftest import runtime, stream_config

__all__ = ["runtime", "stream_config"]
