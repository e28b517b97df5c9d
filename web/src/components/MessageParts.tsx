// Renders the parts of one UIMessage: markdown text, collapsible reasoning, tool calls (with
// approve / deny on approval requests), data-error notices, files and sources.
import { getToolName, isToolUIPart, type UIMessage } from "ai";
import { Markdown } from "./Markdown";

type Part = UIMessage["parts"][number];

export interface ApprovalHandlers {
  /** approvalId -> the decision already sent from this tab. */
  decided: ReadonlyMap<string, boolean>;
  onDecision: (approvalId: string, approved: boolean) => void;
}

export function MessageParts({
  message,
  approvals,
  streaming,
}: {
  message: UIMessage;
  approvals: ApprovalHandlers;
  streaming: boolean;
}) {
  const parts = message.parts;
  if (parts.length === 0 && streaming) return <span className="cursor" aria-label="waiting" />;
  return (
    <>
      {parts.map((part, i) => (
        <PartView key={i} part={part} approvals={approvals} streaming={streaming} />
      ))}
    </>
  );
}

function PartView({
  part,
  approvals,
  streaming,
}: {
  part: Part;
  approvals: ApprovalHandlers;
  streaming: boolean;
}) {
  if (part.type === "text") return <Markdown text={part.text} />;
  if (part.type === "reasoning") {
    const live = part.state === "streaming";
    return (
      <details className="reasoning" data-testid="reasoning" open={live || undefined}>
        <summary>{live ? "Thinking…" : "Reasoning"}</summary>
        <div className="reasoning-text">{part.text}</div>
      </details>
    );
  }
  if (isToolUIPart(part)) return <ToolPart part={part} approvals={approvals} />;
  if (part.type === "data-error") return <ErrorNotice data={part.data} />;
  if (part.type === "file") {
    if (part.mediaType.startsWith("image/")) {
      return <img className="file-image" src={part.url} alt={part.filename ?? "image"} />;
    }
    return (
      <a className="file-link" href={part.url} download={part.filename}>
        {part.filename ?? part.mediaType}
      </a>
    );
  }
  if (part.type === "source-url") {
    return (
      <a className="source" href={part.url} target="_blank" rel="noreferrer noopener">
        {part.title ?? part.url}
      </a>
    );
  }
  if (part.type === "source-document") {
    return <span className="source">{part.title}</span>;
  }
  if (part.type === "data-compaction-anchor") {
    return <div className="divider">earlier context compacted</div>;
  }
  void streaming;
  return null; // step-start and unknown data parts have no visual
}

type ToolPartT = Extract<Part, { type: `tool-${string}` } | { type: "dynamic-tool" }>;

const STATE_LABEL: Record<string, string> = {
  "input-streaming": "preparing",
  "input-available": "running",
  "approval-requested": "needs approval",
  "approval-responded": "approved, waiting",
  "output-available": "done",
  "output-error": "error",
  "output-denied": "denied",
};

function ToolPart({ part, approvals }: { part: ToolPartT; approvals: ApprovalHandlers }) {
  const name = getToolName(part);
  const approvalId = "approval" in part && part.approval ? part.approval.id : undefined;
  const decided = approvalId != null ? approvals.decided.get(approvalId) : undefined;
  // A preliminary output is a running tool's progress (an A2A agent's, say), not its result.
  const preliminary = part.state === "output-available" && "preliminary" in part && part.preliminary === true;
  let stateLabel = preliminary ? "running" : (STATE_LABEL[part.state] ?? part.state);
  if (part.state === "approval-responded" && "approval" in part && part.approval) {
    stateLabel = part.approval.approved ? "approved, waiting" : "denied, waiting";
  }
  const open = part.state === "approval-requested" || part.state === "output-error";
  return (
    <details
      className={`tool-part state-${part.state}`}
      data-testid="tool-part"
      data-tool-name={name}
      data-state={part.state}
      data-preliminary={preliminary ? "true" : undefined}
      open={open || undefined}
    >
      <summary>
        <span className="tool-name">{name}</span>
        <span className="tool-state">{stateLabel}</span>
      </summary>
      {part.input !== undefined && (
        <Section label="Input">
          <pre>{pretty(part.input)}</pre>
        </Section>
      )}
      {part.state === "output-available" && (
        <Section label={preliminary ? "Progress" : "Output"}>
          <pre>{pretty(part.output)}</pre>
        </Section>
      )}
      {part.state === "output-error" && (
        <Section label="Error">
          <pre className="error-text">{part.errorText}</pre>
        </Section>
      )}
      {part.state === "output-denied" && part.approval?.reason && (
        <Section label="Reason">{part.approval.reason}</Section>
      )}
      {part.state === "approval-requested" && approvalId != null && (
        <div className="approval">
          {decided === undefined ? (
            <>
              <span>Allow this tool call?</span>
              <button
                type="button"
                className="primary"
                data-testid="approve-button"
                onClick={() => approvals.onDecision(approvalId, true)}
              >
                Approve
              </button>
              <button
                type="button"
                className="danger"
                data-testid="deny-button"
                onClick={() => approvals.onDecision(approvalId, false)}
              >
                Deny
              </button>
            </>
          ) : (
            <span className="muted">{decided ? "Approved" : "Denied"} — continuing…</span>
          )}
        </div>
      )}
    </details>
  );
}

function Section({ label, children }: { label: string; children: React.ReactNode }) {
  return (
    <div className="tool-section">
      <div className="tool-label">{label}</div>
      {children}
    </div>
  );
}

function pretty(value: unknown): string {
  if (typeof value === "string") return value;
  try {
    return JSON.stringify(value, null, 2) ?? String(value);
  } catch {
    return String(value);
  }
}

/** `data-error` parts: `{message}` / `{errorText}` / a string. */
export function errorPartText(data: unknown): string {
  if (typeof data === "string") return data;
  if (data && typeof data === "object") {
    const d = data as Record<string, unknown>;
    for (const key of ["message", "errorText", "error", "detail"]) {
      if (typeof d[key] === "string") {
        return typeof d.name === "string" && d.name ? `${d.name}: ${d[key]}` : (d[key] as string);
      }
    }
  }
  return pretty(data);
}

function ErrorNotice({ data }: { data: unknown }) {
  return (
    <div className="notice error" role="alert" data-testid="error-part">
      {errorPartText(data)}
    </div>
  );
}
