// Shown once, before the first answer: which model answers, and how to configure a real one.
import type { ModelInfo } from "../api";

export const FIRST_RUN_KEY = "drupe.firstRunSeen";

export function firstRunSeen(): boolean {
  try {
    return localStorage.getItem(FIRST_RUN_KEY) === "1";
  } catch {
    return false;
  }
}

export function markFirstRunSeen(): void {
  try {
    localStorage.setItem(FIRST_RUN_KEY, "1");
  } catch {
    // storage unavailable: the notice shows again next time
  }
}

export function FirstRunNotice({
  models,
  selectedModels,
  defaultModel,
  onDismiss,
}: {
  models: ModelInfo[];
  selectedModels: string[];
  defaultModel: string;
  onDismiss: () => void;
}) {
  const ids = selectedModels.length ? selectedModels : defaultModel ? [defaultModel] : [];
  if (!ids.length) return null;
  const answering = ids.map((id) => models.find((m) => m.id === id) ?? { id, label: id, note: null });
  const toy = answering.some((m) => m.id.startsWith("local:") || m.id.startsWith("scripted:"));
  return (
    <div className="notice first-run" role="note" data-testid="first-run-notice">
      <p>
        Answers come from{" "}
        {answering.map((m, i) => (
          <span key={m.id}>
            {i > 0 && ", "}
            <code data-testid="first-run-model">{m.id}</code>
            {m.note ? <span className="muted"> ({m.note})</span> : null}
          </span>
        ))}
        .
      </p>
      {toy && (
        <p>
          This is a demo model, not the product: it runs on your CPU with no API key and its answers are
          not meant to be good. For real answers, configure a provider and restart the server:
        </p>
      )}
      {!toy && <p>To add or change providers:</p>}
      <ul>
        <li>
          set <code>OPENAI_API_KEY</code> or <code>ANTHROPIC_API_KEY</code> (or <code>GEMINI_API_KEY</code>) in the
          server's environment, or
        </li>
        <li>
          add a <code>[providers.&lt;name&gt;]</code> table and <code>default_model</code> to{" "}
          <code>~/.config/drupe/config.toml</code> (any OpenAI-compatible server works: Ollama, vLLM, …);
        </li>
        <li>
          then <code>drupe doctor</code> says what is missing.
        </li>
      </ul>
      <button type="button" className="ghost small" data-testid="first-run-dismiss" onClick={onDismiss}>
        Got it
      </button>
    </div>
  );
}
