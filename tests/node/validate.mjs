// Reads a JSON array of values on stdin and prints, as one JSON array, whether the pinned `ai`
// package's `uiMessageChunkSchema` accepts each: [{ok}]. tests/chunks/test_codec.py compares it
// with drupe.chunks.codec.validate_chunk.
import { uiMessageChunkSchema } from 'ai';
import { safeValidateTypes } from '@ai-sdk/provider-utils';

const parts = [];
for await (const part of process.stdin) parts.push(part);
const values = JSON.parse(Buffer.concat(parts).toString('utf8'));
const results = [];
for (const value of values) {
  const result = await safeValidateTypes({ value, schema: uiMessageChunkSchema });
  results.push({ ok: result.success });
}
process.stdout.write(JSON.stringify(results));
