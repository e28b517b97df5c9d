// The message box. It stays enabled while an answer streams: sending then is a steer, handled
// per the strategy picker. Enter sends, Shift+Enter adds a line, Escape stops a running answer.
import { useState } from "react";
import { type ModelInfo, STRATEGIES, type Strategy } from "../api";
import { ModelPicker, selectedNotes } from "./ModelPicker";

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
}: {
  busy: boolean;
  models: ModelInfo[];
  selectedModels: string[];
  onSelectModels: (ids: string[]) => void;
  defaultModel: string;
  strategy: Strategy;
  onStrategy: (s: Strategy) => void;
  onSend: (text: string) => Promise<boolean>;
  onStop?: () => void;
  canRegenerate?: boolean;
  onRegenerate?: () => void;
  disabled?: boolean;
  /** Show the model and strategy pickers. */
  pickers?: boolean;
}) {
  const [text, setText] = useState("");
  const notes = selectedNotes(models, selectedModels, defaultModel);

  const send = async () => {
    const value = text.trim();
    if (!value || disabled) return;
    setText("");
    const ok = await onSend(value);
    if (!ok) setText((current) => current || value); // give the text back on failure
  };

  return (
    <div className="composer">
      {notes.map((m) => (
        <div key={m.id} className="notice model-note" data-testid="model-note">
          <strong>{m.label}:</strong> {m.note}
        </div>
      ))}
      <form
        className="composer-form"
        onSubmit={(e) => {
          e.preventDefault();
          void send();
        }}
      >
        <textarea
          data-testid="composer-input"
          rows={2}
          value={text}
          placeholder={busy ? `Steer the answer (${STRATEGY_HELP[strategy]})…` : "Message Drupe…"}
          onChange={(e) => setText(e.target.value)}
          aria-label={busy ? "Steer the answer" : "Message"}
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
            <button type="button" className="ghost" data-testid="regenerate-button" onClick={onRegenerate}>
              ↻ Regenerate
            </button>
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
            disabled={disabled || !text.trim()}
            title={busy ? `Send as a steer (${strategy})` : "Send"}
          >
            {busy ? "Steer" : "Send"}
          </button>
        </div>
      </form>
    </div>
  );
}
