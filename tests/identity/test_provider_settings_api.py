"""Providers and models in the database (``/api/settings/...``, issue 22 §5), over a real server
with auth on and real SQLite: an admin adds a provider pointing at a loopback fake OpenAI server
and chats with its model without a restart; a member gets 403; bad input is a 422 naming the
field and stores nothing; a stored provider wins over a config.toml one of the same name and
says so; the API key is never returned; "test connection" answers ok or the error."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import anyio
import httpx
import pytest

from drupe.agent.models.overlay import LiveModelSettings
from drupe.agent.models.registry import ModelRegistry
from drupe.api.app_factory import create_app
from drupe.app import open_runtime
from drupe.settings import Settings
from drupe.testing.fake_providers import fake_openai_server
from drupe.testing.fake_replies import FakeReply
from drupe.testing.loopback import serve_app
from tests.gateway.sse import chat_body, parse_events
from tests.identity.conftest import PASSWORDS, Site

SECRET = "sk-test-0123456789-wxyz"


@pytest.fixture
async def site(tmp_path: Path) -> AsyncIterator[Site]:
    """Like the identity site, with a config.toml that defines the provider ``work``."""
    config = tmp_path / "config.toml"
    config.write_text(
        'default_model = "scripted:echo"\n'
        '[providers.work]\ntype = "openai-compatible"\nbase_url = "http://127.0.0.1:9/v1"\n'
        'models = ["from-file"]\n'
    )
    async with open_runtime(Settings(data_dir=tmp_path, config_path=config)) as runtime:
        await runtime.db.users.create("root", password=PASSWORDS["root"], role="admin")
        await runtime.db.users.create("alice", password=PASSWORDS["alice"])
        async with serve_app(create_app(runtime)) as url:
            site = Site(url, runtime)
            try:
                yield site
            finally:
                for client in site.clients.values():
                    await client.aclose()


def _by_name(items: list[dict[str, object]]) -> dict[str, dict[str, object]]:
    return {str(item["name"]): item for item in items}


async def _answer(client: httpx.AsyncClient, conversation: str, model: str) -> str:
    reply = await client.post("/api/chat", json=chat_body(conversation, "hi", models=[model]))
    assert reply.status_code == 200, reply.text
    text = ""
    for event in parse_events(reply.text):
        if event.data.startswith("{") and '"text-delta"' in event.data:
            text += json.loads(event.data)["delta"]
    return text


async def test_a_provider_added_through_the_api_answers_a_chat_turn_without_restart(
    site: Site,
) -> None:
    root = await site.sign_in("root")
    async with fake_openai_server([FakeReply(text="hello from the fake")]) as upstream:
        created = await root.post(
            "/api/settings/providers",
            json={
                "name": "lab",
                "type": "openai-compatible",
                "baseUrl": upstream,
                "apiKey": SECRET,
                "models": [{"name": "lab-1", "contextWindow": 8000}],
            },
        )
        assert created.status_code == 201, created.text
        provider = created.json()
        assert provider["source"] == "database" and provider["overrides"] is None
        assert provider["apiKey"] == {"set": True, "hint": "…wxyz"}
        assert SECRET not in created.text

        tested = await root.post("/api/settings/providers/lab/test")
        assert tested.status_code == 200, tested.text
        assert tested.json()["ok"] is True and tested.json()["models"] == 1
        assert tested.json()["latencyMs"] >= 0

        models = (await root.get("/api/models")).json()["models"]
        assert "lab:lab-1" in [m["id"] for m in models]
        assert await _answer(root, "c-lab", "lab:lab-1") == "hello from the fake"

    listed = await root.get("/api/settings/providers")
    assert SECRET not in listed.text
    assert _by_name(listed.json()["items"])["lab"]["source"] == "database"
    row = await site.runtime.db.provider_settings.get("lab")
    assert row is not None and row.api_key == SECRET and SECRET not in repr(row)


async def test_a_stored_provider_wins_over_config_toml_and_says_so(site: Site) -> None:
    root = await site.sign_in("root")
    before = _by_name((await root.get("/api/settings/providers")).json()["items"])["work"]
    assert before["source"] == "config" and before["deletable"] is False
    changed = await root.put(
        "/api/settings/providers/work",
        json={"type": "openai-compatible", "baseUrl": "http://127.0.0.1:8/v1", "models": ["db"]},
    )
    assert changed.status_code == 200, changed.text
    assert changed.json()["source"] == "database"
    assert changed.json()["overrides"] == "config.toml"
    ids = [m["id"] for m in (await root.get("/api/models")).json()["models"]]
    assert "work:db" in ids and "work:from-file" not in ids
    # Deleting the override puts the config.toml entry back in force.
    assert (await root.delete("/api/settings/providers/work")).status_code == 204
    ids = [m["id"] for m in (await root.get("/api/models")).json()["models"]]
    assert "work:from-file" in ids and "work:db" not in ids
    refused = await root.delete("/api/settings/providers/work")
    assert refused.status_code == 422 and "config.toml" in refused.json()["detail"]


@pytest.mark.parametrize(
    ("body", "field", "words"),
    [
        ({"name": "x", "type": "openai-compatible", "baseUrl": "ftp://h/v1"}, "baseUrl", "URL"),
        ({"name": "x", "type": "openai-compatible"}, "baseUrl", "needs"),
        ({"name": "x", "type": "cohere", "baseUrl": "http://h/v1"}, "type", "unknown"),
        ({"name": "Bad Name", "type": "openai"}, "name", "lowercase"),
        ({"name": "scripted", "type": "openai"}, "name", "reserved"),
        ({"name": "work", "type": "openai"}, "name", "already exists"),
        ({"name": "x", "type": "openai", "models": ["a", "a"]}, "models", "twice"),
    ],
)
async def test_bad_input_says_what_is_wrong_and_stores_nothing(
    site: Site, body: dict[str, object], field: str, words: str
) -> None:
    root = await site.sign_in("root")
    reply = await root.post("/api/settings/providers", json=body)
    assert reply.status_code == 422, reply.text
    detail = reply.json()["detail"]
    assert detail.startswith(f"{field}: ") and words in detail
    assert await site.runtime.db.provider_settings.list() == []


async def test_members_may_not_read_or_write_settings(site: Site) -> None:
    alice = await site.sign_in("alice")
    body = {"name": "mine", "type": "openai-compatible", "baseUrl": "http://127.0.0.1:9/v1"}
    assert (await alice.post("/api/settings/providers", json=body)).status_code == 403
    assert (await alice.get("/api/settings/providers")).status_code == 403
    assert (await alice.post("/api/settings/providers/work/test")).status_code == 403
    assert (
        await alice.post("/api/settings/models", json={"provider": "work", "name": "m"})
    ).status_code == 403
    assert await site.runtime.db.provider_settings.list() == []


async def test_models_are_added_to_stored_providers_and_keys_are_kept(site: Site) -> None:
    root = await site.sign_in("root")
    body = {"name": "lab", "type": "openai", "apiKey": SECRET, "models": ["a"]}
    assert (await root.post("/api/settings/providers", json=body)).status_code == 201
    added = await root.post(
        "/api/settings/models", json={"provider": "lab", "name": "b", "contextWindow": 4096}
    )
    assert added.status_code == 201, added.text
    again = await root.post("/api/settings/models", json={"provider": "lab", "name": "b"})
    assert again.status_code == 422 and again.json()["detail"].startswith("name: ")
    on_file = await root.post("/api/settings/models", json={"provider": "work", "name": "c"})
    assert on_file.status_code == 422 and "config.toml" in on_file.json()["detail"]
    items = (await root.get("/api/settings/models")).json()["items"]
    assert {(m["id"], m["contextWindow"], m["source"]) for m in items} >= {
        ("lab:a", None, "database"),
        ("lab:b", 4096, "database"),
        ("work:from-file", None, "config"),
    }
    # An edit without apiKey keeps the stored key; "" removes it.
    kept = await root.put("/api/settings/providers/lab", json={"type": "openai", "models": ["a"]})
    assert kept.json()["apiKey"] == {"set": True, "hint": "…wxyz"}
    cleared = await root.put(
        "/api/settings/providers/lab", json={"type": "openai", "apiKey": "", "models": ["a"]}
    )
    assert cleared.json()["apiKey"] == {"set": False, "hint": None}
    assert (await root.delete("/api/settings/models/lab/a")).status_code == 204
    assert (await root.delete("/api/settings/models/lab/a")).status_code == 404
    actions = [e["action"] for e in (await root.get("/api/audit")).json()["items"]]
    assert "settings.provider.create" in actions and "settings.model.delete" in actions
    assert SECRET not in (await root.get("/api/audit")).text


async def test_an_unreachable_provider_answers_the_error(site: Site) -> None:
    root = await site.sign_in("root")
    tested = await root.post("/api/settings/providers/work/test")
    assert tested.status_code == 200, tested.text
    result = tested.json()
    assert result["ok"] is False and result["error"]
    assert "connect" in result["error"].lower()


async def _soon(condition: Callable[[], bool]) -> bool:
    """True once ``condition()`` holds (polled every 20 ms for up to 5 s)."""
    for _ in range(250):
        if condition():
            return True
        await anyio.sleep(0.02)
    return condition()


async def test_another_node_following_the_database_picks_a_change_up(site: Site) -> None:
    """A second registry over the same database (another cluster node's view) follows it."""
    runtime = site.runtime
    assert runtime.model_settings is not None
    other = LiveModelSettings(
        runtime.model_settings.base,
        ModelRegistry(runtime.model_settings.base),
        runtime.db.provider_settings,
        refresh_seconds=0.05,
    )
    root = await site.sign_in("root")
    async with anyio.create_task_group() as tg:
        tg.start_soon(other.follow)
        body = {
            "name": "lab",
            "type": "openai-compatible",
            "baseUrl": "http://127.0.0.1:9/v1",
            "models": ["lab-1"],
        }
        assert (await root.post("/api/settings/providers", json=body)).status_code == 201
        assert await _soon(lambda: "lab" in other.registry.config.providers)
        assert other.registry.resolve("lab:lab-1").model_id == "lab:lab-1"
        assert (await root.delete("/api/settings/providers/lab")).status_code == 204
        assert await _soon(lambda: "lab" not in other.registry.config.providers)
        tg.cancel_scope.cancel()
