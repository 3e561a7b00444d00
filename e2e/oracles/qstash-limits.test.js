// node:test suite: the official @upstash/qstash client (pinned in
// package-lock.json) meets retryd's limits as QStash's own errors. Run by
// e2e/limits_test.go, which starts the programs with RATE_LIMIT_RPS=100
// and QUEUE_LIMIT=3 and passes:
//   RETRYD_URL, KEY (a tenant's key), DEST (a URL no request reaches)
// The tests run in order: the queue calls spend little of the rate limit,
// the batches last spend most of it.
const { test } = require("node:test");
const assert = require("node:assert/strict");
const { Client, QstashError, QstashRatelimitError } = require("@upstash/qstash");

for (const k of ["QSTASH_DEV", "QSTASH_REGION", "QSTASH_URL", "QSTASH_TOKEN"]) delete process.env[k];

const { RETRYD_URL, KEY, DEST } = process.env;
const client = new Client({ baseUrl: RETRYD_URL, token: KEY });

test("logs: an unknown state is refused, naming the states", async () => {
  await assert.rejects(client.logs({ filter: { state: "BOGUS" } }), (e) => e instanceof QstashError && /DELIVERED/.test(e.message));
  assert.deepEqual((await client.logs({ filter: { state: "FAILED" } })).logs, []);
});

test("queues: past QUEUE_LIMIT an upsert or an enqueue to a new queue is refused, naming the limit; list is an array", async () => {
  for (const name of ["q0", "q1", "q2"]) await client.queue({ queueName: name }).upsert({ parallelism: 1 });
  const limited = (e) => e instanceof QstashError && /QUEUE_LIMIT/.test(e.message);
  await assert.rejects(client.queue({ queueName: "q3" }).upsert({ parallelism: 1 }), limited);
  await assert.rejects(client.queue({ queueName: "q4" }).enqueueJSON({ url: `${DEST}/x`, body: { i: 1 } }), limited);
  const list = await client.queue().list();
  assert.ok(Array.isArray(list), "list is not an array");
  assert.deepEqual(list.map((q) => q.name).sort(), ["q0", "q1", "q2"]);
});

test("batch: 20 items to a 25-endpoint URL group are 500 requests, refused whole at 100 a second; 3 items pass", async () => {
  const endpoints = Array.from({ length: 25 }, (_, i) => ({ url: `${DEST}/e${i}` }));
  await client.urlGroups.addEndpoints({ name: "group", endpoints });
  const items = (n) => Array.from({ length: n }, (_, i) => ({ urlGroup: "group", body: { i } }));
  // The client reads a 429 as its own rate-limit error (it keeps no body).
  await assert.rejects(client.batchJSON(items(20)), QstashRatelimitError);
  const res = await client.batchJSON(items(3));
  assert.equal(res.length, 3);
  assert.ok(res.every((r) => Array.isArray(r) && r.length === 25), JSON.stringify(res).slice(0, 200));
  // About 20 tokens are left, refilling at 100 a second: another 100
  // requests are refused whole.
  await assert.rejects(client.batchJSON(items(4)), QstashRatelimitError);
});
