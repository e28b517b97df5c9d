"""``GET /api/conversations/{id}/export?format=markdown|json``: download a conversation.

* ``json``: the conversation as ``GET /api/conversations/{id}`` answers it (every message of the
  tree, with ``parentId``), plus ``exportedAt``; ``application/json``.
* ``markdown``: the branch the web UI shows (``current_path``: from the root to the most
  recently created message), a ``# title`` then one ``## You`` / ``## <model>`` section per
  message: its text parts verbatim, files as ``[file: name]``, tool calls as
  ``[tool: name]``; ``text/markdown``.

Both are ``Content-Disposition: attachment`` with a file name made from the title. An unknown
conversation is a 404; a format other than the two is a 422.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Literal

import orjson
from fastapi import APIRouter, Query, Request, Response

from drupe.api.conversation_routes import get_conversation

__all__ = ["current_path", "filename_for", "router", "to_markdown"]

router = APIRouter(tags=["conversations"])


def current_path(messages: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The branch shown: from the root to the last message in creation order, by ``parentId``."""
    if not messages:
        return []
    by_id = {m["id"]: m for m in messages}
    path: list[Mapping[str, Any]] = []
    seen: set[str] = set()
    node: Mapping[str, Any] | None = messages[-1]
    while node is not None and node["id"] not in seen:
        seen.add(node["id"])
        path.append(node)
        parent = node.get("parentId")
        node = by_id.get(parent) if parent is not None else None
    path.reverse()
    return path


def _part_markdown(part: Mapping[str, Any]) -> str | None:
    kind = str(part.get("type", ""))
    if kind == "text":
        return str(part.get("text", ""))
    if kind == "file":
        return f"[file: {part.get('filename') or part.get('mediaType') or 'attachment'}]"
    if kind == "dynamic-tool":
        return f"[tool: {part.get('toolName', 'tool')}]"
    if kind.startswith("tool-"):
        return f"[tool: {kind[5:]}]"
    return None


def to_markdown(title: str | None, messages: Sequence[Mapping[str, Any]]) -> str:
    """The Markdown of a conversation's shown branch."""
    lines = [f"# {title or 'Untitled'}", ""]
    for message in current_path(messages):
        role = message.get("role")
        if role == "user":
            heading = "You"
        elif role == "system":
            heading = "System"
        else:
            heading = str(message.get("modelId") or "Assistant")
        body = [text for part in message.get("parts") or [] if (text := _part_markdown(part))]
        lines += [f"## {heading}", "", "\n\n".join(body).strip(), ""]
    return "\n".join(lines).rstrip() + "\n"


def filename_for(title: str | None, conversation_id: str, extension: str) -> str:
    """A safe file name from the title (ASCII words joined by ``-``), else the id."""
    stem = re.sub(r"[^A-Za-z0-9]+", "-", title or "").strip("-")[:60] or conversation_id
    return f"{stem}.{extension}"


@router.get(
    "/api/conversations/{conversation_id}/export",
    response_class=Response,
    responses={
        200: {
            "description": "The conversation as a file.",
            "content": {"text/markdown": {}, "application/json": {}},
        }
    },
)
async def export_conversation(
    conversation_id: str,
    request: Request,
    format: Literal["markdown", "json"] = Query(default="markdown"),
) -> Response:
    """Download a conversation as Markdown (the shown branch) or JSON (the whole tree)."""
    detail = await get_conversation(conversation_id, request)
    if format == "json":
        document = {**detail, "exportedAt": datetime.now(UTC).isoformat()}
        body = orjson.dumps(document, option=orjson.OPT_INDENT_2)
        media_type, extension = "application/json", "json"
    else:
        body = to_markdown(detail.get("title"), detail["messages"]).encode()
        media_type, extension = "text/markdown; charset=utf-8", "md"
    name = filename_for(detail.get("title"), conversation_id, extension)
    return Response(
        body,
        media_type=media_type,
        headers={"Content-Disposition": f'attachment; filename="{name}"'},
    )
