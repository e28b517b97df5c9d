// The sidebar's form that creates an agent (name, driver, model, workspace, instructions);
// `onCreate` answers whether it was created (the form is then emptied).
import { useState } from "react";
import type { ModelInfo } from "../api";
import type { DriverList, NewAgent } from "../agentsApi";

export function AgentForm({
  drivers,
  models,
  defaultModel,
  onCreate,
}: {
  drivers: DriverList;
  models: ModelInfo[];
  defaultModel: string;
  onCreate: (body: NewAgent) => Promise<boolean>;
}) {
  const [name, setName] = useState("");
  const [driverType, setDriverType] = useState("inprocess");
  const [modelId, setModelId] = useState("");
  const [workspace, setWorkspace] = useState("");
  const [instructions, setInstructions] = useState("");
  const [sending, setSending] = useState(false);
  const driverTypes = drivers.items.length ? drivers.items.map((d) => d.type) : ["inprocess"];

  return (
    <form
      className="agent-form"
      data-testid="agent-form"
      onSubmit={async (e) => {
        e.preventDefault();
        if (!name.trim() || sending) return;
        setSending(true);
        const body: NewAgent = { name: name.trim(), driverType };
        if (modelId.trim()) body.modelId = modelId.trim();
        if (workspace.trim()) body.workspace = workspace.trim();
        if (instructions.trim()) body.instructions = instructions.trim();
        const ok = await onCreate(body);
        setSending(false);
        if (ok) setName("");
      }}
    >
      <input
        autoFocus
        data-testid="agent-name"
        aria-label="Agent name"
        placeholder="Name"
        value={name}
        onChange={(e) => setName(e.target.value)}
      />
      <select data-testid="agent-driver" aria-label="Driver" value={driverType} onChange={(e) => setDriverType(e.target.value)}>
        {driverTypes.map((t) => (
          <option key={t} value={t}>
            {t}
          </option>
        ))}
      </select>
      <input
        data-testid="agent-model"
        aria-label="Model"
        list="agent-model-ids"
        placeholder={`Model (default ${defaultModel || "the server's"})`}
        value={modelId}
        onChange={(e) => setModelId(e.target.value)}
      />
      <datalist id="agent-model-ids">
        {models.map((m) => (
          <option key={m.id} value={m.id}>
            {m.label}
          </option>
        ))}
      </datalist>
      <input
        data-testid="agent-workspace"
        aria-label="Workspace"
        placeholder="Workspace (absolute path; default: in the data dir)"
        value={workspace}
        onChange={(e) => setWorkspace(e.target.value)}
      />
      <textarea
        data-testid="agent-instructions"
        aria-label="Instructions"
        rows={2}
        placeholder="Instructions (optional)"
        value={instructions}
        onChange={(e) => setInstructions(e.target.value)}
      />
      <button type="submit" className="primary small" data-testid="create-agent" disabled={!name.trim() || sending}>
        Create agent
      </button>
    </form>
  );
}
