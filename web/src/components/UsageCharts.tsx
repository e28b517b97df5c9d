// Small SVG charts for the usage page: stacked bars per day, horizontal bars per name.
import { compact, niceScale, shortDay } from "../usage";

export interface Series<D> {
  key: keyof D & string;
  label: string;
  className: string;
}

/** Vertical bars, one per day; each bar stacks the series' values. */
export function DayBars<D extends { day: string }>({
  days,
  series,
  testId,
  title,
}: {
  days: D[];
  series: Series<D>[];
  testId: string;
  title: string;
}) {
  const width = 720;
  const height = 200;
  const left = 44;
  const bottom = 22;
  const plotW = width - left - 8;
  const plotH = height - bottom - 8;
  const totals = days.map((d) => series.reduce((sum, s) => sum + Number(d[s.key]), 0));
  const { top, step } = niceScale(Math.max(0, ...totals));
  const slot = plotW / Math.max(1, days.length);
  const barW = Math.max(2, Math.min(28, slot * 0.7));
  const y = (v: number) => 8 + plotH - (v / top) * plotH;
  const labelEvery = Math.ceil(days.length / 10);
  const ticks: number[] = [];
  for (let v = 0; v <= top; v += step) ticks.push(v);
  return (
    <figure className="usage-chart" data-testid={testId}>
      <figcaption>
        {title}
        <span className="legend">
          {series.map((s) => (
            <span key={s.key} className={`legend-item ${s.className}`}>
              {s.label}
            </span>
          ))}
        </span>
      </figcaption>
      <svg viewBox={`0 0 ${width} ${height}`} role="img" aria-label={title}>
        {ticks.map((v) => (
          <g key={v}>
            <line className="grid" x1={left} x2={width - 8} y1={y(v)} y2={y(v)} />
            <text className="axis" x={left - 6} y={y(v) + 4} textAnchor="end">
              {compact(v)}
            </text>
          </g>
        ))}
        {days.map((d, i) => {
          const x = left + i * slot + (slot - barW) / 2;
          let base = 0;
          return (
            <g key={d.day} data-testid={`${testId}-bar`} data-day={d.day} data-total={totals[i]}>
              <title>{`${d.day}: ${series.map((s) => `${s.label} ${Number(d[s.key])}`).join(", ")}`}</title>
              {series.map((s) => {
                const value = Number(d[s.key]);
                const y0 = y(base);
                base += value;
                return value > 0 ? (
                  <rect key={s.key} className={s.className} x={x} width={barW} y={y(base)} height={y0 - y(base)} />
                ) : null;
              })}
              {i % labelEvery === 0 && (
                <text className="axis" x={x + barW / 2} y={height - 6} textAnchor="middle">
                  {shortDay(d.day)}
                </text>
              )}
            </g>
          );
        })}
      </svg>
    </figure>
  );
}

/** Horizontal bars, one per row (a model, a conversation), longest first. */
export function NameBars({
  rows,
  testId,
  title,
  empty,
}: {
  rows: { key: string; label: string; value: number; detail: string; href?: string }[];
  testId: string;
  title: string;
  empty: string;
}) {
  const max = Math.max(1, ...rows.map((r) => r.value));
  return (
    <figure className="usage-chart" data-testid={testId}>
      <figcaption>{title}</figcaption>
      {rows.length === 0 ? (
        <p className="muted small">{empty}</p>
      ) : (
        <ul className="name-bars">
          {rows.map((r) => (
            <li key={r.key} data-testid={`${testId}-row`} data-key={r.key} data-value={r.value}>
              <span className="name" title={r.label}>
                {r.href ? <a href={r.href}>{r.label}</a> : r.label}
              </span>
              <span className="track">
                <span className="fill" style={{ width: `${(r.value / max) * 100}%` }} />
              </span>
              <span className="value">{r.detail}</span>
            </li>
          ))}
        </ul>
      )}
    </figure>
  );
}
