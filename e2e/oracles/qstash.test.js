// node:test suite: the official @upstash/qstash client (pinned in
// package-lock.json) against a running retryd. Every delivery and callback
// must pass the official Receiver. Run by e2e/qstash_test.go, which starts
// the programs and passes:
//   RETRYD_URL, RETRYD_TOKEN, QSTASH_CURRENT_SIGNING_KEY, QSTASH_NEXT_SIGNING_KEY
//   RESULT_FILE: where to write the ids the Go test checks through retryd's own API.
const { test, before, after } = require("node:test");
const assert = require("node:assert/strict");
const http = require("node:http");
const fs = require("node:fs");
const { Client, Receiver, QstashError } = require("@upstash/qstash");
const { until } = require("./until.js");

delete process.env.QSTASH_DEV;
delete process.env.QSTASH_REGION;
delete process.env.QSTASH_URL;
delete process.env.QSTASH_TOKEN;

const { RETRYD_URL, RETRYD_TOKEN, QSTASH_CURRENT_SIGNING_KEY, QSTASH_NEXT_SIGNING_KEY, RESULT_FILE } = process.env;
const receiver = new Receiver({ currentSigningKey: QSTASH_CURRENT_SIGNING_KEY, nextSigningKey: QSTASH_NEXT_SIGNING_KEY });
const client = new Client({ baseUrl: RETRYD_URL, token: RETRYD_TOKEN });
const results = {};

// The destination: records every call, verified; answers by path.
const calls = [];
const fc = { now: 0, peak: 0 };
const queued = { now: 0, peak: 0 };
const answers = new Map(); // path -> list of statuses, the last repeats
let dest;
const server = http.createServer((req, res) => {
  let body = "";
  req.on("data", (c) => (body += c));
  req.on("end", async () => {
    const url = `${dest}${req.url}`;
    let verified = false;
    let error = null;
    try {
      verified = await receiver.verify({ signature: req.headers["upstash-signature"] ?? "", body, url });
    } catch (e) {
      error = e.message;
    }
    const path = req.url.split("?")[0];
    calls.push({ path, url: req.url, body, verified, error, at: Date.now(), method: req.method, headers: req.headers });
    if (path === "/queued") {
      // A queue: hold the call a while, counting how many overlap.
      queued.now++;
      queued.peak = Math.max(queued.peak, queued.now);
      await new Promise((r) => setTimeout(r, 100));
      queued.now--;
    }
    if (path === "/fc") {
      // Flow control: hold the call a while, counting how many overlap.
      fc.now++;
      fc.peak = Math.max(fc.peak, fc.now);
      await new Promise((r) => setTimeout(r, 100));
      fc.now--;
    }
    const plan = answers.get(path) ?? [200];
    const status = plan.length > 1 ? plan.shift() : plan[0];
    // QStash's way to say "do not retry": 489 with this header.
    res.writeHead(status, path === "/non-retryable" ? { "Upstash-NonRetryable-Error": "true" } : {});
    res.end(status < 300 ? "ok" : "nope");
  });
});

const to = (path, ...statuses) => {
  if (statuses.length) answers.set(path, statuses);
  return `${dest}${path}`;
};
const callsTo = (path) => calls.filter((c) => c.path === path);

before(async () => {
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  dest = `http://127.0.0.1:${server.address().port}`;
});

after(() => {
  server.close();
  if (RESULT_FILE) fs.writeFileSync(RESULT_FILE, JSON.stringify(results));
  // Every call the destination saw passed the official Receiver.
  const bad = calls.filter((c) => !c.verified);
  assert.deepEqual(bad.map((c) => `${c.path}: ${c.error}`), [], "deliveries that failed Receiver.verify");
});

test("publishJSON delivers the body with forwarded headers and QStash's delivery headers", async () => {
  const pub = await client.publishJSON({ url: to("/hook") + "?a=1", body: { hello: "world" }, headers: { "X-Order": "42" } });
  assert.ok(pub.messageId);
  results.published = pub.messageId;
  const [d] = await until("the delivery", () => callsTo("/hook").length && callsTo("/hook"));
  assert.equal(d.body, '{"hello":"world"}');
  assert.equal(d.url, "/hook?a=1");
  assert.equal(d.headers["x-order"], "42");
  assert.equal(d.headers["upstash-message-id"], pub.messageId);
  assert.equal(d.headers["upstash-retried"], "0");
  assert.equal(d.headers["user-agent"], "Upstash-QStash");
  assert.equal(d.headers["content-type"], "application/json");
  const msg = await client.messages.get(pub.messageId);
  assert.equal(msg.messageId, pub.messageId);
  assert.equal(msg.url, to("/hook") + "?a=1");
  assert.equal(msg.method, "POST");
  assert.equal(msg.maxRetries, 3); // QStash's default
});

test("publish sends a raw body with the method asked for", async () => {
  const pub = await client.publish({ url: to("/plain"), body: "raw body", method: "PUT" });
  const [d] = await until("the delivery", () => callsTo("/plain").length && callsTo("/plain"));
  assert.equal(d.method, "PUT");
  assert.equal(d.body, "raw body");
  assert.equal(d.headers["upstash-message-id"], pub.messageId);
});

test("a destination URL is kept verbatim, escapes and all", async () => {
  await client.publish({ url: to("/a%20b") + "?q=x%2Fy", body: "e" });
  const [d] = await until("the delivery", () => callsTo("/a%20b").length && callsTo("/a%20b"));
  assert.equal(d.url, "/a%20b?q=x%2Fy");
});

test("deduplication by id and by content answers the first message's id", async () => {
  const a = await client.publishJSON({ url: to("/dedup"), body: { n: 1 }, deduplicationId: "d-1" });
  const b = await client.publishJSON({ url: to("/dedup"), body: { n: 2 }, deduplicationId: "d-1" });
  assert.equal(b.messageId, a.messageId);
  assert.equal(b.deduplicated, true);
  const c = await client.publishJSON({ url: to("/dedup-content"), body: { n: 3 }, contentBasedDeduplication: true });
  const d = await client.publishJSON({ url: to("/dedup-content"), body: { n: 3 }, contentBasedDeduplication: true });
  const e = await client.publishJSON({ url: to("/dedup-content"), body: { n: 4 }, contentBasedDeduplication: true });
  assert.equal(d.messageId, c.messageId);
  assert.notEqual(e.messageId, c.messageId);
  await until("the deliveries", () => callsTo("/dedup").length === 1 && callsTo("/dedup-content").length === 2);
});

test("retries follow the retry-delay expression, never early, with Upstash-Retried counting", async () => {
  const pub = await client.publish({ url: to("/flaky", 500, 503, 200), body: "f", retries: 3, retryDelay: "200 * (1 + retried)" });
  const got = await until("3 attempts", () => callsTo("/flaky").length === 3 && callsTo("/flaky"));
  assert.deepEqual(got.map((c) => c.headers["upstash-retried"]), ["0", "1", "2"]);
  assert.ok(got[1].at - got[0].at >= 200, `first retry after ${got[1].at - got[0].at} ms, want >= 200`);
  assert.ok(got[2].at - got[1].at >= 400, `second retry after ${got[2].at - got[1].at} ms, want >= 400`);
  const msg = await client.messages.get(pub.messageId);
  assert.equal(msg.retryDelayExpression, "200 * (1 + retried)");
  assert.equal(msg.maxRetries, 3);
});

test("a bad retry-delay expression is a QstashError that names it", async () => {
  await assert.rejects(client.publish({ url: to("/never"), body: "x", retryDelay: "1..1000000" }), (e) => {
    assert.ok(e instanceof QstashError, e.name);
    assert.match(e.message, /Upstash-Retry-Delay/);
    assert.match(e.message, /1\.\.1000000/);
    return true;
  });
});

test("the callback gets QStash's callback body on success; the failure callback on failure", async () => {
  const ok = await client.publish({ url: to("/cb-ok"), body: "payload", callback: to("/callback"), failureCallback: to("/failure") });
  const gone = await client.publish({ url: to("/cb-gone", 410), body: "lost", retries: 0, callback: to("/callback"), failureCallback: to("/failure") });
  const [cb] = await until("the callback", () => callsTo("/callback").length && callsTo("/callback"));
  const body = JSON.parse(cb.body);
  assert.equal(body.status, 200);
  assert.equal(body.sourceMessageId, ok.messageId);
  assert.equal(Buffer.from(body.body, "base64").toString(), "ok");
  assert.equal(Buffer.from(body.sourceBody, "base64").toString(), "payload");
  assert.equal(body.url, to("/cb-ok"));
  const [fcb] = await until("the failure callback", () => callsTo("/failure").length && callsTo("/failure"));
  const fbody = JSON.parse(fcb.body);
  assert.equal(fbody.status, 410);
  assert.equal(fbody.sourceMessageId, gone.messageId);
  assert.equal(fbody.dlqId, gone.messageId);
  assert.equal(Buffer.from(fbody.body, "base64").toString(), "nope");
  // One outcome, one call: no failure callback for the success and no
  // callback for the failure.
  await new Promise((r) => setTimeout(r, 300));
  assert.equal(callsTo("/callback").length, 1);
  assert.equal(callsTo("/failure").length, 1);
  const msg = await client.messages.get(gone.messageId);
  assert.equal(msg.failureCallback, to("/failure"));
  await client.dlq.delete(gone.messageId);
});

test("batch and batchJSON publish one message per item", async () => {
  const res = await client.batchJSON([
    { url: to("/batch-1"), body: { i: 1 } },
    { url: to("/batch-2"), body: { i: 2 } },
  ]);
  assert.equal(res.length, 2);
  const raw = await client.batch([{ url: to("/batch-3"), body: "three" }]);
  assert.equal(raw.length, 1);
  await until("3 batch deliveries", () => ["/batch-1", "/batch-2", "/batch-3"].every((p) => callsTo(p).length === 1));
  assert.equal(callsTo("/batch-2")[0].body, '{"i":2}');
});

test("messages.cancel: one, many, by filter, and all", async () => {
  const later = (p, extra = {}) => client.publish({ url: to(p), body: "x", delay: 600, ...extra });
  const one = await later("/later-1");
  assert.deepEqual(await client.messages.cancel(one.messageId), { cancelled: 1 });
  const [a, b] = await Promise.all([later("/later-2"), later("/later-3")]);
  assert.deepEqual(await client.messages.cancel([a.messageId, b.messageId]), { cancelled: 2 });
  await later("/later-4", { label: "nightly" });
  await later("/later-5", { label: "nightly" });
  const keep = await later("/later-6", { label: "other" });
  assert.deepEqual(await client.messages.cancel({ filter: { label: "nightly" } }), { cancelled: 2 });
  const kept = await client.messages.get(keep.messageId);
  assert.equal(kept.label, "other");
  // count caps a call: one of the two "capped" messages is cancelled.
  await later("/later-7", { label: "capped" });
  await later("/later-8", { label: "capped" });
  assert.equal((await client.messages.cancel({ filter: { label: "capped" }, count: 1 })).cancelled, 1);
  const all = await client.messages.cancel({ all: true });
  assert.ok(all.cancelled >= 1, JSON.stringify(all));
  results.cancelled = one.messageId;
  results.keptThenCancelled = keep.messageId;
});

test("a 4xx is retried as QStash retries it; a 489 with Upstash-NonRetryable-Error goes to the DLQ at once", async () => {
  const back = await client.publish({ url: to("/gone-then-back", 404, 410, 489, 200), body: "r", retries: 3, retryDelay: "100" });
  await until("four attempts", () => callsTo("/gone-then-back").length === 4);
  await until("the delivery", async () => (await client.logs({ filter: { messageId: back.messageId, state: "DELIVERED" } })).logs.length === 1);
  const stop = await client.publish({ url: to("/non-retryable", 489), body: "s", retries: 3, retryDelay: "100" });
  const entry = await until("the 489 message in the DLQ", async () =>
    (await client.dlq.listMessages({ filter: { messageId: stop.messageId } })).messages[0]);
  assert.equal(entry.responseStatus, 489);
  assert.equal(callsTo("/non-retryable").length, 1, "a non-retryable error is not retried");
});

test("the DLQ: listMessages, retry, delete one, delete many, delete by filter", async () => {
  const fail = (p, extra = {}) => client.publish({ url: to(p, 410), body: "g", retries: 0, ...extra });
  const flaky = await fail("/dlq-flaky");
  const gone = await fail("/dlq-gone");
  const m1 = await fail("/dlq-many-1");
  const m2 = await fail("/dlq-many-2");
  const f1 = await fail("/dlq-filter", { label: "batch-7" });
  const want = [flaky, gone, m1, m2, f1].map((m) => m.messageId).sort();
  const listed = await until("5 failed messages in the DLQ", async () => {
    const { messages } = await client.dlq.listMessages({ count: 100 });
    const ids = messages.map((m) => m.dlqId);
    return want.every((id) => ids.includes(id)) && messages;
  });
  const flakyEntry = listed.find((m) => m.dlqId === flaky.messageId);
  assert.equal(flakyEntry.responseStatus, 410);
  assert.equal(flakyEntry.url, to("/dlq-flaky"));
  const byLabel = await client.dlq.listMessages({ filter: { label: "batch-7" } });
  assert.deepEqual(byLabel.messages.map((m) => m.dlqId), [f1.messageId]);

  // A selection acts on what it names: a misspelled filter is refused
  // (it once deleted the whole DLQ), a messageId filter lists one message.
  for (const call of [() => client.dlq.delete({ filter: { labeel: "batch-7" } }), () => client.dlq.retry({ filter: { labeel: "x" } })]) {
    await assert.rejects(call(), (e) => e instanceof QstashError && /labeel/.test(e.message));
  }
  const byId = await client.dlq.listMessages({ filter: { messageId: m1.messageId } });
  assert.deepEqual(byId.messages.map((m) => m.dlqId), [m1.messageId]);

  answers.set("/dlq-flaky", [200]);
  const retried = await client.dlq.retry([flaky.messageId]);
  assert.deepEqual(retried.responses.map((r) => r.messageId), [flaky.messageId]);
  const again = await until("the retried delivery", () => callsTo("/dlq-flaky").length === 2 && callsTo("/dlq-flaky"));
  assert.equal(again[1].headers["upstash-retried"], "1");

  await client.dlq.delete(gone.messageId);
  assert.deepEqual(await client.dlq.deleteMany({ dlqIds: [m1.messageId, m2.messageId] }), { deleted: 2 });
  assert.deepEqual(await client.dlq.delete({ filter: { label: "batch-7" } }), { deleted: 1 });
  const left = (await client.dlq.listMessages()).messages.map((m) => m.dlqId);
  for (const id of want) assert.ok(!left.includes(id), `${id} is still in the DLQ`);
  results.dlqRetried = flaky.messageId;
  results.dlqDeleted = gone.messageId;
});

test("schedules: create with an id, fire signed messages, upsert, get, list, pause, resume, delete", async () => {
  const made = await client.schedules.create({
    destination: to("/tick"), cron: "@every 1s", scheduleId: "nightly-report", body: "tick", retries: 1,
    retryDelay: "1000", failureCallback: to("/failure-tick"), headers: { "X-Report": "r1" },
  });
  assert.equal(made.scheduleId, "nightly-report");
  const [tick] = await until("a tick", () => callsTo("/tick").length && callsTo("/tick"), 10000);
  assert.equal(tick.body, "tick");
  assert.equal(tick.headers["upstash-schedule-id"], "nightly-report");
  assert.equal(tick.headers["x-report"], "r1");
  assert.ok(tick.headers["upstash-message-id"]);
  const msg = await client.messages.get(tick.headers["upstash-message-id"]);
  assert.equal(msg.scheduleId, "nightly-report");
  results.tick = tick.headers["upstash-message-id"];

  let sc = await client.schedules.get("nightly-report");
  assert.equal(sc.scheduleId, "nightly-report");
  assert.equal(sc.cron, "@every 1s");
  assert.equal(sc.destination, to("/tick"));
  assert.equal(sc.retries, 1);
  assert.equal(sc.retryDelayExpression, "1000");
  assert.equal(sc.failureCallback, to("/failure-tick"));
  assert.equal(sc.isPaused, false);
  assert.ok(sc.nextScheduleTime > 0);

  // Upsert: the same id, a new cron and body.
  const again = await client.schedules.create({ destination: to("/tick"), cron: "@every 2s", scheduleId: "nightly-report", body: "tock" });
  assert.equal(again.scheduleId, "nightly-report");
  sc = await client.schedules.get("nightly-report");
  assert.equal(sc.cron, "@every 2s");
  assert.equal(sc.body, "tock");
  const other = await client.schedules.create({ destination: to("/other-tick"), cron: "0 0 * * *" });
  const list = await client.schedules.list();
  const ids = list.map((s) => s.scheduleId);
  assert.equal(ids.filter((id) => id === "nightly-report").length, 1, "the upsert made a second schedule");
  assert.ok(ids.includes(other.scheduleId));

  await client.schedules.pause({ schedule: "nightly-report" });
  assert.equal((await client.schedules.get("nightly-report")).isPaused, true);
  const pausedAt = callsTo("/tick").length;
  await new Promise((r) => setTimeout(r, 2500));
  assert.ok(callsTo("/tick").length <= pausedAt + 1, "a paused schedule kept firing");
  await client.schedules.resume({ schedule: "nightly-report" });
  assert.equal((await client.schedules.get("nightly-report")).isPaused, false);
  await client.schedules.delete("nightly-report");
  await client.schedules.delete(other.scheduleId);
  await assert.rejects(client.schedules.get("nightly-report"), QstashError);
});

test("logs show a message's life: created, the failed attempt, the retry, delivered", async () => {
  const pub = await client.publish({ url: to("/logged", 503, 200), body: "l", retries: 2, retryDelay: "100" });
  await until("2 attempts", () => callsTo("/logged").length === 2);
  const states = await until("the DELIVERED event", async () => {
    const { logs } = await client.logs({ filter: { messageId: pub.messageId } });
    const s = logs.map((l) => l.state);
    return s.includes("DELIVERED") && s;
  });
  assert.deepEqual(states, ["DELIVERED", "RETRY", "ERROR", "CREATED"]);
  const page = await client.logs({ count: 5 });
  assert.ok(page.logs.length >= 5 && page.cursor, "a first page of 5 with a cursor");
  const next = await client.logs({ count: 5, cursor: page.cursor });
  assert.ok(next.logs.length > 0);
  assert.ok(next.logs[0].time <= page.logs[page.logs.length - 1].time, "the next page is older");
});

test("flow control: parallelism 1 lets one call at a time reach the destination", async () => {
  const msgs = await Promise.all(
    [1, 2, 3, 4, 5].map((i) => client.publish({ url: to("/fc"), body: `fc ${i}`, flowControl: { key: "qstash-fc", parallelism: 1 } })),
  );
  await until("5 flow-controlled deliveries", () => callsTo("/fc").length === 5 && fc.now === 0);
  assert.equal(fc.peak, 1);
  const msg = await client.messages.get(msgs[0].messageId);
  assert.equal(msg.flowControlKey, "qstash-fc");
  await assert.rejects(
    client.publish({ url: to("/never"), body: "x", flowControl: { key: "k", rate: 5, period: "10ms" } }),
    (e) => e instanceof QstashError && /Upstash-Flow-Control-Value/.test(e.message),
  );
});

test("errors come back as readable QstashErrors", async () => {
  await assert.rejects(client.messages.get("nosuchmessage"), (e) => e instanceof QstashError && /not found/i.test(e.message));
  await assert.rejects(client.publish({ url: "ftp://example.com/x", body: "x" }), QstashError);
  await assert.rejects(
    client.publish({ url: to("/never"), body: "x", failureCallback: "not a url" }),
    (e) => e instanceof QstashError && /Upstash-Failure-Callback/.test(e.message),
  );
});

test("url groups: add endpoints, get, list, publish to every endpoint, remove, delete", async () => {
  const group = "orders-group";
  const ep1 = { name: "first", url: to("/group-1") };
  const ep2 = { name: "second", url: to("/group-2") };
  await client.urlGroups.addEndpoints({ name: group, endpoints: [ep1] });
  await client.urlGroups.addEndpoints({ name: group, endpoints: [ep2] });
  const got = await client.urlGroups.get(group);
  assert.equal(got.name, group);
  assert.deepEqual(got.endpoints, [ep1, ep2]);
  assert.ok(got.createdAt > 0 && got.updatedAt >= got.createdAt);
  assert.ok((await client.urlGroups.list()).some((g) => g.name === group));

  const res = await client.publishJSON({ urlGroup: group, body: { fan: "out" }, headers: { "X-Fan": "1" } });
  assert.equal(res.length, 2);
  assert.deepEqual(res.map((r) => r.url), [ep1.url, ep2.url]);
  assert.notEqual(res[0].messageId, res[1].messageId);
  const [d1] = await until("the first endpoint's delivery", () => callsTo("/group-1").length && callsTo("/group-1"));
  const [d2] = await until("the second endpoint's delivery", () => callsTo("/group-2").length && callsTo("/group-2"));
  for (const d of [d1, d2]) {
    assert.equal(d.body, '{"fan":"out"}');
    assert.equal(d.headers["x-fan"], "1");
  }
  const msg = await client.messages.get(res[0].messageId);
  assert.equal(msg.urlGroup, group);
  const { logs } = await client.logs({ filter: { urlGroup: group } });
  assert.ok(logs.length >= 2 && logs.every((l) => res.some((r) => r.messageId === l.messageId)), JSON.stringify(logs));

  const batch = await client.batch([{ urlGroup: group, body: "b" }, { url: to("/group-solo"), body: "s" }]);
  assert.equal(batch.length, 2);
  assert.ok(Array.isArray(batch[0]) && batch[0].length === 2, JSON.stringify(batch));
  assert.ok(batch[1].messageId);

  await client.urlGroups.removeEndpoints({ name: group, endpoints: [{ name: "first" }] });
  assert.deepEqual((await client.urlGroups.get(group)).endpoints, [ep2]);
  await client.urlGroups.delete(group);
  await assert.rejects(client.urlGroups.get(group), QstashError);
  await assert.rejects(client.publish({ urlGroup: group, body: "x" }), QstashError);
  results.groupMessage = res[0].messageId;
});

test("several labels (the first is label) and redact fields, in messages, the DLQ and logs", async () => {
  const pub = await client.publish({
    url: to("/labelled", 410), body: "secret body", retries: 0, label: ["first-l", "second-l"],
    headers: { "X-Secret": "hide-me", "X-Public": "show-me" }, redact: { body: true, header: ["X-Secret"] },
  });
  const msg = await client.messages.get(pub.messageId);
  assert.equal(msg.label, "first-l");
  assert.deepEqual(msg.labels, ["first-l", "second-l"]);
  assert.ok(!(msg.body ?? "").includes("secret body"), "the body is shown");
  assert.ok(!JSON.stringify(msg.header).includes("hide-me"), JSON.stringify(msg.header));
  assert.ok(JSON.stringify(msg.header).includes("show-me"));
  const [d] = await until("the delivery", () => callsTo("/labelled").length && callsTo("/labelled"));
  assert.equal(d.body, "secret body", "the destination gets the real body");
  assert.equal(d.headers["x-secret"], "hide-me");
  const dlq = await until("the DLQ entry by its second label", async () => {
    const { messages } = await client.dlq.listMessages({ filter: { label: "second-l" } });
    return messages.length === 1 && messages;
  });
  assert.equal(dlq[0].dlqId, pub.messageId);
  assert.ok(dlq[0].notBefore > 0, `notBefore ${dlq[0].notBefore}`);
  assert.ok(!(dlq[0].body ?? "").includes("secret body"));
  const { logs } = await client.logs({ filter: { label: ["nope", "first-l"] } });
  assert.ok(logs.length > 0 && logs.every((l) => l.messageId === pub.messageId), JSON.stringify(logs));
  assert.deepEqual(logs[0].labels, ["first-l", "second-l"]);
  await client.dlq.delete(pub.messageId);
});

test("the flow-control API: get, pause holds and resume delivers, pin and unpin, resetRate, global parallelism", async () => {
  const key = "fc-api";
  const fc = { key, parallelism: 5, rate: 10, period: "1m" };
  const first = await client.publish({ url: to("/fc-api"), body: "1", flowControl: fc });
  await until("the first delivery", () => callsTo("/fc-api").length === 1);
  const msg = await client.messages.get(first.messageId);
  assert.equal(msg.flowControlKey, key);
  assert.equal(msg.parallelism, 5);
  assert.equal(msg.rate, 10);
  assert.equal(msg.period, 60);
  const info = await until("the key's figures", async () => {
    const i = await client.flowControl.get(key);
    return i.parallelismMax === 5 && i;
  });
  assert.equal(info.flowControlKey, key);
  assert.equal(info.rateMax, 10);
  assert.equal(info.ratePeriod, 60);
  assert.equal(info.isPaused, false);

  await client.flowControl.pause(key);
  assert.equal((await client.flowControl.get(key)).isPaused, true);
  // A worker reads a key's settings at most once a second, so a message
  // published at once may still start: publish until one is held.
  let held;
  for (let i = 0; !held; i++) {
    assert.ok(i < 10, "no message was held by the pause");
    const before = callsTo("/fc-api").length;
    const pub = await client.publish({ url: to("/fc-api"), body: `held ${i}`, flowControl: fc });
    const outcome = await until("the message to be held or delivered", async () =>
      ((await client.flowControl.get(key)).waitListSize === 1 && "held") || (callsTo("/fc-api").length > before && "delivered"), 10000);
    if (outcome === "held") held = pub;
  }
  const delivered = callsTo("/fc-api").length;
  await client.flowControl.resume(key);
  await until("the held message's delivery", () => callsTo("/fc-api").length === delivered + 1);
  assert.equal(callsTo("/fc-api").at(-1).headers["upstash-message-id"], held.messageId);

  await client.flowControl.pin(key, { parallelism: 3, rate: 20, period: 120 });
  let pinned = await client.flowControl.get(key);
  assert.equal(pinned.isPinnedParallelism, true);
  assert.equal(pinned.isPinnedRate, true);
  assert.equal(pinned.parallelismMax, 3);
  assert.equal(pinned.rateMax, 20);
  assert.equal(pinned.ratePeriod, 120);
  await client.flowControl.unpin(key, { parallelism: true });
  pinned = await client.flowControl.get(key);
  assert.equal(pinned.isPinnedParallelism, false);
  assert.equal(pinned.isPinnedRate, true);
  await client.flowControl.unpin(key, { rate: true });
  await client.flowControl.resetRate(key);
  assert.equal((await client.flowControl.get(key)).rateCount, 0);

  const g = await client.flowControl.getGlobalParallelism();
  assert.ok(g.parallelismMax >= 1 && typeof g.parallelismCount === "number", JSON.stringify(g));
});

test("queues: upsert, enqueue in order with the queue's parallelism, pause holds, resume delivers, get, list, delete", async () => {
  const queue = client.queue({ queueName: "orders-queue" });
  await queue.upsert({ parallelism: 1 });
  const sent = [];
  for (let i = 1; i <= 5; i++) {
    sent.push((await queue.enqueue({ url: to("/queued"), body: `q ${i}` })).messageId);
  }
  const got = await until("5 queued deliveries", () => callsTo("/queued").length === 5 && callsTo("/queued"), 20000);
  assert.deepEqual(got.map((c) => c.body), ["q 1", "q 2", "q 3", "q 4", "q 5"], "delivered out of order");
  assert.equal(queued.peak, 1, "parallelism 1 let calls overlap");
  const msg = await client.messages.get(sent[0]);
  assert.equal(msg.queueName, "orders-queue");
  let info = await queue.get();
  assert.equal(info.name, "orders-queue");
  assert.equal(info.parallelism, 1);
  assert.equal(info.paused, false);
  assert.ok((await queue.list()).some((q) => q.name === "orders-queue"));

  await queue.pause();
  assert.equal((await queue.get()).paused, true);
  const held = await queue.enqueueJSON({ url: to("/queued"), body: { held: true } });
  await until("the held message counted in the queue's lag", async () => (await queue.get()).lag === 1);
  assert.equal(callsTo("/queued").length, 5, "a paused queue delivered");
  await queue.resume();
  await until("the held message's delivery", () => callsTo("/queued").length === 6);
  await until("the queue drained", async () => (await queue.get()).lag === 0);

  const batch = await client.batch([{ url: to("/queued"), body: "b1", queueName: "orders-queue" }, { url: to("/queued"), body: "b2", queueName: "orders-queue" }]);
  assert.equal(batch.length, 2);
  await until("the batch's deliveries, in order", () => callsTo("/queued").length === 8);
  assert.deepEqual(callsTo("/queued").slice(6).map((c) => c.body), ["b1", "b2"]);
  const { messages } = await client.dlq.listMessages({ filter: { queueName: "orders-queue" } });
  assert.deepEqual(messages, []);
  await queue.delete();
  await assert.rejects(queue.get(), QstashError);
});
