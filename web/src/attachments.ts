// Attachments: the server's caps (GET /api/limits, read once) and the pure checks the
// composer runs before a file is attached. Files travel as `file` parts with data: URLs.
import type { FileUIPart } from "ai";

export interface Limits {
  maxBodyBytes: number;
  maxAttachmentBytes: number;
  maxMessageChars: number;
}

let cached: Promise<Limits> | null = null;

export function fetchLimits(): Promise<Limits> {
  cached ??= fetch("/api/limits").then((r) => {
    if (!r.ok) throw new Error(`GET /api/limits: ${r.status}`);
    return r.json() as Promise<Limits>;
  });
  cached.catch(() => {
    cached = null; // try again next time
  });
  return cached;
}

/** "1.4 MB", "820 KB", "12 bytes". */
export function formatBytes(n: number): string {
  // rounded down, so a stated limit is never above the real one
  if (n >= 1024 * 1024) return `${(Math.floor((n / (1024 * 1024)) * 10) / 10).toFixed(1)} MB`;
  if (n >= 1024) return `${Math.floor(n / 1024)} KB`;
  return `${n} bytes`;
}

/** Why these files cannot be attached next to those already attached, or null if they can. */
export function attachmentProblem(
  files: { name: string; size: number }[],
  alreadyBytes: number,
  budget: number,
): string | null {
  const big = files.find((f) => f.size > budget);
  if (big) return `${big.name} is ${formatBytes(big.size)}: files can be at most ${formatBytes(budget)}.`;
  const total = alreadyBytes + files.reduce((sum, f) => sum + f.size, 0);
  if (total > budget) {
    return `Together the files would be ${formatBytes(total)}: one message can carry at most ${formatBytes(budget)}.`;
  }
  return null;
}

export function readAsPart(file: File): Promise<FileUIPart> {
  return new Promise((resolve, reject) => {
    const reader = new FileReader();
    reader.onerror = () => reject(reader.error ?? new Error(`could not read ${file.name}`));
    reader.onload = () =>
      resolve({
        type: "file",
        mediaType: file.type || "application/octet-stream",
        filename: file.name,
        url: String(reader.result),
      });
    reader.readAsDataURL(file);
  });
}
