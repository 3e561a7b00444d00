// BullMQ peer for retryd's `make bench`: N jobs, each a 1 KB POST to the
// destination, retried with BullMQ's exponential backoff; prints one JSON
// line with the drain rate. Usage:
//   node bench.js <redisPort> <destinationURL> <N> <fetch|undici> <concurrency>
'use strict';
const { Queue, Worker } = require('bullmq');
const { request, Agent } = require('undici');

async function main() {
  const [port, dest, nArg, mode, concArg] = process.argv.slice(2);
  const n = Number(nArg), concurrency = Number(concArg || 100);
  const connection = { host: '127.0.0.1', port: Number(port), maxRetriesPerRequest: null };
  const name = 'bench-' + mode + '-' + Date.now();
  const queue = new Queue(name, { connection });
  const body = 'x'.repeat(1024);
  for (let i = 0; i < n; i += 1000) {
    const jobs = [];
    for (let j = i; j < Math.min(n, i + 1000); j++) {
      jobs.push({ name: 'post', data: { id: 'bq-' + j }, opts: { attempts: 6, backoff: { type: 'exponential', delay: 1000 }, removeOnComplete: true } });
    }
    await queue.addBulk(jobs);
  }
  const agent = new Agent({ connections: concurrency, pipelining: 1, keepAliveTimeout: 30000 });
  const post = mode === 'undici'
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
  let done = 0;
  const start = process.hrtime.bigint();
  await new Promise((resolve, reject) => {
    const worker = new Worker(name, async (job) => post(job.data.id), { connection, concurrency });
    worker.on('completed', () => { if (++done === n) resolve(worker); });
    worker.on('error', reject);
  }).then((worker) => worker.close());
  const secs = Number(process.hrtime.bigint() - start) / 1e9;
  console.log(JSON.stringify({ mode, n, seconds: secs, jobsPerSec: n / secs }));
  await queue.obliterate({ force: true });
  await queue.close();
  await agent.close();
}

main().then(() => process.exit(0), (err) => { console.error(err); process.exit(1); });
