// node:test suite: the official @upstash/qstash client (pinned in
// package-lock.json) gives retryd names past their limits or holding
// control characters, and each is refused with a short 400 that names the
// header; names at their limits are accepted. A tenant's flow-control key
// cannot be reached by another tenant spelling its internal name. Run by
// e2e/names_test.go, which starts the programs and passes:
//   RETRYD_URL, KEY_ACME (tenant acme), KEY_BARE (the default tenant)
//   DEST: a URL the accepted messages are published to (delayed a day)
const { test } = require("node:test");
const assert = require("node:assert/strict");
const { Client, QstashError } = require("@upstash/qstash");

for (const k of ["QSTASH_DEV", "QSTASH_REGION", "QSTASH_URL", "QSTASH_TOKEN"]) delete process.env[k];

const { RETRYD_URL, KEY_ACME, KEY_BARE, DEST } = process.env;
const acme = new Client({ baseUrl: RETRYD_URL, token: KEY_ACME });
const bare = new Client({ baseUrl: RETRYD_URL, token: KEY_BARE });
const day = 24 * 3600;

// refused checks a call answered 400, naming field, in a short answer.
async function refused(call, field) {
  await assert.rejects(call, (e) => {
    assert.ok(e instanceof QstashError, `not a QstashError: ${e}`);
    assert.equal(e.status, 400, `status ${e.status}: ${e.message.slice(0, 200)}`);
    assert.ok(e.message.includes(field), `the 400 does not name ${field}: ${e.message.slice(0, 200)}`);
    assert.ok(e.message.length < 1024, `the 400 is ${e.message.length} bytes: it echoes the value`);
    return true;
  });
}

test("labels and deduplication ids past 256 bytes are refused, at 256 accepted", async () => {
  const publish = (extra) => acme.publishJSON({ url: DEST, body: { n: 1 }, delay: day, ...extra });
  await refused(publish({ label: "l".repeat(257) }), "Upstash-Label");
  await refused(publish({ label: "l".repeat(900_000) }), "Upstash-Label");
  await refused(publish({ label: ["ok", "l".repeat(257)] }), "Upstash-Label");
  await refused(publish({ deduplicationId: "d".repeat(257) }), "Upstash-Deduplication-Id");
  await refused(publish({ redact: { header: ["h".repeat(900_000)] } }), "Upstash-Redact-Fields");
  await refused(publish({ flowControl: { key: "k".repeat(256), parallelism: 1 } }), "Upstash-Flow-Control-Key");
  // (A control character in a header is refused by fetch itself, before
  // it leaves the client: the Go tests send those.)

  const at = await publish({ label: "l".repeat(256), deduplicationId: "d".repeat(256) });
  assert.ok(at.messageId, "a label and a deduplication id of 256 bytes were refused");
  const again = await publish({ label: "l".repeat(256), deduplicationId: "d".repeat(256) });
  assert.equal(again.messageId, at.messageId, "the 256-byte deduplication id did not deduplicate");
  const m = await acme.messages.get(at.messageId);
  assert.equal(m.label, "l".repeat(256));
});

test("batch items are checked as publishes are", async () => {
  await refused(acme.batchJSON([{ url: DEST, body: {}, delay: day, label: "l".repeat(257) }]), "Upstash-Label");
});

test("a bare key cannot reach acme's flow-control key through its internal name", async () => {
  // acme's key exists: one of its messages asks for it.
  await acme.publishJSON({ url: DEST, body: {}, delay: day, flowControl: { key: "acmeflow", parallelism: 1 } });
  const internal = "acme\x1facmeflow";
  await refused(bare.flowControl.get(internal), "key");
  await refused(bare.flowControl.pause(internal), "key");
  await refused(bare.flowControl.pin(internal, { parallelism: 1 }), "key");
  await refused(bare.flowControl.unpin(internal, { parallelism: true }), "key");
  await refused(bare.flowControl.resetRate(internal), "key");
  const own = await acme.flowControl.get("acmeflow");
  assert.equal(own.isPaused, false, "acme's key was paused by the bare key");
  assert.equal(own.isPinnedParallelism, false, "acme's key was pinned by the bare key");
});
