// The settings pages' API (issue 22): gateway keys (GET/POST/DELETE /api/keys, each key's usage
// from GET /api/usage's gateway.keys) and the MCP servers (GET /api/mcp). Secrets never come
// back except a new key's plaintext, in the create answer only.
import { request } from "./api";

export interface GatewayKey {
  id: string;
  name: string;
  prefix: string;
  createdAt: string;
  lastUsedAt: string | null;
  revoked: boolean;
  revokedAt: string | null;
  models: string[] | null;
  agents: string[] | null;
  requestsPerMinute: number | null;
  tokensPerDay: number | null;
  ownerId: string | null;
  ownerName: string | null;
}

export interface NewKeyBody {
  name: string;
  models?: string[];
  agents?: string[];
  requestsPerMinute?: number;
  tokensPerDay?: number;
}

export interface KeyUsage {
  keyId: string | null;
  requests: number;
  inputTokens: number;
  outputTokens: number;
  totalTokens: number;
}

export interface McpServer {
  id: string;
  name: string;
  transport: string;
  active: boolean;
  state: string;
  tool_count: number;
  tool_names: string[];
  last_error: string | null;
  retry_in_s: number | null;
  connect_attempts: number;
}

/** "a, b c" -> ["a", "b", "c"]; blank -> undefined (no limit). */
export function idList(raw: string): string[] | undefined {
  const ids = raw.split(/[\s,]+/).filter((s) => s.length > 0);
  return ids.length ? ids : undefined;
}

/** A positive whole number, undefined when blank; an Error naming the field otherwise. */
export function budget(raw: string, label: string): number | undefined {
  const text = raw.trim();
  if (!text) return undefined;
  const n = Number(text);
  if (!Number.isInteger(n) || n < 1) throw new Error(`${label} must be a whole number of at least 1`);
  return n;
}

export const settingsApi = {
  listKeys: () => request<{ items: GatewayKey[] }>("GET", "/api/keys"),
  createKey: (body: NewKeyBody) => request<GatewayKey & { key: string }>("POST", "/api/keys", body),
  revokeKey: (id: string) => request<GatewayKey>("DELETE", `/api/keys/${encodeURIComponent(id)}`),
  keyUsage: async (days: number): Promise<KeyUsage[]> =>
    (await request<{ gateway: { keys: KeyUsage[] } }>("GET", `/api/usage?days=${days}`)).gateway.keys,
  mcpServers: () => request<{ servers: McpServer[] }>("GET", "/api/mcp"),
};

// Providers & models (`/api/settings/providers`, admins): config.toml plus the database; a stored
// provider wins over a config.toml one of its name (`overrides`). The API key is write-only.
export interface ProviderModel {
  name: string;
  contextWindow: number | null;
}

export interface Provider {
  name: string;
  type: string;
  baseUrl: string | null;
  source: "database" | "config";
  overrides: "config.toml" | "built-in" | null;
  editable: boolean;
  deletable: boolean;
  apiKey: { set: boolean; hint: string | null };
  models: ProviderModel[];
  contextWindow: number | null;
}

export interface ProviderBody {
  type: string;
  baseUrl?: string;
  apiKey?: string;
  models: string[];
}

export interface ConnectionResult {
  ok: boolean;
  latencyMs: number;
  models: number | null;
  error: string | null;
}

export const PROVIDER_TYPES = ["openai-compatible", "openai", "anthropic", "google"] as const;

/** The server's "field: message" 422 detail as [field, message] (field null when unnamed). */
export function fieldError(message: string): [string | null, string] {
  const m = /^(name|type|baseUrl|apiKey|models|contextWindow|provider): (.*)$/s.exec(message);
  return m ? [m[1], m[2]] : [null, message];
}

export const providersApi = {
  list: () => request<{ items: Provider[] }>("GET", "/api/settings/providers"),
  create: (name: string, body: ProviderBody) =>
    request<Provider>("POST", "/api/settings/providers", { name, ...body }),
  update: (name: string, body: ProviderBody) =>
    request<Provider>("PUT", `/api/settings/providers/${encodeURIComponent(name)}`, body),
  remove: (name: string) => request<void>("DELETE", `/api/settings/providers/${encodeURIComponent(name)}`),
  test: (name: string) =>
    request<ConnectionResult>("POST", `/api/settings/providers/${encodeURIComponent(name)}/test`),
};
