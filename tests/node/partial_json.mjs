// Reads a JSON array of strings on stdin and prints, as one JSON array, what the pinned `ai`
// package's `parsePartialJson` returns for each: {defined, value, state}.
// tests/chunks/test_partial_json.py compares it with drupe.chunks.partial_json.
import { parsePartialJson } from 'ai';

const parts = [];
for await (const part of process.stdin) parts.push(part);
const texts = JSON.parse(Buffer.concat(parts).toString('utf8'));
const results = [];
for (const text of texts) {
  const { value, state } = await parsePartialJson(text);
  results.push({ defined: value !== undefined, value: value === undefined ? null : value, state });
}
process.stdout.write(JSON.stringify(results));
