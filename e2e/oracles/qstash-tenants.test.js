// node:test suite: two tenants and an admin drive retryd's /v2 API with the
// official @upstash/qstash client (pinned in package-lock.json). Each
// tenant's token sees and acts on its own messages, DLQ, schedules and
// logs only, every "all" call included; the admin's sees both. Run by
// e2e/tenants_test.go, which starts the programs and passes:
//   RETRYD_URL, KEY_A (team-a), KEY_B (team-b), KEY_ADMIN,
//   QSTASH_CURRENT_SIGNING_KEY, QSTASH_NEXT_SIGNING_KEY
//   RESULT_FILE: where to write the ids the Go test checks through retryd's own API.
const { test, before, after } = require("node:test");
const assert = require("node:assert/strict");
const http = require("node:http");
const fs = require("node:fs");
const { Client, Receiver, QstashError } = require("@upstash/qstash");
const { until } = require("./until.js");

for (const k of ["QSTASH_DEV", "QSTASH_REGION", "QSTASH_URL", "QSTASH_TOKEN"]) delete process.env[k];

const { RETRYD_URL, KEY_A, KEY_B, KEY_ADMIN, QSTASH_CURRENT_SIGNING_KEY, QSTASH_NEXT_SIGNING_KEY, RESULT_FILE } = process.env;
const receiver = new Receiver({ currentSigningKey: QSTASH_CURRENT_SIGNING_KEY, nextSigningKey: QSTASH_NEXT_SIGNING_KEY });
const A = new Client({ baseUrl: RETRYD_URL, token: KEY_A });
const B = new Client({ baseUrl: RETRYD_URL, token: KEY_B });
const admin = new Client({ baseUrl: RETRYD_URL, token: KEY_ADMIN });
const results = {};

const calls = [];
let dest;
const server = http.createServer((req, res) => {
  let body = "";
  req.on("data", (c) => (body += c));
  req.on("end", async () => {
    let verified = false;
    try {
      verified = await receiver.verify({ signature: req.headers["upstash-signature"] ?? "", body, url: `${dest}${req.url}` });
    } catch {}
    const path = req.url.split("?")[0];
    calls.push({ path, verified });
    const status = path.startsWith("/fail") ? 410 : 200;
    res.writeHead(status);
    res.end(status < 300 ? "ok" : "gone");
  });
});
const to = (path) => `${dest}${path}`;
const callsTo = (path) => calls.filter((c) => c.path === path);

const notFound = (e) => e instanceof QstashError && /not found|no request|no schedule/i.test(e.message);

before(async () => {
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  dest = `http://127.0.0.1:${server.address().port}`;
});

after(() => {
  server.close();
  if (RESULT_FILE) fs.writeFileSync(RESULT_FILE, JSON.stringify(results));
  assert.deepEqual(calls.filter((c) => !c.verified).map((c) => c.path), [], "deliveries that failed Receiver.verify");
});

test("publish: the same deduplication id in two tenants makes two messages, each readable by its own tenant only", async () => {
  const a = await A.publishJSON({ url: to("/a"), body: { t: "a" }, deduplicationId: "same-id" });
  const b = await B.publishJSON({ url: to("/b"), body: { t: "b" }, deduplicationId: "same-id" });
  assert.notEqual(b.messageId, a.messageId);
  assert.notEqual(b.deduplicated, true);
  const again = await B.publishJSON({ url: to("/b"), body: { t: "b" }, deduplicationId: "same-id" });
  assert.equal(again.messageId, b.messageId, "team-b's own replay");
  await until("both deliveries", () => callsTo("/a").length === 1 && callsTo("/b").length === 1);
  assert.equal((await A.messages.get(a.messageId)).messageId, a.messageId);
  await assert.rejects(B.messages.get(a.messageId), notFound);
  await assert.rejects(A.messages.get(b.messageId), notFound);
  assert.equal((await admin.messages.get(a.messageId)).messageId, a.messageId);
  assert.equal((await admin.messages.get(b.messageId)).messageId, b.messageId);
  const batch = await B.batchJSON([{ url: to("/batch-b"), body: { i: 1 } }]);
  await assert.rejects(A.messages.get(batch[0].messageId), notFound);
  results.a = a.messageId;
  results.b = b.messageId;
});

test("messages.cancel: another tenant's id is not found, and cancel all covers the caller's tenant", async () => {
  const later = (c, p) => c.publish({ url: to(p), body: "x", delay: 600 });
  const pa = await later(A, "/later-a");
  const pb = await later(B, "/later-b");
  await assert.rejects(B.messages.cancel(pa.messageId), notFound);
  // Another tenant's id is as unknown as one never issued: skipped, named.
  assert.deepEqual(await B.messages.cancel([pa.messageId]), {
    cancelled: 0,
    skipped: [{ id: pa.messageId, reason: "no request with this id" }],
  });
  const all = await B.messages.cancel({ all: true });
  assert.ok(all.cancelled >= 1, JSON.stringify(all));
  results.keptPending = pa.messageId; // the Go test checks it is pending still
  results.cancelledByB = pb.messageId;
});

test("the DLQ: each tenant lists, retries and deletes its own; all calls stay in the tenant; the admin sees both", async () => {
  const fa = await A.publish({ url: to("/fail-a"), body: "g", retries: 0 });
  const fb = await B.publish({ url: to("/fail-b"), body: "g", retries: 0 });
  const ids = async (c, opts = {}) => (await c.dlq.listMessages({ count: 100, ...opts })).messages.map((m) => m.dlqId);
  await until("both in the DLQ", async () => (await ids(admin)).includes(fa.messageId) && (await ids(admin)).includes(fb.messageId));
  assert.deepEqual(await ids(A), [fa.messageId]);
  assert.deepEqual(await ids(B), [fb.messageId]);
  assert.deepEqual(await ids(B, { filter: { messageId: fa.messageId } }), []);
  assert.deepEqual((await B.dlq.retry([fa.messageId])).responses, []);
  assert.deepEqual((await B.dlq.retry({ all: true })).responses.map((r) => r.messageId), [fb.messageId]);
  await assert.rejects(B.dlq.delete(fa.messageId), notFound);
  assert.deepEqual(await B.dlq.deleteMany({ dlqIds: [fa.messageId] }), {
    deleted: 0,
    skipped: [{ id: fa.messageId, reason: "no request with this id" }],
  });
  // team-b's retried message failed again: its DLQ has it once more.
  await until("team-b's retried message back in its DLQ", async () => (await ids(B)).includes(fb.messageId));
  assert.deepEqual(await B.dlq.delete({ all: true }), { deleted: 1 });
  assert.deepEqual(await ids(A), [fa.messageId], "team-b's calls touched team-a's DLQ");
  results.failedA = fa.messageId;
  results.deletedB = fb.messageId;
});

test("schedules: each tenant names its own, and lists, reads and deletes its own only", async () => {
  await A.schedules.create({ destination: to("/tick-a"), cron: "0 0 * * *", scheduleId: "nightly" });
  await B.schedules.create({ destination: to("/tick-b"), cron: "0 0 * * *", scheduleId: "nightly" });
  assert.equal((await A.schedules.get("nightly")).destination, to("/tick-a"));
  assert.equal((await B.schedules.get("nightly")).destination, to("/tick-b"));
  const bOnly = await B.schedules.create({ destination: to("/tick-b2"), cron: "0 0 * * *" });
  await assert.rejects(A.schedules.get(bOnly.scheduleId), notFound);
  await assert.rejects(A.schedules.pause({ schedule: bOnly.scheduleId }), notFound);
  await assert.rejects(A.schedules.delete(bOnly.scheduleId), notFound);
  assert.deepEqual((await A.schedules.list()).map((s) => s.destination), [to("/tick-a")]);
  assert.deepEqual((await B.schedules.list()).map((s) => s.destination).sort(), [to("/tick-b"), to("/tick-b2")]);
  assert.equal((await admin.schedules.list()).length, 3);
  await B.schedules.delete("nightly");
  assert.equal((await A.schedules.get("nightly")).destination, to("/tick-a"), "team-b's delete removed team-a's schedule");
  await A.schedules.delete("nightly");
  await B.schedules.delete(bOnly.scheduleId);
});

test("logs: a tenant's events are its own messages' only", async () => {
  const { logs } = await A.logs({ count: 1000 });
  assert.ok(logs.length > 0);
  const foreign = logs.filter((l) => [results.b, results.cancelledByB, results.deletedB].includes(l.messageId));
  assert.deepEqual(foreign, [], "team-a's logs show team-b's messages");
  const mine = await B.logs({ filter: { messageId: results.a } });
  assert.deepEqual(mine.logs, [], "team-b reads team-a's logs by id");
});
