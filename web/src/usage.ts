// Pure helpers of the usage page: axis ticks, compact numbers, short day labels.

/** A "nice" upper bound and tick step for an axis that must show `max` (0 → 1). */
export function niceScale(max: number, ticks = 4): { top: number; step: number } {
  if (!(max > 0)) return { top: 1, step: 1 };
  const raw = max / ticks;
  const magnitude = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 5, 10].map((m) => m * magnitude).find((s) => s >= raw) ?? 10 * magnitude;
  const wholeStep = Math.max(1, step);
  return { top: Math.ceil(max / wholeStep) * wholeStep, step: wholeStep };
}

/** 950 → "950", 1234 → "1.2k", 2_500_000 → "2.5M". */
export function compact(n: number): string {
  const abs = Math.abs(n);
  const fmt = (v: number, unit: string) => `${Number(v.toFixed(v < 10 ? 1 : 0))}${unit}`;
  if (abs >= 1e9) return fmt(n / 1e9, "G");
  if (abs >= 1e6) return fmt(n / 1e6, "M");
  if (abs >= 1e3) return fmt(n / 1e3, "k");
  return String(n);
}

/** "2026-03-07" → "Mar 7" (the day is UTC, as the server counts it). */
export function shortDay(day: string): string {
  const [y, m, d] = day.split("-").map(Number);
  if (!y || !m || !d) return day;
  const date = new Date(Date.UTC(y, m - 1, d));
  return date.toLocaleDateString("en", { month: "short", day: "numeric", timeZone: "UTC" });
}
