"""The agent card of a Drupe agent (pure: ``a2a.types`` protobuf values).

The card is public (served without a key): it names the agent, never its instructions. It
gives the agent's JSON-RPC endpoint (``<base>/a2a/<agentId>``, protocol 1.0), streaming and
push notifications on, text in and out, one skill (the agent itself), and the security
scheme: HTTP bearer (a Drupe gateway key), required when the server requires keys.
"""

from __future__ import annotations

from a2a.types.a2a_pb2 import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentProvider,
    AgentSkill,
    HTTPAuthSecurityScheme,
    SecurityRequirement,
    SecurityScheme,
)
from a2a.utils.constants import PROTOCOL_VERSION_1_0

from drupe.persistence.records import AgentRecord

__all__ = ["BEARER", "agent_card", "endpoint_url"]

BEARER = "drupeBearer"


def endpoint_url(base_url: str, agent_id: str) -> str:
    return f"{base_url.rstrip('/')}/a2a/{agent_id}"


def agent_card(
    agent: AgentRecord, *, base_url: str, version: str, keys_required: bool
) -> AgentCard:
    # Cards are public (fetched before any key is sent): never the agent's instructions.
    summary = f"The Drupe agent {agent.name!r} ({agent.driver_type})."
    card = AgentCard(
        name=agent.name,
        description=summary,
        supported_interfaces=[
            AgentInterface(
                url=endpoint_url(base_url, agent.id),
                protocol_binding="JSONRPC",
                protocol_version=PROTOCOL_VERSION_1_0,
            )
        ],
        provider=AgentProvider(organization="Drupe", url=base_url.rstrip("/")),
        version=version,
        capabilities=AgentCapabilities(streaming=True, push_notifications=True),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[
            AgentSkill(
                id=agent.id,
                name=agent.name,
                description=summary,
                tags=["drupe", agent.driver_type],
            )
        ],
    )
    card.security_schemes[BEARER].CopyFrom(
        SecurityScheme(
            http_auth_security_scheme=HTTPAuthSecurityScheme(
                scheme="bearer", description="A Drupe gateway key (drupe key create)"
            )
        )
    )
    if keys_required:
        requirement = SecurityRequirement()
        requirement.schemes[BEARER].SetInParent()
        card.security_requirements.append(requirement)
    return card
