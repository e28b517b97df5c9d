// The settings pages' tabs: gateway keys, MCP servers, providers & models and channels (admins), personal tokens
// and chat accounts (signed in), usage. Shown above each of those pages.
import { useAuth } from "../auth";
import { CHANNELS_HASH } from "../channelsApi";
import { CHAT_ACCOUNTS_HASH, KEYS_HASH, MCP_HASH, PROVIDERS_HASH, TOKENS_HASH, USAGE_HASH } from "../route";

export type SettingsTab = "keys" | "mcp" | "providers" | "channels" | "tokens" | "chat-accounts" | "usage";

export function SettingsNav({ current }: { current: SettingsTab }) {
  const auth = useAuth();
  const admin = auth.kind === "off" || (auth.kind === "signed-in" && auth.user.role === "admin");
  const tabs: [SettingsTab, string, string][] = [
    ["keys", "Gateway keys", KEYS_HASH],
    ["mcp", "MCP servers", MCP_HASH],
    ...(admin
      ? ([
          ["providers", "Providers & models", PROVIDERS_HASH],
          ["channels", "Channels", CHANNELS_HASH],
        ] as [SettingsTab, string, string][])
      : []),
    ...(auth.kind === "signed-in"
      ? ([
          ["tokens", "Personal tokens", TOKENS_HASH],
          ["chat-accounts", "Chat accounts", CHAT_ACCOUNTS_HASH],
        ] as [SettingsTab, string, string][])
      : []),
    ["usage", "Usage", USAGE_HASH],
  ];
  return (
    <nav className="settings-nav" aria-label="Settings" data-testid="settings-nav">
      {tabs.map(([tab, label, hash]) => (
        <a
          key={tab}
          href={hash}
          data-testid={`settings-tab-${tab}`}
          aria-current={tab === current ? "page" : undefined}
        >
          {label}
        </a>
      ))}
    </nav>
  );
}
