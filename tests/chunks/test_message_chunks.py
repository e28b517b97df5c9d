"""``message_to_chunks`` rebuilds every recorded final message from nothing."""

from __future__ import annotations

from typing import Any

import pytest

from drupe.chunks.accumulate import accumulate
from drupe.chunks.message_chunks import message_to_chunks
from tests.chunks.conftest import load_sequences


def _settle_responded(message: dict[str, Any]) -> dict[str, Any]:
    """The v6 chunk set carries only an approval's id: decisions come back as requests."""
    parts = []
    for part in message["parts"]:
        if isinstance(part.get("approval"), dict):
            part = {**part, "approval": {"id": part["approval"]["id"]}}
            if part.get("state") == "approval-responded":
                part["state"] = "approval-requested"
        parts.append(part)
    return {**message, "parts": parts}


CASES = {name: case for name, case in load_sequences().items() if "error" not in case}


@pytest.mark.parametrize("name", sorted(CASES))
def test_rebuilds_recorded_messages(name: str) -> None:
    case = CASES[name]
    final = accumulate(case["chunks"], seed=case.get("seed"))
    rebuilt = accumulate(message_to_chunks(final))
    assert _settle_responded(rebuilt)["parts"] == _settle_responded(final)["parts"]
    assert rebuilt.get("metadata") == final.get("metadata")
