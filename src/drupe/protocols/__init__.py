"""Open agent protocols served over Drupe's one stream: AG-UI (``agui``) and A2A (``a2a``).

An edge beside the LLM gateway: every route acts on conversations through the
``Conversations`` port (no new stream path); the chunk -> protocol translations are pure
modules with their own tests. Never imported by the core.
"""
