// BullMQ peer for retryd's `make bench`: N jobs, each a 1 KB POST to the
// destination, retried with BullMQ's exponential backoff; prints one JSON
// line with the rate. Usage:
//   node bench.js <redisPort> <destinationURL> <N> <mode> <concurrency>
// mode `fetch` or `undici` drains: the N jobs are added in bulk first, and
// the clock runs from the worker's creation to the last job done.
// mode `fetch-e2e` or `undici-e2e` runs end to end: the worker runs first,
// then 32 producers add the jobs one `add` at a time while it consumes, and
// the clock runs from the first add to the last job done.
'use strict';
const { Queue, Worker } = require('bullmq');
const { request, Agent } = require('undici');

const PRODUCERS = 32;

async function main() {
  const [port, dest, nArg, mode, concArg] = process.argv.slice(2);
  const n = Number(nArg), concurrency = Number(concArg || 100);
  const endToEnd = mode.endsWith('-e2e');
  const client = endToEnd ? mode.slice(0, -'-e2e'.length) : mode;
  if (client !== 'fetch' && client !== 'undici') throw new Error('unknown mode ' + mode);
  const connection = { host: '127.0.0.1', port: Number(port), maxRetriesPerRequest: null };
  const name = 'bench-' + mode + '-' + Date.now();
  const queue = new Queue(name, { connection });
  const body = 'x'.repeat(1024);
  const jobOpts = { attempts: 6, backoff: { type: 'exponential', delay: 1000 }, removeOnComplete: true };
  const agent = new Agent({ connections: concurrency, pipelining: 1, keepAliveTimeout: 30000 });
  const post = client === 'undici'
    ? async (id) => {
        const res = await request(dest, { method: 'POST', body, dispatcher: agent, headers: { 'content-type': 'application/octet-stream', 'idempotency-key': id } });
        await res.body.dump();
        if (res.statusCode >= 300) throw new Error('status ' + res.statusCode);
      }
    : async (id) => {
        const res = await fetch(dest, { method: 'POST', body, headers: { 'content-type': 'application/octet-stream', 'idempotency-key': id } });
        await res.arrayBuffer();
        if (res.status >= 300) throw new Error('status ' + res.status);
      };
  if (!endToEnd) {
    for (let i = 0; i < n; i += 1000) {
      const jobs = [];
      for (let j = i; j < Math.min(n, i + 1000); j++) {
        jobs.push({ name: 'post', data: { id: 'bq-' + j }, opts: jobOpts });
      }
      await queue.addBulk(jobs);
    }
  }
  let done = 0, start;
  let allDone;
  const finished = new Promise((resolve, reject) => { allDone = { resolve, reject }; });
  if (!endToEnd) start = process.hrtime.bigint();
  const worker = new Worker(name, async (job) => post(job.data.id), { connection, concurrency });
  worker.on('completed', () => { if (++done === n) allDone.resolve(); });
  worker.on('error', (err) => allDone.reject(err));
  if (endToEnd) {
    // The worker is connected before the clock starts, as asynq's servers
    // and retryd's workers run before their end-to-end clocks start.
    await worker.waitUntilReady();
    start = process.hrtime.bigint();
    let next = 0;
    const produce = async () => {
      while (next < n) {
        const j = next++;
        await queue.add('post', { id: 'bq-' + j }, jobOpts);
      }
    };
    await Promise.all(Array.from({ length: PRODUCERS }, produce));
  }
  await finished;
  // Closed on the clock, as this peer has always been timed.
  await worker.close();
  const secs = Number(process.hrtime.bigint() - start) / 1e9;
  console.log(JSON.stringify({ mode, n, seconds: secs, jobsPerSec: n / secs }));
  await queue.obliterate({ force: true });
  await queue.close();
  await agent.close();
}

main().then(() => process.exit(0), (err) => { console.error(err); process.exit(1); });
