// Reads a JSON array of cases [{name, chunks, seed?}] on stdin and prints, as one JSON array,
// the last message `readUIMessageStream` (the pinned `ai` package) yields for each case:
// [{name, message, errors: [{name, message}]}]. `message` is null when nothing was yielded.
// One process serves every case; tests/chunks/test_node_crosscheck.py drives it.
import { readUIMessageStream } from 'ai';

async function readStdin() {
  const parts = [];
  for await (const part of process.stdin) parts.push(part);
  return Buffer.concat(parts).toString('utf8');
}

async function run({ name, chunks, seed }) {
  const errors = [];
  const stream = new ReadableStream({
    start(controller) {
      for (const chunk of chunks) controller.enqueue(chunk);
      controller.close();
    },
  });
  let message = null;
  const messages = readUIMessageStream({
    message: seed == null ? undefined : structuredClone(seed),
    stream,
    onError: (error) => errors.push({ name: error?.name ?? 'Error', message: String(error?.message ?? error) }),
  });
  for await (const snapshot of messages) message = snapshot;
  return { name, message, errors };
}

const cases = JSON.parse(await readStdin());
const results = [];
for (const item of cases) results.push(await run(item));
process.stdout.write(JSON.stringify(results));
