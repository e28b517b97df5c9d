"""Fold UI message stream chunks into a UI message: a port of the AI SDK's ``readUIMessageStream``.

Owns: ``Accumulator`` and ``accumulate``, which reproduce ``processUIMessageStream``
(``ai@6.0.326``, ``src/ui/process-ui-message-stream.ts``) as driven by ``readUIMessageStream``
(``resetStateOnMessageIdChange``): the message equals, as JSON, the last snapshot the SDK yields
for the same chunks and seed. Tested against the real package under Node
(``tests/chunks/test_node_crosscheck.py``).

Faithful details worth knowing:

- a seed that is not an ``assistant`` message is replaced by an empty one with its id; a
  ``start`` whose ``messageId`` differs from the current id starts a fresh message;
- the SDK yields a snapshot on every chunk that changes the message except ``start-step``, so
  ``step-start`` parts pushed after the last yielded snapshot are left out of ``snapshot()``;
- ``error``, ``abort`` and ``finish-step`` do not change the message (``finish-step`` closes the
  open text and reasoning ids); ``finish`` only merges metadata;
- where the SDK throws (a delta or end without its start, a tool chunk for an unknown tool call,
  metadata that cannot be merged) ``push`` raises ``AccumulateError`` and changes nothing.

The message and its indices live in ``drupe.chunks.message_state``; the ``tool-*`` chunks are
applied by ``drupe.chunks.tool_chunks``; this module dispatches every chunk and handles the text,
reasoning, file, source, data, step, start, finish and metadata chunks.

Must never: mutate a chunk or the seed, or do work beyond the size of the chunk in ``push``:
text and tool-input deltas are buffered, and joined (tool input: parsed) only when a snapshot is
taken or another chunk touches the part.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, NoReturn

import orjson

from drupe.chunks.message_state import AccumulateError, MessageState, OpenText, clone_json
from drupe.chunks.partial_json import UNDEFINED
from drupe.chunks.tool_chunks import tool_chunk, tool_input_delta
from drupe.chunks.tool_parts import assign, coalesce, nullish, truthy
from drupe.chunks.types import Chunk, UIMessage, UIPart

__all__ = ["AccumulateError", "Accumulator", "accumulate", "clone_json"]

_SOURCE_KEYS = {
    "source-url": ("sourceId", "url", "title", "providerMetadata"),
    "source-document": ("sourceId", "mediaType", "title", "filename", "providerMetadata"),
}


class Accumulator:
    """Incremental ``readUIMessageStream``: ``push`` chunks, take ``snapshot()`` at any time."""

    __slots__ = ("_state", "aborted", "error_texts", "finish_reason")

    def __init__(self, seed: UIMessage | None = None) -> None:
        self.finish_reason: str | None = None
        """The last ``finish`` chunk's ``finishReason`` (state the SDK keeps beside the message)."""
        self.error_texts: list[str] = []
        """``errorText`` of every ``error`` chunk (the SDK hands them to ``onError``)."""
        self.aborted = False
        """Whether an ``abort`` chunk was seen (it does not change the message)."""
        if seed is not None and seed.get("role") == "assistant":
            message: dict[str, Any] = clone_json(seed)
        else:
            seed_id = coalesce(seed.get("id", UNDEFINED), "") if seed is not None else ""
            message = {"id": seed_id, "role": "assistant", "parts": []}
        self._state = MessageState(message)

    @property
    def written(self) -> bool:
        """Whether the SDK would have yielded at least one snapshot."""
        return self._state.written

    # --- the fold -----------------------------------------------------------------------------

    def push(self, chunk: Chunk) -> None:
        """Apply one chunk. Raises ``AccumulateError`` (changing nothing) where the SDK throws."""
        chunk_type = chunk["type"]
        state = self._state
        if chunk_type == "text-delta" or chunk_type == "reasoning-delta":
            active = state.active_text if chunk_type == "text-delta" else state.active_reasoning
            open_text = active.get(chunk["id"])
            if open_text is None:
                _missing_start(chunk_type, chunk["id"])
            open_text.pieces.append(chunk["delta"])
            metadata = chunk.get("providerMetadata")
            if metadata is not None:
                open_text.part["providerMetadata"] = metadata
            state.written = True
            state.unwritten_steps = 0
        elif chunk_type == "tool-input-delta":
            tool_input_delta(state, chunk["toolCallId"], chunk["inputTextDelta"])
        elif chunk_type == "text-start" or chunk_type == "reasoning-start":
            self._text_start(chunk_type, chunk)
        elif chunk_type == "text-end" or chunk_type == "reasoning-end":
            self._text_end(chunk_type, chunk)
        elif chunk_type == "file" or chunk_type in _SOURCE_KEYS:
            self._file_or_source(chunk_type, chunk)
        elif chunk_type.startswith("tool-"):
            tool_chunk(state, chunk_type, chunk)
        elif chunk_type == "start-step":
            state.push_part({"type": "step-start"})
            state.unwritten_steps += 1
        elif chunk_type == "finish-step":
            for open_text in (*state.active_text.values(), *state.active_reasoning.values()):
                open_text.flush()
            state.active_text = {}
            state.active_reasoning = {}
        elif chunk_type == "start":
            self._start(chunk)
        elif chunk_type == "finish" or chunk_type == "message-metadata":
            reason = chunk.get("finishReason") if chunk_type == "finish" else None
            if reason is not None:
                self.finish_reason = reason
            if state.apply_metadata(chunk.get("messageMetadata", UNDEFINED)):
                state.write()
        elif chunk_type == "error":
            self.error_texts.append(str(chunk.get("errorText")))
        elif chunk_type == "abort":
            self.aborted = True
        elif chunk_type.startswith("data-"):
            self._data_chunk(chunk_type, chunk)

    def _text_start(self, chunk_type: str, chunk: Chunk) -> None:
        get = chunk.get
        if chunk_type == "text-start":
            part: UIPart = {"type": "text", "text": ""}
            active = self._state.active_text
        else:
            part = {"type": "reasoning"}
            assign(part, "id", get("id", UNDEFINED))
            part["text"] = ""
            active = self._state.active_reasoning
        assign(part, "providerMetadata", get("providerMetadata", UNDEFINED))
        part["state"] = "streaming"
        replaced = active.get(chunk["id"])
        if replaced is not None:
            replaced.flush()
        active[chunk["id"]] = OpenText(part)
        self._state.push_part(part)
        self._state.write()

    def _text_end(self, chunk_type: str, chunk: Chunk) -> None:
        state = self._state
        active = state.active_text if chunk_type == "text-end" else state.active_reasoning
        open_text = active.get(chunk["id"])
        if open_text is None:
            _missing_start(chunk_type, chunk["id"])
        open_text.flush()
        part = open_text.part
        part["state"] = "done"
        metadata = chunk.get("providerMetadata")
        if metadata is not None:
            part["providerMetadata"] = metadata
        del active[chunk["id"]]
        state.write()

    def _file_or_source(self, chunk_type: str, chunk: Chunk) -> None:
        get = chunk.get
        part: UIPart = {"type": chunk_type}
        if chunk_type == "file":
            assign(part, "mediaType", get("mediaType", UNDEFINED))
            assign(part, "url", get("url", UNDEFINED))
            if get("providerMetadata") is not None:
                part["providerMetadata"] = chunk["providerMetadata"]
        else:
            for key in _SOURCE_KEYS[chunk_type]:
                assign(part, key, get(key, UNDEFINED))
        self._state.push_part(part)
        self._state.write()

    def _start(self, chunk: Chunk) -> None:
        state = self._state
        message_id = chunk.get("messageId")
        reset = message_id is not None and message_id != state.message["id"]
        metadata = chunk.get("messageMetadata", UNDEFINED)
        current = UNDEFINED if reset else state.message.get("metadata", UNDEFINED)
        merged = state.merged_metadata(current, metadata)
        if reset:
            self.finish_reason = None
            state.load({"id": message_id, "role": "assistant", "parts": []})
        if message_id is not None:
            state.message["id"] = message_id
        if merged is not UNDEFINED:
            state.message["metadata"] = merged
        if reset or message_id is not None or not nullish(metadata):
            state.write()

    def _data_chunk(self, chunk_type: str, chunk: Chunk) -> None:
        if truthy(chunk.get("transient", UNDEFINED)):
            return
        state = self._state
        part_id = chunk.get("id")
        existing: UIPart | None = None
        if isinstance(part_id, str):
            index = state.data_index.get((chunk_type, part_id))
            existing = None if index is None else state.parts[index]
        elif part_id is not None:
            existing = next(
                (
                    p
                    for p in state.parts
                    if p.get("type") == chunk_type
                    and type(p.get("id")) is type(part_id)
                    and p.get("id") == part_id
                ),
                None,
            )
        if existing is not None:
            assign(existing, "data", chunk.get("data", UNDEFINED))
        else:
            state.push_part(dict(chunk))
        state.write()

    # --- reading ------------------------------------------------------------------------------

    def snapshot(self) -> UIMessage:
        """An independent deep copy of the message as the SDK last yielded it."""
        state = self._state
        state.flush_all()
        message = {k: clone_json(v) for k, v in state.message.items() if k != "parts"}
        message["parts"] = [clone_json(part) for part in state.visible_parts()]
        return message  # type: ignore[return-value]

    def parts_json(self) -> bytes:
        """The parts of ``snapshot()`` encoded as JSON, without copying them first (for
        checkpoints: the encoding is taken at once, before any other chunk is pushed)."""
        self._state.flush_all()
        return orjson.dumps(self._state.visible_parts(), option=orjson.OPT_NON_STR_KEYS)

    @property
    def message_id(self) -> str:
        """The current message id."""
        return str(self._state.message["id"])


def _missing_start(chunk_type: str, part_id: str) -> NoReturn:
    kind = chunk_type.partition("-")[0]
    noun = "text part" if kind == "text" else "reasoning part"
    raise AccumulateError(
        f'Received {chunk_type} for missing {noun} with ID "{part_id}". '
        f'Ensure a "{kind}-start" chunk is sent before any "{chunk_type}" chunks.'
    )


def accumulate(chunks: Iterable[Chunk], *, seed: UIMessage | None = None) -> UIMessage:
    """Fold ``chunks`` (onto ``seed``, as ``readUIMessageStream({message: seed})``) into a message.

    When no chunk makes the SDK yield a snapshot, the result is the seed (or an empty assistant
    message with id ``""``) where the SDK would yield nothing.
    """
    accumulator = Accumulator(seed)
    for chunk in chunks:
        accumulator.push(chunk)
    return accumulator.snapshot()
