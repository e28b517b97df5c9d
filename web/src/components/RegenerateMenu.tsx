// Regenerate the last answer: "↻ Regenerate" answers again with the models picked for the next
// message; the ▾ menu beside it answers again with one model chosen from those the server can
// run now (GET /api/models, `available`). The answer is a new sibling of the old one, so
// ‹ 1/2 › navigation keeps both.
import { useRef } from "react";
import type { ModelInfo } from "../api";

export function RegenerateMenu({
  models,
  defaultModel,
  onRegenerate,
}: {
  models: ModelInfo[];
  defaultModel: string;
  /** `modelId` absent: the models picked in the composer. */
  onRegenerate: (modelId?: string) => void;
}) {
  const menu = useRef<HTMLDetailsElement>(null);
  const choices = models.filter((m) => m.available);
  const pick = (modelId?: string) => {
    if (menu.current) menu.current.open = false;
    onRegenerate(modelId);
  };
  return (
    <span className="regenerate">
      <button type="button" className="ghost" data-testid="regenerate-button" onClick={() => pick()}>
        ↻ Regenerate
      </button>
      {choices.length > 0 && (
        <details className="regenerate-menu" data-testid="regenerate-menu" ref={menu}>
          <summary aria-label="Regenerate with another model" title="Regenerate with another model" />
          <div className="model-menu regenerate-models" role="menu">
            <div className="muted small">Answer again with:</div>
            {choices.map((m) => (
              <button
                key={m.id}
                type="button"
                role="menuitem"
                className="model-option ghost"
                data-testid="regenerate-model-option"
                data-model-id={m.id}
                onClick={() => pick(m.id)}
              >
                <span className="model-text">
                  <span className="model-label">
                    {m.label}
                    {m.id === defaultModel && <span className="muted small"> · default</span>}
                  </span>
                  <span className="model-id">{m.id}</span>
                </span>
              </button>
            ))}
          </div>
        </details>
      )}
    </span>
  );
}
