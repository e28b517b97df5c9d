"""Pure decisions of chat approvals: apply human decisions to a message's tool parts (§8).

``apply_decisions(parts, decisions)`` returns the new parts and what happened; it never does I/O.
Rules: a decision applies to the tool part whose ``approval.id`` matches and whose state is
``approval-requested``; repeating the same decision is a no-op (idempotent); a different decision
for an already-decided approval is refused; an unknown approval id is refused. The row needs a
continuation only once no part is still ``approval-requested``.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from drupe.errors import ValidationError

__all__ = ["Decision", "DecisionResult", "apply_decisions", "pending_approval_ids"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Decision:
    approval_id: str
    approved: bool
    reason: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class DecisionResult:
    parts: list[dict[str, Any]]
    changed: bool
    still_pending: frozenset[str]


def _is_tool(part: dict[str, Any]) -> bool:
    kind = part.get("type", "")
    return isinstance(kind, str) and (kind.startswith("tool-") or kind == "dynamic-tool")


def pending_approval_ids(parts: Sequence[dict[str, Any]]) -> frozenset[str]:
    """Approval ids still waiting for a human on these parts."""
    return frozenset(
        str(p["approval"]["id"])
        for p in parts
        if _is_tool(p) and p.get("state") == "approval-requested" and "approval" in p
    )


def apply_decisions(
    parts: Sequence[dict[str, Any]], decisions: Sequence[Decision]
) -> DecisionResult:
    """Apply ``decisions`` atomically: all of them, or a ``ValidationError`` and nothing."""
    new_parts = copy.deepcopy(list(parts))
    by_id = {
        str(p["approval"]["id"]): p
        for p in new_parts
        if _is_tool(p) and isinstance(p.get("approval"), dict) and "id" in p["approval"]
    }
    changed = False
    for decision in decisions:
        part = by_id.get(decision.approval_id)
        if part is None:
            raise ValidationError(f"unknown approval id {decision.approval_id!r}")
        if part.get("state") == "approval-requested":
            approval: dict[str, Any] = {"id": decision.approval_id, "approved": decision.approved}
            if decision.reason is not None:
                approval["reason"] = decision.reason
            part["approval"] = approval
            part["state"] = "approval-responded"
            changed = True
            continue
        previous = part["approval"].get("approved")
        if previous is not decision.approved:
            raise ValidationError(
                f"approval {decision.approval_id!r} was already "
                f"{'approved' if previous else 'denied'}"
            )
    return DecisionResult(
        parts=new_parts, changed=changed, still_pending=pending_approval_ids(new_parts)
    )
