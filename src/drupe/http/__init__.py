"""The HTTP plumbing the browser API (``api``) and the LLM gateway (``gateway``) share: SSE
responses and their hand-off, the ping ticker, the runtime's app state and status board, the
exception -> HTTP mapping and the request guards.
"""
