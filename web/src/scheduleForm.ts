// Pure helpers of the schedule form: which field a server message is about, and the
// "channel:chat" delivery targets as text.

export type ScheduleField =
  | "agent"
  | "name"
  | "prompt"
  | "expr"
  | "timezone"
  | "minutes"
  | "timeout"
  | "deliverTo"
  | "form";

/** The field a validation message from the server names (messages start with their path). */
export function fieldOfError(message: string): ScheduleField {
  const m = message.toLowerCase();
  if (/trigger\.expr|cron/.test(m)) return "expr";
  if (/timezone|time zone/.test(m)) return "timezone";
  if (/trigger\.seconds|interval/.test(m)) return "minutes";
  if (/timeout/.test(m)) return "timeout";
  if (/deliverto|deliver|channel|chat/.test(m)) return "deliverTo";
  if (/agent/.test(m)) return "agent";
  if (/\bprompt\b/.test(m)) return "prompt";
  if (/\bname\b/.test(m)) return "name";
  return "form";
}

export interface Target {
  channel: string;
  chat: string;
}

/** "tg:123, slack:C42" -> targets; a piece without "channel:chat" is an error message. */
export function parseTargets(text: string): Target[] | string {
  const out: Target[] = [];
  for (const piece of text.split(",").map((p) => p.trim()).filter(Boolean)) {
    const at = piece.indexOf(":");
    if (at <= 0 || at === piece.length - 1) return `"${piece}" is not channel:chat`;
    out.push({ channel: piece.slice(0, at).trim(), chat: piece.slice(at + 1).trim() });
  }
  return out;
}

export function formatTargets(targets: Target[]): string {
  return targets.map((t) => `${t.channel}:${t.chat}`).join(", ");
}
