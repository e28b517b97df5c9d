// The message box. It stays enabled while an answer streams: sending then is a steer, handled
// per the strategy picker. Enter sends, Shift+Enter adds a line, Escape stops a running answer.
// With `attachments`, files dropped on it, pasted into it or picked with "Attach" go with the
// message as file parts; a file over the server's budget is refused by the field, unsent.
import type { FileUIPart } from "ai";
import { useEffect, useId, useRef, useState } from "react";
import { attachmentProblem, fetchLimits, formatBytes, readAsPart } from "../attachments";
import { type ModelInfo, STRATEGIES, type Strategy } from "../api";
import { ModelPicker, selectedNotes } from "./ModelPicker";
import { RegenerateMenu } from "./RegenerateMenu";

const STRATEGY_HELP: Record<Strategy, string> = {
  enqueue: "answer it after the current answer",
  interrupt: "stop the current answer and answer this",
  reject: "refuse while busy",
  rollback: "discard the current answer and answer this instead",
};

export function Composer({
  busy,
  models,
  selectedModels,
  onSelectModels,
  defaultModel,
  strategy,
  onStrategy,
  onSend,
  onStop,
  canRegenerate,
  onRegenerate,
  disabled,
  pickers = true,
  attachments = false,
}: {
  busy: boolean;
  models: ModelInfo[];
  selectedModels: string[];
  onSelectModels: (ids: string[]) => void;
  defaultModel: string;
  strategy: Strategy;
  onStrategy: (s: Strategy) => void;
  onSend: (text: string, files: FileUIPart[]) => Promise<boolean>;
  onStop?: () => void;
  canRegenerate?: boolean;
  /** `modelId`: answer again with that model (the ▾ menu); absent: the picked models. */
  onRegenerate?: (modelId?: string) => void;
  disabled?: boolean;
  /** Show the model and strategy pickers. */
  pickers?: boolean;
  /** Accept files (drag-and-drop, paste, the Attach button). */
  attachments?: boolean;
}) {
  const [text, setText] = useState("");
  const [files, setFiles] = useState<{ part: FileUIPart; size: number }[]>([]);
  const [fileError, setFileError] = useState<string | null>(null);
  const [budget, setBudget] = useState<number | null>(null);
  const [dragging, setDragging] = useState(false);
  const picker = useRef<HTMLInputElement>(null);
  const hintId = useId();
  useEffect(() => {
    if (!attachments) return;
    fetchLimits()
      .then((l) => setBudget(l.maxAttachmentBytes))
      .catch(() => setBudget(null));
  }, [attachments]);

  const addFiles = async (list: FileList | File[]) => {
    const chosen = Array.from(list);
    if (!attachments || chosen.length === 0) return;
    if (budget === null) {
      setFileError("The server's size limit is not known yet; try again in a moment.");
      return;
    }
    const already = files.reduce((sum, f) => sum + f.size, 0);
    const problem = attachmentProblem(chosen, already, budget);
    setFileError(problem);
    if (problem) return;
    try {
      const parts = await Promise.all(chosen.map(readAsPart));
      setFiles((old) => [...old, ...parts.map((part, i) => ({ part, size: chosen[i].size }))]);
    } catch (e) {
      setFileError(e instanceof Error ? e.message : String(e));
    }
  };
  const notes = selectedNotes(models, selectedModels, defaultModel);

  const send = async () => {
    const value = text.trim();
    const sending = files;
    if ((!value && sending.length === 0) || disabled) return;
    setText("");
    setFiles([]);
    setFileError(null);
    const ok = await onSend(value, sending.map((f) => f.part));
    if (!ok) {
      setText((current) => current || value); // give the text and the files back on failure
      setFiles((current) => (current.length ? current : sending));
    }
  };

  return (
    <div className="composer">
      {notes.map((m) => (
        <div key={m.id} className="notice model-note" data-testid="model-note">
          <strong>{m.label}:</strong> {m.note}
        </div>
      ))}
      <form
        className={`composer-form${dragging ? " dragging" : ""}`}
        data-testid="composer-form"
        onSubmit={(e) => {
          e.preventDefault();
          void send();
        }}
        onDragOver={(e) => {
          if (!attachments || !e.dataTransfer.types.includes("Files")) return;
          e.preventDefault();
          setDragging(true);
        }}
        onDragLeave={() => setDragging(false)}
        onDrop={(e) => {
          if (!attachments) return;
          e.preventDefault();
          setDragging(false);
          void addFiles(e.dataTransfer.files);
        }}
      >
        <textarea
          data-testid="composer-input"
          rows={2}
          value={text}
          placeholder={busy ? `Steer the answer (${STRATEGY_HELP[strategy]})…` : "Message Drupe…"}
          onChange={(e) => setText(e.target.value)}
          aria-label={busy ? "Steer the answer" : "Message"}
          aria-describedby={attachments ? hintId : undefined}
          onPaste={(e) => {
            if (attachments && e.clipboardData.files.length > 0) {
              e.preventDefault();
              void addFiles(e.clipboardData.files);
            }
          }}
          onKeyDown={(e) => {
            if (e.key === "Enter" && !e.shiftKey && !e.nativeEvent.isComposing) {
              e.preventDefault();
              void send();
            } else if (e.key === "Escape" && busy && onStop) {
              e.preventDefault();
              onStop();
            }
          }}
        />
        {attachments && (
          <div className="attachments">
            {files.length > 0 && (
              <ul className="attachment-list" data-testid="attachment-list">
                {files.map((f, i) => (
                  <li key={i} className="attachment" data-testid="attachment">
                    {f.part.mediaType.startsWith("image/") ? (
                      <img src={f.part.url} alt="" className="attachment-thumb" />
                    ) : null}
                    <span className="small">
                      {f.part.filename} · {formatBytes(f.size)}
                    </span>
                    <button
                      type="button"
                      className="ghost small"
                      aria-label={`Remove ${f.part.filename ?? "attachment"}`}
                      onClick={() => setFiles((old) => old.filter((_, j) => j !== i))}
                    >
                      ✕
                    </button>
                  </li>
                ))}
              </ul>
            )}
            {fileError && (
              <div className="notice error small" role="alert" data-testid="attachment-error">
                {fileError}
              </div>
            )}
            <div className="muted small" id={hintId} data-testid="attachment-hint">
              Drop or paste images and files, or{" "}
              <button type="button" className="link-button" onClick={() => picker.current?.click()}>
                attach
              </button>
              {budget !== null ? ` (up to ${formatBytes(budget)} per message).` : "."}
            </div>
            <input
              ref={picker}
              type="file"
              multiple
              hidden
              data-testid="attachment-input"
              aria-label="Attach files"
              onChange={(e) => {
                if (e.target.files) void addFiles(e.target.files);
                e.target.value = "";
              }}
            />
          </div>
        )}
        <div className="composer-bar">
          {pickers && (
            <>
              <ModelPicker
                models={models}
                selected={selectedModels}
                onChange={onSelectModels}
                defaultModel={defaultModel}
              />
              <label className="strategy" title="What a message sent while an answer streams does">
                <span className="muted small">when busy</span>
                <select
                  data-testid="strategy-picker"
                  value={strategy}
                  onChange={(e) => onStrategy(e.target.value as Strategy)}
                >
                  {STRATEGIES.map((s) => (
                    <option key={s} value={s} title={STRATEGY_HELP[s]}>
                      {s}
                    </option>
                  ))}
                </select>
              </label>
            </>
          )}
          <span className="spacer" />
          {canRegenerate && onRegenerate && (
            <RegenerateMenu models={models} defaultModel={defaultModel} onRegenerate={onRegenerate} />
          )}
          {busy && onStop && (
            <button type="button" className="danger" data-testid="stop-button" onClick={onStop}>
              ■ Stop
            </button>
          )}
          <button
            type="submit"
            className="primary"
            data-testid="send-button"
            disabled={disabled || (!text.trim() && files.length === 0)}
            title={busy ? `Send as a steer (${strategy})` : "Send"}
          >
            {busy ? "Steer" : "Send"}
          </button>
        </div>
      </form>
    </div>
  );
}
