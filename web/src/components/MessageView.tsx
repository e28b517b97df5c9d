// One message of the list (user text, or an assistant answer with its parts), and the
// one-line explanation of Drupe shown on empty screens.
import type { UIMessage } from "ai";
import { useState } from "react";
import type { ModelInfo } from "../api";
import { isPlaceholder, type MessageInfo, messageText } from "../tree";
import { modelLabel } from "./Columns";
import { CopyButton } from "./CopyButton";
import { type ApprovalHandlers, MessageParts } from "./MessageParts";

export function statusNote(meta: MessageInfo | undefined): string | null {
  if (!meta) return null;
  if (meta.status === "paused") return "stopped";
  if (meta.status === "error") return "failed";
  return null;
}

export function MessageView({
  message,
  info,
  models,
  approvals,
  streaming,
  fallbackModel,
  onEdit,
  branch,
}: {
  message: UIMessage;
  info: MessageInfo | undefined;
  models: ModelInfo[];
  approvals: ApprovalHandlers;
  streaming: boolean;
  fallbackModel: string;
  /** Edit this user message and resend it as a new branch (absent: not editable now). */
  onEdit?: (text: string) => Promise<boolean>;
  /** This message's place among its siblings (edits, regenerations), when there are several. */
  branch?: { index: number; count: number; onPick: (index: number) => void };
}) {
  const [draft, setDraft] = useState<string | null>(null);
  const note = info?.status === "pending" ? null : statusNote(info);
  const placeholder = isPlaceholder(message);
  return (
    <div
      className={`message ${message.role}`}
      data-testid="message"
      data-role={message.role}
      data-message-id={message.id}
      data-status={info?.status ?? (streaming ? "streaming" : "local")}
      data-placeholder={placeholder ? "true" : undefined}
    >
      {message.role === "assistant" && (
        <div className="message-model">
          {modelLabel(models, info ? info.modelId : fallbackModel)}
          {(streaming || placeholder) && <span className="live-dot" aria-label="streaming" />}
          {note && <span className="muted small"> · {note}</span>}
        </div>
      )}
      {message.role === "user" ? (
        <>
          <UserFiles message={message} />
          {messageText(message) && <div className="plain">{messageText(message)}</div>}
        </>
      ) : placeholder ? (
        <span className="cursor" aria-label="waiting" />
      ) : (
        <MessageParts message={message} approvals={approvals} streaming={streaming} />
      )}
      {draft !== null && onEdit && (
        <form
          className="edit-form"
          data-testid="edit-form"
          onSubmit={(e) => {
            e.preventDefault();
            const text = draft.trim();
            if (!text) return;
            void onEdit(text).then((ok) => ok && setDraft(null));
          }}
        >
          <textarea
            aria-label="Edit the message"
            data-testid="edit-input"
            value={draft}
            rows={3}
            onChange={(e) => setDraft(e.target.value)}
            onKeyDown={(e) => e.key === "Escape" && setDraft(null)}
          />
          <div className="edit-actions">
            <button type="button" className="ghost small" onClick={() => setDraft(null)}>
              Cancel
            </button>
            <button type="submit" className="primary small" data-testid="edit-send" disabled={!draft.trim()}>
              Send as a new branch
            </button>
          </div>
        </form>
      )}
      {!placeholder && !streaming && messageText(message) && draft === null && (
        <div className="message-actions">
          {branch && (
            <span className="branch-nav" data-testid="branch-nav">
              <button
                type="button"
                className="ghost small"
                aria-label="Previous version"
                data-testid="branch-prev"
                disabled={branch.index === 0}
                onClick={() => branch.onPick(branch.index - 1)}
              >
                ‹
              </button>
              <span className="small" data-testid="branch-position">
                {branch.index + 1}/{branch.count}
              </span>
              <button
                type="button"
                className="ghost small"
                aria-label="Next version"
                data-testid="branch-next"
                disabled={branch.index === branch.count - 1}
                onClick={() => branch.onPick(branch.index + 1)}
              >
                ›
              </button>
            </span>
          )}
          <CopyButton text={messageText(message)} label="Copy message" testId="copy-message" />
          {onEdit && (
            <button
              type="button"
              className="ghost small copy-button"
              data-testid="edit-message"
              aria-label="Edit and resend"
              onClick={() => setDraft(messageText(message))}
            >
              Edit
            </button>
          )}
        </div>
      )}
    </div>
  );
}

export function EmptyLine() {
  return (
    <p>
      <strong>Drupe</strong> is a self-hosted AI conversation runtime: the server owns every answer,
      so you can reload, open another tab, steer or stop it mid-stream without losing a word.
    </p>
  );
}

/** The files a user sent with a message: images inline, other files as download links. */
function UserFiles({ message }: { message: UIMessage }) {
  const files = message.parts.filter((p) => p.type === "file");
  if (files.length === 0) return null;
  return (
    <div className="user-files" data-testid="message-files">
      {files.map((f, i) =>
        f.mediaType.startsWith("image/") ? (
          <img key={i} className="file-image" src={f.url} alt={f.filename ?? "image"} />
        ) : (
          <a key={i} className="file-link" href={f.url} download={f.filename}>
            {f.filename ?? f.mediaType}
          </a>
        ),
      )}
    </div>
  );
}
