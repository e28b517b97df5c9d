"""One output item of a Responses API answer while it is built: a message, a function call or
a reasoning item, and its ``openai.types.responses`` model at a given status. Pure."""

from __future__ import annotations

from dataclasses import dataclass, field

from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
    ResponseReasoningItem,
)
from openai.types.responses.response_reasoning_item import Content as ReasoningContent
from pydantic import BaseModel

__all__ = ["OutputItem"]


@dataclass(slots=True)
class OutputItem:
    """One output item being built: a message, a function call or a reasoning item."""

    kind: str
    item_id: str
    index: int
    text: list[str] = field(default_factory=list)
    call_id: str = ""
    name: str = ""
    done: bool = False

    def model(self, *, status: str) -> BaseModel:
        if self.kind == "message":
            content = (
                [ResponseOutputText(type="output_text", text="".join(self.text), annotations=[])]
                if self.done
                else []
            )
            return ResponseOutputMessage(
                id=self.item_id,
                type="message",
                role="assistant",
                status=status,  # type: ignore[arg-type]
                content=content,  # type: ignore[arg-type]
            )
        if self.kind == "function_call":
            return ResponseFunctionToolCall(
                id=self.item_id,
                type="function_call",
                call_id=self.call_id,
                name=self.name,
                arguments="".join(self.text),
                status=status,  # type: ignore[arg-type]
            )
        text = "".join(self.text)
        return ResponseReasoningItem(
            id=self.item_id,
            type="reasoning",
            summary=[],
            content=[ReasoningContent(type="reasoning_text", text=text)] if self.done else [],
            status=status,  # type: ignore[arg-type]
        )
