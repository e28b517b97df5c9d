"""Telegram shows Markdown (issue 23.7): answers and Drupe's own texts go as MarkdownV2, which
the fake Bot API parses as Telegram does (an unescaped reserved character is refused); a text
Telegram refuses is sent again as plain text, live edits included."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from telegram import Bot
from telegram.error import BadRequest

from drupe.agent.models.script import Text
from drupe.agent.models.scripted import register_script
from drupe.app import Runtime
from drupe.channels.telegram import TelegramAdapter, markdown_v2
from drupe.testing.fake_telegram import FakeTelegram
from drupe.testing.markdown_v2 import Entity, MarkdownV2Error, parse
from tests.channels.conftest import ALICE, CHAT_A, TG_TOKEN, OpenChannels, telegram_config
from tests.channels.support import drained

ANSWER = """## Results

The **3** checks passed (100%)! See `config_v2.toml` & the table:

| name | value |
|------|-------|
| a_b  | 1.5   |
| c*d  | <2>   |

```python
def f(x):
    return x[0] * 2  # a_b.c
```

- item #1 (done)
- item {2} = [pending]

Stray: 1 < 2 > 0, a_b_c, *, _, ~, |, !, \\ end."""

SHOWN = """✏ Results

The 3 checks passed (100%)! See config_v2.toml & the table:

name | value
-----+------
a_b  | 1.5  
c*d  | <2>  

def f(x):
    return x[0] * 2  # a_b.c

⦁ item #1 (done)
⦁ item {2} = [pending]

Stray: 1 < 2 > 0, a_b_c, *, _, ~, |, !, \\ end."""  # noqa: W291 - a table's padded cells
"""What a Telegram user sees of ``ANSWER``: its markup gone, every character of its text kept
(the table is a code block, the heading bold and underlined, the list bulleted)."""

REFUSAL = "Bad Request: can't parse entities: Character '.' is reserved"


async def test_an_answer_full_of_code_tables_and_special_characters_is_shown_formatted(
    runtime: Runtime, tg: FakeTelegram, open_channels: OpenChannels
) -> None:
    register_script("tg-markdown", [[Text(ANSWER, chunk_chars=9)]])
    config = telegram_config(tg.base_url, target="model:scripted:tg-markdown")
    async with open_channels(config) as service:
        tg.push_message(CHAT_A, ALICE, "report")
        await tg.recorder.wait_until(lambda: tg.messages(CHAT_A) == [SHOWN])
        await drained(service, CHAT_A)
    (message_id,) = tg.message_ids(CHAT_A)
    entities = tg.entities(CHAT_A, message_id)
    assert ("bold", "Results") in entities and ("code", "config_v2.toml") in entities
    assert ("pre", "def f(x):\n    return x[0] * 2  # a_b.c\n") in entities
    calls = tg.recorder.of("sendMessage") + tg.recorder.of("editMessageText")
    # every send and live edit parsed as MarkdownV2: none needed the plain-text fallback
    assert calls and all(c.params.get("parse_mode") == "MarkdownV2" for c in calls)


async def test_help_and_whoami_are_formatted(
    runtime: Runtime, tg: FakeTelegram, open_channels: OpenChannels
) -> None:
    async with open_channels(telegram_config(tg.base_url)) as service:
        tg.push_message(CHAT_A, ALICE, "/help")
        tg.push_message(CHAT_A, ALICE, "/whoami")
        await tg.recorder.wait_until(lambda: len(tg.messages(CHAT_A)) == 2)
        await drained(service, CHAT_A)
    help_id, whoami_id = tg.message_ids(CHAT_A)
    assert tg.messages(CHAT_A)[0].startswith("Drupe (tg)\n")
    assert tg.entities(CHAT_A, help_id)[0] == ("italic", "Drupe")
    assert ("code", str(ALICE)) in tg.entities(CHAT_A, whoami_id)
    assert "of [channels.tg] in config.toml" in tg.messages(CHAT_A)[1]


async def test_a_text_telegram_cannot_parse_is_sent_again_as_plain_text(
    runtime: Runtime, tg: FakeTelegram, open_channels: OpenChannels
) -> None:
    register_script("tg-refused", [[Text("First *part* and the rest.")]])
    tg.recorder.fail_next("sendMessage", 400, description=REFUSAL)
    config = telegram_config(tg.base_url, target="model:scripted:tg-refused")
    async with open_channels(config) as service:
        tg.push_message(CHAT_A, ALICE, "go")
        await tg.recorder.wait_until(lambda: tg.messages(CHAT_A) == ["First *part* and the rest."])
        await drained(service, CHAT_A)
    sends = tg.recorder.of("sendMessage")
    assert [s.params.get("parse_mode") for s in sends] == ["MarkdownV2", None]
    assert sends[0].params["text"] == "First _part_ and the rest\\."
    assert sends[1].params["text"] == "First *part* and the rest."  # the same text, plain


async def test_a_live_edit_telegram_cannot_parse_is_made_again_as_plain_text(
    tg: FakeTelegram,
) -> None:
    adapter = TelegramAdapter(telegram_config(tg.base_url))
    async with adapter.bot:
        message_id = await adapter.send(str(CHAT_A), "Working on `it`")
        tg.recorder.fail_next("editMessageText", 400, description=REFUSAL)
        await adapter.edit(str(CHAT_A), message_id, "Working on `it`, step 2.")
        await adapter.edit(str(CHAT_A), message_id, "Done: **all** of it.")
    edits = [
        (e.params["text"], e.params.get("parse_mode")) for e in tg.recorder.of("editMessageText")
    ]
    assert edits == [
        ("Working on `it`, step 2\\.", "MarkdownV2"),
        ("Working on `it`, step 2.", None),  # refused: the same text again, plain
        ("Done: *all* of it\\.", "MarkdownV2"),  # the next edit tries MarkdownV2 again
    ]
    assert tg.messages(CHAT_A) == ["Done: all of it."]
    assert tg.entities(CHAT_A, message_id) == [("bold", "all")]


async def test_the_fake_refuses_what_telegram_refuses(tg: FakeTelegram) -> None:
    async with Bot(TG_TOKEN, base_url=tg.base_url) as bot:
        for bad in ("v1.2", "a_b", "*open", "a `b", "[x](y", "x | y"):
            with pytest.raises(BadRequest, match=r"(?i)can't parse entities"):
                await bot.send_message(CHAT_A, bad, parse_mode="MarkdownV2")
        await bot.send_message(CHAT_A, "v1\\.2 *bold* `a_b.c`", parse_mode="MarkdownV2")
    assert tg.messages(CHAT_A) == ["v1.2 bold a_b.c"]


def test_the_markdown_v2_parse() -> None:
    assert parse("*b _i_* __u__ ~s~ ||p|| [t](http://x/\\)y)") == (
        "b i u s p t",
        [
            Entity("bold", 0, 3),
            Entity("italic", 2, 1),
            Entity("underline", 4, 1),
            Entity("strikethrough", 6, 1),
            Entity("spoiler", 8, 1),
            Entity("text_link", 10, 1, "http://x/)y"),
        ],
    )
    assert parse("```py\nx = \\`1\\`\n```") == ("x = `1`\n", [Entity("pre", 0, 8, "py")])
    for bad in ("```py\nx ` y```", "*a _b* c_", "]", "\\é"):
        with pytest.raises(MarkdownV2Error):
            parse(bad)


_MARKDOWNISH = st.text(alphabet=st.sampled_from(list("ab _*[]()~`>#+-=|{}.!\\<&\n1é😀")))


@settings(max_examples=300, deadline=None)
@given(_MARKDOWNISH)
def test_any_text_and_any_streamed_prefix_renders_to_valid_markdown_v2(text: str) -> None:
    # A live edit shows a prefix of the answer: each must parse (or the adapter falls back).
    for end in range(0, len(text) + 1, 3):
        rendered = markdown_v2(text[:end])
        assert rendered is not None
        parse(rendered)
