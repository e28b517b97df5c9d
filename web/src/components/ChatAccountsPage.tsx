// Chat accounts (`#/settings/chat-accounts`): the IM accounts the signed-in user linked to
// themselves (channel, platform user id, when), a button that makes a one-time code and shows
// the `/link <code>` command to send to a channel's bot (with a copy button and when it
// expires), and unlink. A linked account's chats act as this user instead of the channel's
// default user.
import { useCallback, useEffect, useState } from "react";
import { errorMessage } from "../api";
import { authApi, type ChatAccount, type ChatAccounts, type LinkCode } from "../auth";
import { CopyButton } from "./CopyButton";

export function ChatAccountsPage() {
  const [data, setData] = useState<ChatAccounts | null>(null);
  const [code, setCode] = useState<LinkCode | null>(null);
  const [error, setError] = useState<string | null>(null);

  const reload = useCallback(async () => {
    try {
      setData(await authApi.listChatAccounts());
    } catch (e) {
      setError(errorMessage(e));
    }
  }, []);
  useEffect(() => void reload(), [reload]);

  const makeCode = async () => {
    setError(null);
    try {
      setCode(await authApi.makeLinkCode());
    } catch (err) {
      setError(errorMessage(err));
    }
  };

  const unlink = async (account: ChatAccount) => {
    setError(null);
    try {
      await authApi.unlinkChatAccount(account);
      await reload();
    } catch (err) {
      setError(errorMessage(err));
    }
  };

  const channels = data?.channels ?? [];
  return (
    <section className="settings-page" data-testid="chat-accounts-page">
      <h2>Chat accounts</h2>
      <p className="muted small">
        Link your account on a chat platform (Telegram, Slack, a webhook) to act as yourself when you talk to
        Drupe's bot there: your chats become your conversations, with your rights.
      </p>
      <button type="button" className="primary" data-testid="link-code-make" onClick={() => void makeCode()}>
        Link a chat account
      </button>
      {code && (
        <div className="notice new-token" role="status" data-testid="link-code-box">
          <p>
            Send this to the bot from the account to link. It works once, until{" "}
            {new Date(code.expiresAt).toLocaleTimeString()}.
          </p>
          <div className="token-value">
            <code data-testid="link-command">{code.command}</code>
            <CopyButton text={code.command} label="Copy the command" testId="copy-link-command" />
          </div>
          {channels.some((c) => c.linkCommand !== "/link") && (
            <ul className="muted small" data-testid="link-commands">
              {channels.map((c) => (
                <li key={c.id}>
                  <code>{c.id}</code> ({c.type}):{" "}
                  <code>
                    {c.linkCommand} {code.code}
                  </code>
                </li>
              ))}
            </ul>
          )}
          <button
            type="button"
            className="ghost small"
            data-testid="link-code-done"
            onClick={() => {
              setCode(null);
              void reload();
            }}
          >
            Done
          </button>
        </div>
      )}
      {channels.length > 0 && (
        <p className="muted small" data-testid="chat-channels">
          Channels on this server:{" "}
          {channels.map((c, i) => (
            <span key={c.id}>
              {i > 0 && ", "}
              <code>{c.id}</code> ({c.type})
            </span>
          ))}
          .
        </p>
      )}
      {error && (
        <div className="notice error" role="alert" data-testid="chat-accounts-error">
          {error}
        </div>
      )}
      {data === null ? (
        <p className="muted">Loading…</p>
      ) : data.accounts.length === 0 ? (
        <p className="muted" data-testid="chat-accounts-empty">
          No linked chat accounts.
        </p>
      ) : (
        <table className="data-table" data-testid="chat-accounts-table">
          <thead>
            <tr>
              <th>Channel</th>
              <th>Account</th>
              <th>Linked</th>
              <th />
            </tr>
          </thead>
          <tbody>
            {data.accounts.map((a) => (
              <tr key={`${a.channel}/${a.platformUserId}`} data-testid="chat-account-row">
                <td>
                  <code>{a.channel}</code>
                </td>
                <td>
                  <code>{a.platformUserId}</code>
                </td>
                <td>{new Date(a.linkedAt).toLocaleString()}</td>
                <td>
                  <button
                    type="button"
                    className="danger small"
                    data-testid="chat-account-unlink"
                    onClick={() => void unlink(a)}
                  >
                    Unlink
                  </button>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}
