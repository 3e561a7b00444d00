// node:test suite: a publish to a URL group cut short by the cap of
// unfinished messages, through the official @upstash/qstash client
// (pinned in package-lock.json). The first answer says how many endpoints
// got a message and which got none; the same publish again with the same
// deduplication id makes only the missing ones; every endpoint is called
// once. Run by e2e/fanout_test.go with RETRYD_URL and RETRYD_TOKEN, against
// a stack whose MAX_UNFINISHED_PER_KEY is 5.
const { test, before, after } = require("node:test");
const assert = require("node:assert/strict");
const http = require("node:http");
const { Client, QstashError } = require("@upstash/qstash");
const { until } = require("./until.js");

for (const k of ["QSTASH_DEV", "QSTASH_REGION", "QSTASH_URL", "QSTASH_TOKEN"]) delete process.env[k];

const { RETRYD_URL, RETRYD_TOKEN } = process.env;
const client = new Client({ baseUrl: RETRYD_URL, token: RETRYD_TOKEN, retry: false });

// The destination holds its calls until released, so the first five
// messages stay unfinished and the cap cuts the publish short.
const calls = {};
const held = [];
let released = false;
let dest;
const server = http.createServer((req, res) => {
  req.resume();
  req.on("end", () => {
    calls[req.url] = (calls[req.url] ?? 0) + 1;
    const answer = () => { res.writeHead(200); res.end("ok"); };
    if (released) answer(); else held.push(answer);
  });
});

before(async () => {
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  dest = `http://127.0.0.1:${server.address().port}`;
});

after(() => server.close());

test("a URL group publish cut short is completed by the same publish again", async () => {
  const group = "cut-short";
  const endpoints = [1, 2, 3, 4, 5, 6, 7, 8].map((i) => ({ name: `ep${i}`, url: `${dest}/ep/${i}` }));
  await client.urlGroups.addEndpoints({ name: group, endpoints });
  const publish = () => client.publishJSON({ urlGroup: group, body: { order: 9 }, deduplicationId: "order-9" });

  // The client shows a 429 as its rate-limit error, without the body.
  await assert.rejects(publish(), (e) => e instanceof QstashError && e.status === 429);
  // The body (read here without the client) names what got nothing; this
  // repeat is cut short by the cap again and makes nothing twice.
  const raw = await fetch(`${RETRYD_URL}/v2/publish/${group}`, {
    method: "POST",
    headers: { Authorization: `Bearer ${RETRYD_TOKEN}`, "Content-Type": "application/json", "Upstash-Deduplication-Id": "order-9" },
    body: JSON.stringify({ order: 9 }),
  });
  assert.equal(raw.status, 429);
  assert.match((await raw.json()).error, /5 of 8 endpoints got a request and 3 got none \(ep6, ep7, ep8\)/);
  released = true;
  held.splice(0).forEach((answer) => answer());

  // Once the first five are finished, the same publish makes the other three.
  const res = await until("the same publish to be accepted", async () => {
    try {
      return await publish();
    } catch (e) {
      if (e instanceof QstashError && e.status === 429) return null; // some of the first five are not finished yet
      throw e;
    }
  }, 30000);
  assert.equal(res.length, 8);
  // At least the first five are found made (a repeat cut short again on
  // the way may have made some of the others).
  assert.ok(res.filter((m) => m.deduplicated).length >= 5, JSON.stringify(res));
  await until("every endpoint to be called", () => Object.keys(calls).length === 8, 30000);
  const again = await publish();
  assert.ok(again.every((m) => m.deduplicated), JSON.stringify(again));
  for (const ep of endpoints) assert.equal(calls[new URL(ep.url).pathname], 1, `calls of ${ep.url}`);
});
