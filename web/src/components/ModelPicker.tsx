// Multi-select of models from GET /api/models. Each model's note is shown plainly (the default
// local model's note explains that it is a base model and how to configure a real provider).
import type { ModelInfo } from "../api";

export function ModelPicker({
  models,
  selected,
  onChange,
  defaultModel,
}: {
  models: ModelInfo[];
  selected: string[];
  onChange: (ids: string[]) => void;
  defaultModel: string;
}) {
  const label =
    selected.length === 0
      ? `${models.find((m) => m.id === defaultModel)?.label ?? "Default model"} (default)`
      : selected.length === 1
        ? (models.find((m) => m.id === selected[0])?.label ?? selected[0])
        : `${selected.length} models`;
  const toggle = (id: string, on: boolean) => {
    const next = on ? [...selected.filter((s) => s !== id), id] : selected.filter((s) => s !== id);
    // keep the models' listed order so columns are stable
    onChange(models.map((m) => m.id).filter((m) => next.includes(m)));
  };
  return (
    <details className="model-picker" data-testid="model-picker">
      <summary title="Models that answer the next message (several = side-by-side answers)">
        {label}
      </summary>
      <div className="model-menu">
        {models.length === 0 && <div className="muted">No models reported by the server.</div>}
        {models.map((m) => (
          <label
            key={m.id}
            className={`model-option${m.available ? "" : " unavailable"}`}
            data-testid="model-option"
            data-model-id={m.id}
          >
            <input
              type="checkbox"
              checked={selected.includes(m.id)}
              disabled={!m.available && !selected.includes(m.id)}
              onChange={(e) => toggle(m.id, e.target.checked)}
            />
            <span className="model-text">
              <span className="model-label">
                {m.label}
                {m.id === defaultModel && <span className="muted small"> · default</span>}
              </span>
              <span className="model-id">{m.id}</span>
              {!m.available && <span className="model-unavailable">unavailable</span>}
              {m.note && <span className="model-note-inline">{m.note}</span>}
            </span>
          </label>
        ))}
        <div className="muted small">Select several models to compare their answers side by side.</div>
      </div>
    </details>
  );
}

/** The notes of the selected models (or of the default when nothing is selected). */
export function selectedNotes(models: ModelInfo[], selected: string[], fallback: string): ModelInfo[] {
  const ids = selected.length ? selected : [fallback];
  return models.filter((m) => ids.includes(m.id) && m.note);
}
