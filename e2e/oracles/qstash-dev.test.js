// node:test suite: an app in QStash's dev mode (QSTASH_DEV=true,
// QSTASH_DEV_PORT set by e2e/qstash_test.go, no credentials) publishes
// through `retryd api -dev`, and its Receiver, also in dev mode, verifies
// the delivery.
const { test } = require("node:test");
const assert = require("node:assert/strict");
const http = require("node:http");
const { Client, Receiver } = require("@upstash/qstash");

delete process.env.QSTASH_URL;
delete process.env.QSTASH_TOKEN;
delete process.env.QSTASH_CURRENT_SIGNING_KEY;
delete process.env.QSTASH_NEXT_SIGNING_KEY;

test("a QSTASH_DEV=true app publishes through retryd -dev and verifies the delivery", async () => {
  const got = new Promise((resolve) => {
    const server = http.createServer((req, res) => {
      let body = "";
      req.on("data", (c) => (body += c));
      req.on("end", () => {
        const url = `http://127.0.0.1:${server.address().port}${req.url}`;
        res.end("ok");
        server.close();
        resolve({ body, signature: req.headers["upstash-signature"], url });
      });
    });
    server.listen(0, "127.0.0.1", async () => {
      const client = new Client(); // dev mode: the SDK's dev URL and token
      const res = await client.publishJSON({ url: `http://127.0.0.1:${server.address().port}/dev`, body: { dev: true } });
      assert.ok(res.messageId);
    });
  });
  const d = await got;
  assert.equal(d.body, '{"dev":true}');
  const receiver = new Receiver(); // dev mode: the SDK's dev keys
  assert.equal(await receiver.verify({ signature: d.signature, body: d.body, url: d.url }), true);
});
