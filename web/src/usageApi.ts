// GET /api/usage: answers and tokens per UTC day, per model and per conversation.
import { errorMessage } from "./api";

export interface UsageCount {
  answers: number;
  errors: number;
  inputTokens: number;
  outputTokens: number;
  totalTokens: number;
}

export interface UsageReport {
  since: string;
  until: string;
  totals: UsageCount;
  days: (UsageCount & { day: string })[];
  models: (UsageCount & { modelId: string })[];
  conversations: (UsageCount & { id: string; title: string | null })[];
  conversationsTotal: number;
}

export async function fetchUsage(days: number): Promise<UsageReport> {
  const r = await fetch(`/api/usage?days=${encodeURIComponent(String(days))}`, {
    headers: { accept: "application/json" },
  });
  if (!r.ok) {
    let detail = `HTTP ${r.status}`;
    try {
      const body: unknown = await r.json();
      if (body && typeof body === "object" && "detail" in body) detail = String((body as { detail: unknown }).detail);
    } catch {
      // not JSON: keep the status line
    }
    throw new Error(detail);
  }
  return (await r.json()) as UsageReport;
}

export { errorMessage };
