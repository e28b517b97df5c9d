// Conversation list: paginated, live status badges (polled), new / rename / delete. Signed in,
// a conversation shared with the user is marked "shared" and has no share button (only its
// owner or an admin shares it).
import { useState } from "react";
import type { ConversationStatus, ConversationSummary } from "../api";
import { useAuth } from "../auth";
import { conversationHash, USAGE_HASH } from "../route";
import { SearchBox } from "./SearchBox";
import { StatusBadge } from "./StatusBadge";

export function Sidebar({
  items,
  statuses,
  activeId,
  hasMore,
  error,
  onNew,
  onLoadMore,
  onRename,
  onDelete,
  onShare,
  children,
}: {
  items: ConversationSummary[];
  statuses: Record<string, ConversationStatus>;
  activeId: string | null;
  hasMore: boolean;
  error: string | null;
  onNew: () => void;
  onLoadMore: () => void;
  onRename: (id: string, title: string) => void;
  onDelete: (id: string) => void;
  /** Opens the share dialog (only when signed in: with auth off there is no one to share with). */
  onShare?: (id: string, title: string) => void;
  /** Further sections under the conversation list (the agents). */
  children?: React.ReactNode;
}) {
  return (
    <aside className="sidebar" id="sidebar" aria-label="Conversations">
      <div className="sidebar-head">
        <a className="brand" href="#/">
          Drupe
        </a>
        <a className="ghost small nav-link" href={USAGE_HASH} data-testid="usage-link">
          Usage
        </a>
        <button type="button" className="primary" data-testid="new-conversation" onClick={onNew}>
          + New
        </button>
      </div>
      <SearchBox />
      {error && <div className="notice error small">{error}</div>}
      <ul className="conversation-list" data-testid="conversation-list">
        {items.map((c) => (
          <ConversationItem
            key={c.id}
            item={c}
            status={statuses[c.id] ?? c.status}
            active={c.id === activeId}
            onRename={onRename}
            onDelete={onDelete}
            onShare={onShare}
          />
        ))}
        {items.length === 0 && !error && <li className="muted small pad">No conversations yet.</li>}
      </ul>
      {hasMore && (
        <button type="button" className="ghost load-more" onClick={onLoadMore}>
          Load more
        </button>
      )}
      {children}
    </aside>
  );
}

function ConversationItem({
  item,
  status,
  active,
  onRename,
  onDelete,
  onShare,
}: {
  item: ConversationSummary;
  status: ConversationStatus;
  active: boolean;
  onRename: (id: string, title: string) => void;
  onDelete: (id: string) => void;
  onShare?: (id: string, title: string) => void;
}) {
  const [editing, setEditing] = useState(false);
  const [confirming, setConfirming] = useState(false);
  const [draft, setDraft] = useState(item.title ?? "");
  const title = item.title || "Untitled";
  const auth = useAuth();
  const me = auth.kind === "signed-in" ? auth.user : null;
  const mine = me === null || me.role === "admin" || item.ownerId == null || item.ownerId === me.id;

  if (editing) {
    return (
      <li className="conversation-item editing" data-testid="conversation-item" data-conversation-id={item.id}>
        <form
          onSubmit={(e) => {
            e.preventDefault();
            setEditing(false);
            if (draft.trim() && draft.trim() !== item.title) onRename(item.id, draft.trim());
          }}
        >
          <input
            autoFocus
            data-testid="rename-input"
            value={draft}
            onChange={(e) => setDraft(e.target.value)}
            onBlur={() => setEditing(false)}
            onKeyDown={(e) => e.key === "Escape" && setEditing(false)}
          />
        </form>
      </li>
    );
  }
  return (
    <li
      className={`conversation-item${active ? " active" : ""}`}
      data-testid="conversation-item"
      data-conversation-id={item.id}
      data-active={active ? "true" : "false"}
    >
      <a href={conversationHash(item.id)} className="conversation-link" title={title}>
        <span className="conversation-title">{title}</span>
        {!mine && (
          <span className="role-badge" data-testid="conversation-shared" title="Shared with you">
            shared
          </span>
        )}
        <StatusBadge status={status} />
      </a>
      <span className="item-actions">
        {confirming ? (
          <>
            <button
              type="button"
              className="danger small"
              data-testid="confirm-delete-button"
              onClick={() => {
                setConfirming(false);
                onDelete(item.id);
              }}
            >
              Delete
            </button>
            <button type="button" className="ghost small" onClick={() => setConfirming(false)}>
              Cancel
            </button>
          </>
        ) : (
          <>
            <button
              type="button"
              className="ghost small"
              data-testid="rename-button"
              title="Rename"
              aria-label={`Rename ${title}`}
              onClick={() => {
                setDraft(item.title ?? "");
                setEditing(true);
              }}
            >
              ✎
            </button>
            {onShare && mine && (
              <button
                type="button"
                className="ghost small"
                data-testid="share-button"
                title="Share"
                aria-label={`Share ${title}`}
                onClick={() => onShare(item.id, title)}
              >
                ⇪
              </button>
            )}
            <button
              type="button"
              className="ghost small"
              data-testid="delete-button"
              title="Delete"
              aria-label={`Delete ${title}`}
              onClick={() => setConfirming(true)}
            >
              ✕
            </button>
          </>
        )}
      </span>
    </li>
  );
}
