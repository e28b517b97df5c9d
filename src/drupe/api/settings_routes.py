"""Providers and models over HTTP, kept in the database and overlaid on config.toml (issue 22 §5).

Every route is an admin's (a member gets 403; nothing here is a member's business).

* ``GET /api/settings/providers``: ``{"items": [provider]}``: the stored providers, the
  config.toml ones and the built-ins that are set up (a key in the environment). A provider is
  ``{name, type, baseUrl, source: "database"|"config", overrides: "config.toml"|"built-in"|null,
  editable, apiKey: {set, hint}, models: [{name, contextWindow}], contextWindow}``.
  ``source`` says where the entry in force comes from; **a stored provider wins over a
  config.toml one of the same name**, and ``overrides`` names what it hides. The API key is
  write-only: ``hint`` is ``"…"`` plus its last 4 characters, never more.
* ``POST /api/settings/providers`` ``{name, type, baseUrl?, apiKey?, models?, contextWindow?}``:
  201 and the provider. ``PUT /api/settings/providers/{name}`` (same body, no ``name``): the
  provider; on a config.toml or built-in name it stores an override. An absent ``apiKey``
  keeps the stored key, ``""`` removes it. ``DELETE``: 204 (a stored override is removed and
  the config.toml entry is in force again; a config.toml-only name is 422).
* ``POST /api/settings/providers/{name}/test``: ``{ok, latencyMs, models, error}``: one real
  call through the provider's SDK (``drupe.agent.models.connection_check``), at most 5 s.
* ``GET /api/settings/models``: ``{"items": [{id, provider, name, contextWindow, source}]}``.
  ``POST /api/settings/models`` ``{provider, name, contextWindow?}``: 201;
  ``PUT /api/settings/models/{provider}/{name}`` ``{contextWindow}``; ``DELETE`` the same: 204.
  Models are added to stored providers only (422 naming the way out otherwise).

Bad input is a 422 whose ``detail`` starts with the field it is about (``"baseUrl: ..."``);
everything is checked before anything is written, so nothing is half-saved. A write rebuilds
the model registry at once (``LiveModelSettings.reload``): no restart. Every write is audited
(never with the key).
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path, Request, Response
from pydantic import BaseModel, Field

from drupe.admission.principal import Principal
from drupe.agent.models.config import ProviderConfig
from drupe.agent.models.connection_check import check_connection
from drupe.agent.models.overlay import LiveModelSettings, check_setting, overridden_source
from drupe.api.auth_routes import client_address
from drupe.app.runtime import Runtime
from drupe.errors import ConfigError, NotFoundError, ValidationError
from drupe.http.state import get_runtime, require_admin
from drupe.persistence.provider_settings import ProviderSetting

__all__ = ["router"]

router = APIRouter(tags=["settings"])

_Admin = Annotated[Principal, Depends(require_admin)]
_Name = Annotated[str, Path(max_length=64)]
_ModelName = Annotated[str, Path(max_length=200)]
_TEST_LIMIT_S = 5.0


class ModelBody(BaseModel):
    name: str = Field(min_length=1, max_length=200)
    contextWindow: int | None = None


class ProviderBody(BaseModel):
    type: str = Field(max_length=32)
    baseUrl: str | None = Field(default=None, max_length=2000)
    apiKey: str | None = Field(default=None, max_length=4000)
    models: list[ModelBody | str] = Field(default_factory=list, max_length=500)
    contextWindow: int | None = None


class NewProvider(ProviderBody):
    name: str = Field(min_length=1, max_length=64)


class NewModel(ModelBody):
    provider: str = Field(min_length=1, max_length=64)


class ModelChange(BaseModel):
    contextWindow: int | None = None


def _live(runtime: Runtime) -> LiveModelSettings:
    if runtime.model_settings is None:
        raise ConfigError("model settings are not available on this server")
    return runtime.model_settings


def _setting(name: str, body: ProviderBody, api_key: str | None) -> ProviderSetting:
    models = tuple(
        (m, None) if isinstance(m, str) else (m.name, m.contextWindow) for m in body.models
    )
    setting = ProviderSetting(
        name=name,
        type=body.type,
        base_url=body.baseUrl.strip() if body.baseUrl and body.baseUrl.strip() else None,
        api_key=api_key or None,
        models=models,
        context_window=body.contextWindow,
    )
    check_setting(setting)
    return setting


def _hint(key: str | None) -> str | None:
    return "…" + key[-4:] if key and len(key) >= 8 else ("…" if key else None)


def _provider_json(live: LiveModelSettings, provider: ProviderConfig) -> dict[str, Any]:
    stored = provider.source == "database"
    return {
        "name": provider.name,
        "type": provider.type,
        "baseUrl": provider.base_url,
        "source": "database" if stored else "config",
        "overrides": overridden_source(live.base, provider.name) if stored else None,
        "editable": True,
        "deletable": stored,
        "apiKey": {"set": bool(provider.api_key), "hint": _hint(provider.api_key)},
        "models": [{"name": m.name, "contextWindow": m.context_window} for m in provider.models],
        "contextWindow": provider.context_window,
    }


def _shown(provider: ProviderConfig) -> bool:
    return provider.source != "builtin" or provider.is_configured


async def _audit(request: Request, caller: Principal, action: str, target: str) -> None:
    await get_runtime(request).db.audit.record(
        action,
        actor_id=caller.user_id,
        actor_name=caller.name,
        target=target,
        address=client_address(request),
    )


def _provider(live: LiveModelSettings, name: str) -> ProviderConfig:
    provider = live.registry.config.providers.get(name)
    if provider is None:
        raise NotFoundError("provider", name, f"no provider named {name!r}")
    return provider


@router.get("/api/settings/providers")
async def list_providers(request: Request, _caller: _Admin) -> dict[str, Any]:
    live = _live(get_runtime(request))
    await live.reload()
    providers = live.registry.config.providers.values()
    return {"items": [_provider_json(live, p) for p in providers if _shown(p)]}


@router.post("/api/settings/providers", status_code=201)
async def create_provider(request: Request, body: NewProvider, caller: _Admin) -> dict[str, Any]:
    runtime = get_runtime(request)
    live = _live(runtime)
    setting = _setting(body.name, body, body.apiKey)
    existing = live.registry.config.providers.get(setting.name)
    if existing is not None and _shown(existing):
        where = "the database" if existing.source == "database" else "config.toml"
        raise ValidationError(
            f"name: a provider named {setting.name!r} already exists (in {where}); edit it instead"
        )
    await runtime.db.provider_settings.create(setting)
    await live.reload()
    await _audit(request, caller, "settings.provider.create", setting.name)
    return _provider_json(live, _provider(live, setting.name))


@router.put("/api/settings/providers/{name}")
async def update_provider(
    request: Request, name: _Name, body: ProviderBody, caller: _Admin
) -> dict[str, Any]:
    runtime = get_runtime(request)
    live = _live(runtime)
    current = live.registry.config.providers.get(name)
    if current is None:
        raise NotFoundError("provider", name, f"no provider named {name!r}")
    stored = await runtime.db.provider_settings.get(name)
    kept_key = stored.api_key if stored is not None else current.api_key
    setting = _setting(name, body, kept_key if body.apiKey is None else body.apiKey)
    if not await runtime.db.provider_settings.replace(setting):
        await runtime.db.provider_settings.create(setting)
    await live.reload()
    await _audit(request, caller, "settings.provider.update", name)
    return _provider_json(live, _provider(live, name))


@router.delete("/api/settings/providers/{name}", status_code=204)
async def delete_provider(request: Request, name: _Name, caller: _Admin) -> Response:
    runtime = get_runtime(request)
    live = _live(runtime)
    if not await runtime.db.provider_settings.delete(name):
        if name in live.registry.config.providers:
            raise ValidationError(
                f"name: provider {name!r} comes from config.toml (or the environment); "
                "remove it there"
            )
        raise NotFoundError("provider", name, f"no provider named {name!r}")
    await live.reload()
    await _audit(request, caller, "settings.provider.delete", name)
    return Response(status_code=204)


@router.post("/api/settings/providers/{name}/test")
async def test_provider(request: Request, name: _Name, _caller: _Admin) -> dict[str, object]:
    live = _live(get_runtime(request))
    await live.reload()
    result = await check_connection(_provider(live, name), limit_s=_TEST_LIMIT_S)
    return result.to_json()


@router.get("/api/settings/models")
async def list_models(request: Request, _caller: _Admin) -> dict[str, Any]:
    live = _live(get_runtime(request))
    await live.reload()
    items = [
        {
            "id": f"{p.name}:{m.name}",
            "provider": p.name,
            "name": m.name,
            "contextWindow": m.context_window,
            "source": "database" if p.source == "database" else "config",
        }
        for p in live.registry.config.providers.values()
        if _shown(p)
        for m in p.models
    ]
    return {"items": items}


async def _stored(runtime: Runtime, name: str) -> ProviderSetting:
    stored = await runtime.db.provider_settings.get(name)
    if stored is not None:
        return stored
    if name in _live(runtime).registry.config.providers:
        raise ValidationError(
            f"provider: {name!r} comes from config.toml (or the environment); edit it under "
            "Providers first to store an override, then add models to it"
        )
    raise ValidationError(f"provider: there is no provider named {name!r}")


async def _save_models(
    request: Request,
    caller: Principal,
    stored: ProviderSetting,
    models: tuple[tuple[str, int | None], ...],
    action: str,
    target: str,
) -> None:
    runtime = get_runtime(request)
    setting = ProviderSetting(
        name=stored.name,
        type=stored.type,
        base_url=stored.base_url,
        api_key=stored.api_key,
        models=models,
        context_window=stored.context_window,
    )
    check_setting(setting)
    await runtime.db.provider_settings.replace(setting)
    await _live(runtime).reload()
    await _audit(request, caller, action, target)


@router.post("/api/settings/models", status_code=201)
async def create_model(request: Request, body: NewModel, caller: _Admin) -> dict[str, Any]:
    stored = await _stored(get_runtime(request), body.provider)
    if any(name == body.name for name, _ in stored.models):
        raise ValidationError(f"name: {body.provider!r} already has a model {body.name!r}")
    models = (*stored.models, (body.name, body.contextWindow))
    target = f"{body.provider}:{body.name}"
    await _save_models(request, caller, stored, models, "settings.model.create", target)
    return {
        "id": target,
        "provider": body.provider,
        "name": body.name,
        "contextWindow": body.contextWindow,
        "source": "database",
    }


@router.put("/api/settings/models/{provider}/{name}")
async def update_model(
    request: Request, provider: _Name, name: _ModelName, body: ModelChange, caller: _Admin
) -> dict[str, Any]:
    stored = await _stored(get_runtime(request), provider)
    if not any(n == name for n, _ in stored.models):
        raise NotFoundError("model", name, f"provider {provider!r} has no model {name!r}")
    models = tuple((n, body.contextWindow if n == name else w) for n, w in stored.models)
    target = f"{provider}:{name}"
    await _save_models(request, caller, stored, models, "settings.model.update", target)
    return {
        "id": target,
        "provider": provider,
        "name": name,
        "contextWindow": body.contextWindow,
        "source": "database",
    }


@router.delete("/api/settings/models/{provider}/{name}", status_code=204)
async def delete_model(
    request: Request, provider: _Name, name: _ModelName, caller: _Admin
) -> Response:
    stored = await _stored(get_runtime(request), provider)
    models = tuple((n, w) for n, w in stored.models if n != name)
    if len(models) == len(stored.models):
        raise NotFoundError("model", name, f"provider {provider!r} has no model {name!r}")
    await _save_models(
        request, caller, stored, models, "settings.model.delete", f"{provider}:{name}"
    )
    return Response(status_code=204)
