// Drives retryd's /v2 API with the official @upstash/qstash client and
// verifies every delivery with the official Receiver. Usage:
//   node qstash-oracle.js <retryd base URL> <token> <current key> <next key>
// Prints one JSON line with what it saw; exits non-zero when a call fails.
const http = require("http");
const { Client, Receiver } = require("@upstash/qstash");

const [baseUrl, token, currentSigningKey, nextSigningKey] = process.argv.slice(2);
delete process.env.QSTASH_DEV;
delete process.env.QSTASH_REGION;

const receiver = new Receiver({ currentSigningKey, nextSigningKey });
const deliveries = [];
let flakyOk = false;

const server = http.createServer((req, res) => {
  let body = "";
  req.on("data", (c) => (body += c));
  req.on("end", async () => {
    const url = `http://127.0.0.1:${server.address().port}${req.url}`;
    let verified = false;
    let error = null;
    try {
      verified = await receiver.verify({ signature: req.headers["upstash-signature"], body, url });
    } catch (e) {
      error = e.message;
    }
    deliveries.push({
      path: req.url, body, verified, error,
      messageId: req.headers["upstash-message-id"], retried: req.headers["upstash-retried"],
      forwarded: req.headers["x-order"], method: req.method,
    });
    const failing = (req.url.startsWith("/flaky") && !flakyOk) || req.url.startsWith("/gone");
    res.writeHead(failing ? 410 : 200);
    res.end(failing ? "gone" : "ok");
  });
});

async function waitFor(cond, ms) {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error("timed out");
    await new Promise((r) => setTimeout(r, 20));
  }
}

server.listen(0, "127.0.0.1", async () => {
  const dest = `http://127.0.0.1:${server.address().port}`;
  const client = new Client({ baseUrl, token });
  const out = {};
  try {
    const pub = await client.publishJSON({ url: `${dest}/hook?a=1`, body: { hello: "world" }, headers: { "X-Order": "42" } });
    out.published = pub.messageId;
    const plain = await client.publish({ url: `${dest}/plain`, body: "raw body", method: "PUT" });
    out.plain = plain.messageId;
    const d1 = await client.publishJSON({ url: `${dest}/dedup`, body: { n: 1 }, deduplicationId: "d-1" });
    const d2 = await client.publishJSON({ url: `${dest}/dedup`, body: { n: 1 }, deduplicationId: "d-1" });
    out.dedupSame = d1.messageId === d2.messageId;
    await waitFor(() => deliveries.length >= 3, 15000);
    const msg = await client.messages.get(pub.messageId);
    out.getUrl = msg.url;
    out.getMethod = msg.method;
    const later = await client.publish({ url: `${dest}/later`, body: "x", delay: 600 });
    out.cancelled = await client.messages.cancel(later.messageId);
    out.later = later.messageId;

    const batch = await client.batchJSON([
      { url: `${dest}/batch-1`, body: { i: 1 } },
      { url: `${dest}/batch-2`, body: { i: 2 } },
    ]);
    out.batch = batch.map((b) => b.messageId);

    const l1 = await client.publish({ url: `${dest}/later-1`, body: "a", delay: 600 });
    const l2 = await client.publish({ url: `${dest}/later-2`, body: "b", delay: 600 });
    out.bulkCancelled = await client.messages.cancel([l1.messageId, l2.messageId]);

    const flaky = await client.publish({ url: `${dest}/flaky`, body: "f", retries: 0 });
    const gone = await client.publish({ url: `${dest}/gone`, body: "g", retries: 0 });
    out.flaky = flaky.messageId;
    out.gone = gone.messageId;
    let dlq = { messages: [] };
    await waitFor(() => deliveries.filter((d) => d.path === "/flaky" || d.path === "/gone").length >= 2, 15000);
    for (let i = 0; i < 100 && dlq.messages.length < 2; i++) {
      dlq = await client.dlq.listMessages();
      await new Promise((r) => setTimeout(r, 50));
    }
    out.dlqIds = dlq.messages.map((m) => m.dlqId);
    out.dlqStatus = dlq.messages.map((m) => m.responseStatus);
    flakyOk = true;
    const retried = await client.dlq.retry([flaky.messageId]);
    out.retried = retried.responses.map((r) => r.messageId);
    await waitFor(() => deliveries.filter((d) => d.path === "/flaky").length >= 2, 15000);
    await client.dlq.delete(gone.messageId);
    out.dlqAfter = (await client.dlq.listMessages()).messages.map((m) => m.dlqId);
    try {
      await client.messages.get("nosuchmessage");
      out.missingThrew = false;
    } catch (e) {
      out.missingThrew = e.name + ": " + e.message;
    }
    out.deliveries = deliveries;
    console.log(JSON.stringify(out));
    server.close();
    process.exit(0);
  } catch (e) {
    console.log(JSON.stringify({ failed: e.name + ": " + e.message, out, deliveries }));
    server.close();
    process.exit(1);
  }
});
