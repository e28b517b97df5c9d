"""The checks an agent passes before it is written (a create, or an edit's merged fields).

Contract: ``validate_agent`` raises one ``ValidationError`` naming the field when the driver
type is not registered (the known ones listed), when the driver checks models and the model does
not resolve, when a workspace the client sent is not an existing directory given by an absolute
path (a stored one is not re-checked; nothing is created here), or when the driver refuses a
session of the agent (``validate_session``: workspace, MCP servers; a ``UsageError`` passes as
it is). ``record_fields`` are a stored agent's fields in the shape an edit merges into. Reads
only the filesystem; writes nothing.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from drupe.errors import DrupeError, UsageError, ValidationError
from drupe.sessions.drivers.base import PermissionMode, SessionInfo

if TYPE_CHECKING:
    from drupe.app import Runtime
    from drupe.persistence.records import AgentRecord
    from drupe.sessions.drivers.base import Driver

__all__ = ["driver_of", "record_fields", "validate_agent"]


def driver_of(runtime: Runtime, driver_type: str) -> Driver:
    drivers = runtime.drivers
    if drivers is None or driver_type not in drivers:
        known = ", ".join(drivers.types()) if drivers is not None else ""
        raise ValidationError(
            f"driverType: unknown driver {driver_type!r}; known drivers: {known or 'none'}"
        )
    return drivers.get(driver_type)


def _check_model(driver: Driver, model_id: str) -> None:
    check = getattr(driver, "check_model", None)
    if check is None:
        return  # the runtime takes its own model names and reports a bad one on connect
    try:
        check(model_id)
    except Exception as err:  # a driver's model check: any failure is the client's bad id
        raise ValidationError(f"modelId: unknown model {model_id!r}: {err}") from err


def _check_workspace(workspace: str) -> None:
    """A workspace the client names must be an existing directory (absolute path); only the
    default one (in the data dir) is created by the server."""
    path = Path(workspace).expanduser()
    if not path.is_absolute():
        raise ValidationError(f"workspace: {workspace!r} is not an absolute path")
    if not path.is_dir():
        raise ValidationError(f"workspace: {workspace!r} is not a directory")


def validate_agent(
    runtime: Runtime, agent_id: str, fields: dict[str, Any], checked: set[str]
) -> None:
    """Refuse an agent (the merged fields of a create or an edit) its driver would refuse.

    ``checked``: the fields the client sent (a stored workspace is not re-checked).
    """
    driver = driver_of(runtime, fields["driver_type"])
    model_id = fields.get("model_id")
    if model_id:
        _check_model(driver, model_id)
    workspace = fields.get("workspace")
    if workspace and "workspace" in checked:
        _check_workspace(workspace)
    info = SessionInfo(
        session_id="",
        agent_id=agent_id,
        agent_name=fields["name"],
        driver_type=fields["driver_type"],
        model_id=model_id or "",
        instructions=fields.get("instructions"),
        workspace=Path(workspace).expanduser() if workspace else None,
        tools=tuple(fields.get("tools") or ()),
        mcp_servers=tuple(fields.get("mcp_servers") or ()),
        permission_mode=cast(PermissionMode, fields.get("permission_mode", "default")),
    )
    try:
        driver.validate_session(info)
    except UsageError:
        raise
    except DrupeError as err:
        raise ValidationError(
            f"the {fields['driver_type']} driver refused the agent: {err}"
        ) from err


def record_fields(record: AgentRecord) -> dict[str, Any]:
    return {
        "name": record.name,
        "driver_type": record.driver_type,
        "model_id": record.model_id,
        "instructions": record.instructions,
        "workspace": record.workspace,
        "tools": list(record.tools),
        "mcp_servers": list(record.mcp_servers),
        "permission_mode": record.permission_mode,
    }
