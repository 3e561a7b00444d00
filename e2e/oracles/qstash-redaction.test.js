// node:test suite: what retryd shows of a QStash message, through the
// official @upstash/qstash client (pinned in package-lock.json), is
// redacted like every other view: the /v2/publish answer and the failure
// callback's body mask the URL's secrets, secret headers (by the whole
// words of their names, and any value with a credential scheme such as
// Bearer or Basic) and what Upstash-Redact-Fields names, and show the rest
// as sent; the destination still gets the real values. Run by e2e/qstash_test.go, which passes:
//   RETRYD_URL, RETRYD_TOKEN, QSTASH_CURRENT_SIGNING_KEY, QSTASH_NEXT_SIGNING_KEY
const { test, before, after } = require("node:test");
const assert = require("node:assert/strict");
const http = require("node:http");
const { Client, Receiver } = require("@upstash/qstash");
const { until } = require("./until.js");

for (const k of ["QSTASH_DEV", "QSTASH_REGION", "QSTASH_URL", "QSTASH_TOKEN"]) delete process.env[k];

const { RETRYD_URL, RETRYD_TOKEN, QSTASH_CURRENT_SIGNING_KEY, QSTASH_NEXT_SIGNING_KEY } = process.env;
const client = new Client({ baseUrl: RETRYD_URL, token: RETRYD_TOKEN });
const receiver = new Receiver({ currentSigningKey: QSTASH_CURRENT_SIGNING_KEY, nextSigningKey: QSTASH_NEXT_SIGNING_KEY });

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
    calls.push({ path: req.url.split("?")[0], url: req.url, headers: req.headers, body, verified });
    const status = req.url.startsWith("/gone") ? 410 : 200;
    res.writeHead(status);
    res.end(status < 300 ? "ok" : "gone");
  });
});
const to = (path) => `${dest}${path}`;

before(async () => {
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  dest = `http://127.0.0.1:${server.address().port}`;
});
after(() => server.close());

const secrets = ["s3cr3t", "c0de", "eyJ.x.y", "pw-1", "pw-2", "fwd-secret", "other-secret", "dXNlcjpwYXNz", "hmac-value", "hidden-value", "card-4111"];
const query = "?token=s3cr3t&code=c0de&jwt=eyJ.x.y&pass=pw-1&pw=pw-2&author=ann&page=2";
const maskedQuery = "?token=[REDACTED]&code=[REDACTED]&jwt=[REDACTED]&pass=[REDACTED]&pw=[REDACTED]&author=ann&page=2";

test("publish: the answer's url is redacted; the destination gets the real one", async () => {
  const res = await client.publish({ url: to("/ok" + query), body: "hello" });
  assert.equal(res.url, to("/ok" + maskedQuery));
  const got = await until("the delivery", () => calls.find((c) => c.path === "/ok"));
  assert.equal(got.url, "/ok" + query);
});

test("failure callback: url, sourceHeader and sourceBody are redacted, its shape kept", async () => {
  const res = await client.publish({
    url: to("/gone" + query),
    body: "card-4111",
    headers: {
      Authorization: "Bearer fwd-secret", "X-Upstream": "Bearer other-secret", "X-Fwd": "Basic dXNlcjpwYXNz",
      "X-Shopify-Hmac-Sha256": "hmac-value", "X-Hidden": "hidden-value", "X-Public": "p",
      "bypass-tunnel-reminder": "client-test", "X-Author": "ann", "X-Passenger-Count": "2",
    },
    retries: 0,
    failureCallback: to("/failure"),
    redact: { body: true, header: ["X-Hidden"] },
  });
  const gone = await until("the delivery", () => calls.find((c) => c.path === "/gone"));
  assert.equal(gone.headers["authorization"], "Bearer fwd-secret", "the destination gets the real header");
  assert.equal(gone.body, "card-4111", "the destination gets the real body");
  const cb = await until("the failure callback", () => calls.find((c) => c.path === "/failure"));
  assert.ok(cb.verified, "the failure callback passes Receiver.verify");
  for (const s of secrets) assert.ok(!cb.body.includes(s), `the failure callback shows ${s}: ${cb.body}`);
  const doc = JSON.parse(cb.body);
  assert.equal(doc.url, to("/gone" + maskedQuery));
  assert.equal(doc.sourceMessageId, res.messageId);
  assert.equal(doc.dlqId, res.messageId);
  assert.equal(doc.status, 410);
  assert.equal(doc.sourceBody, "");
  const header = Object.fromEntries(Object.entries(doc.sourceHeader).map(([k, v]) => [k.toLowerCase(), v]));
  assert.deepEqual(header["authorization"], ["[REDACTED]"]);
  assert.deepEqual(header["x-upstream"], ["[REDACTED]"]);
  assert.deepEqual(header["x-hidden"], ["[REDACTED]"]);
  assert.deepEqual(header["x-fwd"], ["[REDACTED]"]);
  assert.deepEqual(header["x-shopify-hmac-sha256"], ["[REDACTED]"]);
  assert.deepEqual(header["x-public"], ["p"]);
  assert.deepEqual(header["bypass-tunnel-reminder"], ["client-test"]);
  assert.deepEqual(header["x-author"], ["ann"]);
  assert.deepEqual(header["x-passenger-count"], ["2"]);
  for (const k of ["status", "header", "body", "retried", "maxRetries", "sourceMessageId", "url", "method", "sourceHeader", "sourceBody", "notBefore", "createdAt", "dlqId"]) {
    assert.ok(k in doc, `the failure callback has no ${k}`);
  }
});
