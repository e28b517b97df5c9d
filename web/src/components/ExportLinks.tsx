// Download links for a conversation: Markdown (the shown branch) and JSON (the whole tree),
// served by GET /api/conversations/{id}/export.
import { exportUrl } from "../api";

export function ExportLinks({ conversationId }: { conversationId: string }) {
  return (
    <span className="export-links">
      <span className="muted small">Export</span>
      <a href={exportUrl(conversationId, "markdown")} download data-testid="export-markdown" className="small">
        Markdown
      </a>
      <a href={exportUrl(conversationId, "json")} download data-testid="export-json" className="small">
        JSON
      </a>
    </span>
  );
}
