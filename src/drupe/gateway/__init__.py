"""The LLM gateway: OpenAI Chat Completions (with a pass-through to OpenAI-wire providers),
Responses, Anthropic Messages, agents as models, the MCP proxy, keys, scopes and budgets.

Entry point: ``drupe.gateway.router.build_router(runtime)``, mounted by ``drupe.api.app_factory``.
"""
