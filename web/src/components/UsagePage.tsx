// The usage page (#/usage): tokens and answers per day, per model and per conversation.
import { useEffect, useState } from "react";
import { conversationHash } from "../route";
import { compact } from "../usage";
import { errorMessage, fetchUsage, type UsageReport } from "../usageApi";
import { DayBars, NameBars } from "./UsageCharts";

const WINDOWS = [7, 30, 90];

export function UsagePage() {
  const [days, setDays] = useState(30);
  const [report, setReport] = useState<UsageReport | null>(null);
  const [error, setError] = useState<string | null>(null);

  useEffect(() => {
    let cancelled = false;
    fetchUsage(days)
      .then((r) => {
        if (!cancelled) {
          setReport(r);
          setError(null);
        }
      })
      .catch((e) => !cancelled && setError(errorMessage(e)));
    return () => {
      cancelled = true;
    };
  }, [days]);

  return (
    <section className="usage-page" data-testid="usage-page">
      <header className="chat-head">
        <h1 className="chat-title">Usage</h1>
        <label className="small muted">
          last{" "}
          <select data-testid="usage-window" value={days} onChange={(e) => setDays(Number(e.target.value))}>
            {WINDOWS.map((w) => (
              <option key={w} value={w}>
                {w} days
              </option>
            ))}
          </select>
        </label>
      </header>
      <div className="usage-body">
        {error && (
          <div className="notice error" role="alert" data-testid="usage-error">
            {error}
          </div>
        )}
        {report && <UsageReportView report={report} />}
      </div>
    </section>
  );
}

function UsageReportView({ report }: { report: UsageReport }) {
  const { totals } = report;
  return (
    <>
      <p className="usage-totals" data-testid="usage-totals">
        <strong>{totals.answers}</strong> answers{totals.errors ? ` (${totals.errors} failed)` : ""} ·{" "}
        <strong>{compact(totals.inputTokens)}</strong> tokens in · <strong>{compact(totals.outputTokens)}</strong>{" "}
        tokens out · {report.since} to {report.until} (UTC)
      </p>
      <DayBars
        testId="usage-tokens-per-day"
        title="Tokens per day"
        days={report.days}
        series={[
          { key: "inputTokens", label: "in", className: "series-in" },
          { key: "outputTokens", label: "out", className: "series-out" },
        ]}
      />
      <DayBars
        testId="usage-answers-per-day"
        title="Answers per day"
        days={report.days}
        series={[{ key: "answers", label: "answers", className: "series-answers" }]}
      />
      <div className="usage-columns">
        <NameBars
          testId="usage-models"
          title="Per model (tokens)"
          empty="No answers in this window."
          rows={report.models.map((m) => ({
            key: m.modelId,
            label: m.modelId,
            value: m.totalTokens,
            detail: `${compact(m.totalTokens)} · ${m.answers} ans.`,
          }))}
        />
        <NameBars
          testId="usage-conversations"
          title={`Per conversation (top ${report.conversations.length} of ${report.conversationsTotal})`}
          empty="No answers in this window."
          rows={report.conversations.map((c) => ({
            key: c.id,
            label: c.title || c.id,
            value: c.totalTokens,
            detail: `${compact(c.totalTokens)} · ${c.answers} ans.`,
            href: conversationHash(c.id),
          }))}
        />
      </div>
    </>
  );
}
