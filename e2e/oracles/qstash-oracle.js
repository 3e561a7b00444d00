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
    res.writeHead(200);
    res.end("ok");
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
