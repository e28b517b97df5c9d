// MCP servers (`#/settings/mcp`, read-only): each configured server's state, transport, its
// tools (the names the model calls), connect attempts and last error. config.toml sets them.
import { useEffect, useState } from "react";
import { errorMessage } from "../api";
import { type McpServer, settingsApi } from "../settingsApi";

export function McpPage() {
  const [servers, setServers] = useState<McpServer[] | null>(null);
  const [error, setError] = useState<string | null>(null);
  useEffect(() => {
    let cancelled = false;
    const load = () =>
      settingsApi
        .mcpServers()
        .then((r) => !cancelled && (setServers(r.servers), setError(null)))
        .catch((e) => !cancelled && setError(errorMessage(e)));
    void load();
    const timer = setInterval(load, 5000); // states change as servers connect and fail
    return () => {
      cancelled = true;
      clearInterval(timer);
    };
  }, []);
  return (
    <section className="settings-page" data-testid="mcp-page">
      <h2>MCP servers</h2>
      <p className="muted small">
        Configured in <code>config.toml</code> (<code>[mcp.servers.&lt;id&gt;]</code>); this page shows their live state.
      </p>
      {error && (
        <div className="notice error" role="alert" data-testid="mcp-error">
          {error}
        </div>
      )}
      {servers === null ? (
        !error && <p className="muted">Loading…</p>
      ) : servers.length === 0 ? (
        <p className="muted" data-testid="mcp-empty">
          No MCP servers are configured.
        </p>
      ) : (
        <div className="settings-cards">
          {servers.map((s) => (
            <article key={s.id} className="settings-card" data-testid="mcp-server" data-server-id={s.id} data-state={s.state}>
              <header>
                <strong>{s.name}</strong> <code className="muted">{s.id}</code>
                <span className={`state-pill state-${s.state}`} data-testid="mcp-state">
                  {s.state}
                </span>
              </header>
              <p className="muted small">
                {s.transport} · {s.tool_count} tool{s.tool_count === 1 ? "" : "s"} · {s.connect_attempts} connect
                attempt{s.connect_attempts === 1 ? "" : "s"}
                {s.retry_in_s != null && ` · retry in ${Math.ceil(s.retry_in_s)} s`}
              </p>
              {s.last_error && (
                <p className="notice error small" data-testid="mcp-last-error">
                  {s.last_error}
                </p>
              )}
              {s.tool_names.length > 0 && (
                <ul className="tool-list" data-testid="mcp-tools">
                  {s.tool_names.map((t) => (
                    <li key={t}>
                      <code>{t}</code>
                    </li>
                  ))}
                </ul>
              )}
            </article>
          ))}
        </div>
      )}
    </section>
  );
}
