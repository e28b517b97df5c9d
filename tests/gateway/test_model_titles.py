"""Titles written by a title model after the first answer (``drupe.api.model_titles``).

The title model is scripted: ``scripted:lorem?words=3`` always answers "Lorem ipsum dolor.",
which the first-words rule could never produce, so a title equal to "Lorem ipsum dolor" proves
the model was asked (after the answer) and its reply cleaned. The app's titler is entered by
hand (``httpx.ASGITransport`` runs no lifespan).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import httpx
import pytest
from fastapi import FastAPI

from drupe.agent.models.config import parse_model_config
from drupe.agent.models.registry import ModelRegistry
from drupe.agent.titling import clean_title, title_prompt
from drupe.api.model_titles import Titler
from drupe.errors import ConfigError
from drupe.settings import Settings
from tests.gateway.conftest import make_settings
from tests.gateway.sse import chat_body

QUESTION = "how do okapis sleep in the rainforest at night"
FIRST_WORDS = "how do okapis sleep in the rainforest at…"


def settings_with(tmp_path: Path, title_model: str) -> Settings:
    settings = make_settings(tmp_path)
    assert settings.config_path is not None
    settings.config_path.write_text(
        f'default_model = "scripted:echo"\ntitle_model = "{title_model}"\n'
    )
    return settings


@pytest.fixture
def settings(tmp_path: Path, request: pytest.FixtureRequest) -> Settings:
    return settings_with(tmp_path, getattr(request, "param", "scripted:lorem?words=3"))


@pytest.fixture
async def titler(app: FastAPI) -> AsyncIterator[Titler]:
    titler: Titler = app.state.titler
    async with titler:
        yield titler


async def settle(titler: Titler) -> None:
    for _ in range(500):
        if not titler.running:
            return
        await anyio.sleep(0.02)
    raise AssertionError("the title task did not end within 10 s")


async def title_of(client: httpx.AsyncClient, cid: str) -> str | None:
    title: str | None = (await client.get(f"/api/conversations/{cid}")).json()["title"]
    return title


async def test_the_title_model_names_the_conversation_after_the_first_answer(
    client: httpx.AsyncClient, titler: Titler
) -> None:
    cid = (await client.post("/api/conversations", json={})).json()["id"]
    response = await client.post("/api/chat", json=chat_body(cid, QUESTION))
    assert response.status_code == 200
    await settle(titler)
    assert await title_of(client, cid) == "Lorem ipsum dolor"
    assert (await client.get("/api/status")).json()["titled"] == 1

    # later messages keep it
    await client.post("/api/chat", json=chat_body(cid, "and by day?", message_id="m2"))
    await settle(titler)
    assert await title_of(client, cid) == "Lorem ipsum dolor"
    assert titler.titled == 1


@pytest.mark.parametrize("settings", ["scripted:error"], indirect=True)
async def test_a_failing_title_model_leaves_the_first_words(
    client: httpx.AsyncClient, titler: Titler
) -> None:
    cid = (await client.post("/api/conversations", json={})).json()["id"]
    assert (await client.post("/api/chat", json=chat_body(cid, QUESTION))).status_code == 200
    await settle(titler)
    answer = (await client.get(f"/api/conversations/{cid}")).json()["messages"][1]
    assert answer["status"] == "success"  # the answer never depends on the title
    assert await title_of(client, cid) == FIRST_WORDS
    assert titler.titled == 0


@pytest.mark.parametrize("settings", ["off"], indirect=True)
async def test_off_keeps_the_first_words(client: httpx.AsyncClient, titler: Titler) -> None:
    cid = (await client.post("/api/conversations", json={})).json()["id"]
    await client.post("/api/chat", json=chat_body(cid, QUESTION))
    assert titler.running == 0  # nothing was started
    assert await title_of(client, cid) == FIRST_WORDS


async def test_a_rename_wins_over_the_title_model(client: httpx.AsyncClient, app: FastAPI) -> None:
    runtime = app.state.runtime
    cid = (await client.post("/api/conversations", json={})).json()["id"]
    await client.post("/api/chat", json=chat_body(cid, QUESTION))  # titler not entered: no task
    assert await title_of(client, cid) == FIRST_WORDS
    await client.patch(f"/api/conversations/{cid}", json={"title": "Mine"})
    assert not await runtime.db.conversations.replace_title(cid, FIRST_WORDS, "Lorem")
    assert await title_of(client, cid) == "Mine"
    assert await runtime.db.conversations.replace_title(cid, "Mine", "Theirs")


def test_which_model_titles() -> None:
    def title_model(data: dict[str, str]) -> str | None:
        return ModelRegistry(parse_model_config(data, env={})).title_model_id()

    assert title_model({"default_model": "scripted:echo"}) is None
    assert title_model({"default_model": "local:gemma-3-270m"}) is None
    assert title_model({"default_model": "openai:gpt-4.1-mini"}) == "openai:gpt-4.1-mini"
    both = {"default_model": "openai:gpt-4.1", "title_model": "openai:gpt-4.1-mini"}
    assert title_model(both) == "openai:gpt-4.1-mini"
    assert title_model({"default_model": "openai:gpt-4.1", "title_model": "OFF"}) is None
    assert title_model({"default_model": "scripted:echo", "title_model": "scripted:lorem"}) == (
        "scripted:lorem"
    )
    for bad in ("", "  "):
        with pytest.raises(ConfigError, match="title_model"):
            parse_model_config({"title_model": bad}, env={})


def test_clean_title() -> None:
    assert clean_title('Title: "Okapis at night".\nmore') == "Okapis at night"
    assert clean_title("\n\n  **Sleeping okapis**  ") == "Sleeping okapis"
    assert clean_title("\u201cNight in the forest\u201d") == "Night in the forest"
    assert clean_title(" \n ") is None
    prompt = title_prompt("u" * 5000, "a" * 5000)
    assert "u" * 2000 in prompt and "u" * 2001 not in prompt
    assert "a" * 2000 in prompt and "a" * 2001 not in prompt
