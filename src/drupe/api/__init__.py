"""The browser and REST API: the FastAPI app factory (``app_factory``), the AI SDK UI-stream
routes, conversations, agents and sessions, tasks, channels, traces, usage and the static web
UI. Routes talk to conversations through the runtime's ``Conversations`` port only.
"""
