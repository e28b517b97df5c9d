// The channels page (#/channels): each IM channel's type, state, target, allow-lists, last error
// and bound chats (each links to its conversation or agent session). Re-read every 5 s.
import { useCallback, useEffect, useState } from "react";
import { errorMessage } from "../api";
import { type Channel, listChannels } from "../channelsApi";
import { conversationHash } from "../route";
import "../channels.css";

const REFRESH_MS = 5000;

export function ChannelsPage() {
  const [channels, setChannels] = useState<Channel[] | null>(null);
  const [error, setError] = useState<string | null>(null);

  const reload = useCallback(async () => {
    try {
      setChannels(await listChannels());
      setError(null);
    } catch (e) {
      setError(errorMessage(e));
    }
  }, []);

  useEffect(() => {
    void reload();
    const timer = setInterval(() => void reload(), REFRESH_MS);
    return () => clearInterval(timer);
  }, [reload]);

  return (
    <section className="channels-page" data-testid="channels-page">
      <header className="chat-head">
        <h1 className="chat-title">Channels</h1>
        <span className="spacer" />
        <button type="button" className="ghost small" data-testid="channels-refresh" onClick={() => void reload()}>
          Refresh
        </button>
      </header>
      <div className="channels-body">
        {error && (
          <div className="notice error" role="alert" data-testid="channels-error">
            {error}
          </div>
        )}
        {channels && channels.length === 0 && (
          <p className="muted" data-testid="channels-empty">
            No channels. Add a <code>[channels.&lt;id&gt;]</code> table to config.toml (see
            docs/lifecycles/channels.md) and restart Drupe.
          </p>
        )}
        {channels?.map((c) => <ChannelCard key={c.id} channel={c} />)}
      </div>
    </section>
  );
}

function ChannelCard({ channel: c }: { channel: Channel }) {
  return (
    <article className="channel-card" data-testid="channel-card" data-channel-id={c.id} data-state={c.state}>
      <div className="channel-head">
        <span className="channel-name">{c.id}</span>
        <span className="channel-type">{c.type}</span>
        <span className={`channel-state state-${c.state}`} data-testid="channel-state">
          {c.state}
        </span>
        <span className="spacer" />
        <span className="muted small" data-testid="channel-target">
          {c.target}
        </span>
      </div>
      {c.lastError && (
        <div className="notice error small" data-testid="channel-error">
          Last error: {c.lastError}
        </div>
      )}
      <dl className="channel-facts">
        <dt>Token</dt>
        <dd>{c.tokenEnv ? `$${c.tokenEnv}` : "—"}</dd>
        <dt>Secret</dt>
        <dd>{c.secretEnv ? `$${c.secretEnv}` : "—"}</dd>
        <dt>Allowed users</dt>
        <dd data-testid="channel-allowed-users">{c.allowedUsers.join(", ") || "nobody"}</dd>
        <dt>Allowed chats</dt>
        <dd>{c.allowedChats.join(", ") || "none"}</dd>
        <dt>Debounce</dt>
        <dd>{c.debounce} s</dd>
        <dt>Refused</dt>
        <dd data-testid="channel-refused">{c.refused}</dd>
      </dl>
      <h2 className="channel-subtitle">Chats</h2>
      {c.chats.length === 0 ? (
        <p className="muted small">No chat has talked to this channel yet.</p>
      ) : (
        <ul className="channel-chats">
          {c.chats.map((chat) => (
            <li key={chat.chatId} data-testid="channel-chat" data-chat-id={chat.chatId}>
              <a href={conversationHash(chat.conversationId)}>{chat.chatId}</a>
              <span className="muted small">
                {" "}
                → {chat.conversationId} ({chat.target})
                {c.activeChats.includes(chat.chatId) ? " · active" : ""}
              </span>
            </li>
          ))}
        </ul>
      )}
    </article>
  );
}
