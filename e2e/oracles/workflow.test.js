// node:test suite: workflows written with the official @upstash/workflow
// SDK (pinned in package-lock.json) run on retryd. A Node HTTP server
// serves them with the SDK's serve(); the SDK's Client triggers, notifies
// and cancels them. Run by e2e/workflow_test.go, which starts the programs
// and passes:
//   RETRYD_URL, RETRYD_TOKEN, QSTASH_CURRENT_SIGNING_KEY, QSTASH_NEXT_SIGNING_KEY
//   KILL_FILE: written while the "durable" workflow is inside its slow
//     step; the Go test then kills the workers and starts a new one, and
//     removes the file.
const { test, before, after } = require("node:test");
const assert = require("node:assert/strict");
const http = require("node:http");
const fs = require("node:fs");
const { serve, Client: WorkflowClient } = require("@upstash/workflow");
const { createWorkflow, serveMany } = require("@upstash/workflow/nextjs");
const { Client, Receiver } = require("@upstash/qstash");
const { until } = require("./until.js");

for (const k of ["QSTASH_DEV", "QSTASH_REGION", "QSTASH_URL", "QSTASH_TOKEN"]) delete process.env[k];

const { RETRYD_URL, RETRYD_TOKEN, QSTASH_CURRENT_SIGNING_KEY, QSTASH_NEXT_SIGNING_KEY, KILL_FILE } = process.env;
const env = { QSTASH_URL: RETRYD_URL, QSTASH_TOKEN: RETRYD_TOKEN, QSTASH_CURRENT_SIGNING_KEY, QSTASH_NEXT_SIGNING_KEY };
const qstashClient = new Client({ baseUrl: RETRYD_URL, token: RETRYD_TOKEN });
const receiver = new Receiver({ currentSigningKey: QSTASH_CURRENT_SIGNING_KEY, nextSigningKey: QSTASH_NEXT_SIGNING_KEY });
const client = new WorkflowClient({ baseUrl: RETRYD_URL, token: RETRYD_TOKEN });

let base;
const runs = {}; // run id -> what its steps saw
const seen = (id) => (runs[id] ??= { steps: [], calls: 0, failures: [] });

const options = (path, extra = {}) => ({ qstashClient, receiver, env, url: `${base}${path}`, retries: 2, ...extra });

// The workflows, made once the server's address is known (each names its
// own URL).
const makeRoutes = () => ({ "/every": everyStep(), "/failing": failing(), "/sleepy": sleepy(), "/durable": durable(), "/hooked": hooked() });

// A webhook: the run makes one, says where it is, and waits for a call.
const hooked = () => serve(async (context) => {
  const r = seen(context.workflowRunId);
  const webhook = await context.createWebhook("make hook");
  await context.run("tell", () => {
    r.hook = webhook.webhookUrl;
  });
  const { request, timeout } = await context.waitForWebhook("await hook", webhook, "60s");
  await context.run("heard", async () => {
    r.result = { timeout, method: request.method, body: await request.text(), header: request.headers.get("x-hook") };
  });
}, options("/hooked"));

// context.invoke: a parent invokes a child that returns, one that fails
// and one that cancels itself, each served at /many/<its name>.
const invoking = () => {
  const manyOptions = { qstashClient, receiver, env };
  const child = createWorkflow(async (context) => {
    const doubled = await context.run("double", () => context.requestPayload.n * 2);
    return { doubled, header: context.headers.get("x-invoker") };
  }, { retries: 0 });
  const failingChild = createWorkflow(async (context) => {
    await context.run("doomed", () => {
      throw new Error("child doomed on purpose");
    });
  }, { retries: 0 });
  const cancelingChild = createWorkflow(async (context) => {
    await context.run("before cancel", () => "ran");
    await context.cancel();
  }, { retries: 0 });
  const parent = createWorkflow(async (context) => {
    const r = seen(context.workflowRunId);
    const ok = await context.invoke("invoke child", { workflow: child, body: { n: 21 }, headers: { "x-invoker": "parent" }, retries: 0 });
    const failed = await context.invoke("invoke failing", { workflow: failingChild, body: {}, retries: 0 });
    const canceled = await context.invoke("invoke canceling", { workflow: cancelingChild, body: {}, retries: 0 });
    await context.run("last", () => {
      r.steps.push("last");
      r.result = { ok, failed, canceled };
    });
  }, { retries: 0 });
  return serveMany({ parent, child, failingChild, cancelingChild }, manyOptions);
};

// Every step kind: run, sleep, sleepUntil, parallel runs, call,
// waitForEvent (notified, and timed out) and notify.
const everyStep = () => serve(async (context) => {
  const r = seen(context.workflowRunId);
  const input = context.requestPayload;
  const first = await context.run("first", () => {
    r.steps.push("first");
    return `order ${input.order}`;
  });
  await context.sleep("nap", 1);
  await context.sleepUntil("until", Date.now() / 1000 + 1);
  const [left, right] = await Promise.all([
    context.run("left", () => (r.steps.push("left"), "L")),
    context.run("right", () => (r.steps.push("right"), "R")),
  ]);
  const called = await context.call("third party", {
    url: `${base}/third`,
    method: "POST",
    body: { x: input.order },
    headers: { "x-test": "yes" },
  });
  const event = await context.waitForEvent("await event", `event-${context.workflowRunId}`, { timeout: "60s" });
  const quiet = await context.waitForEvent("await nothing", `never-${context.workflowRunId}`, { timeout: 1 });
  const told = await context.notify("tell", `told-${context.workflowRunId}`, { hello: "nobody waits" });
  await context.run("last", () => {
    r.steps.push("last");
    r.result = { first, left, right, called, event, quiet, toldWaiters: told.notifyResponse.length };
  });
}, options("/every"));

// A step that fails every time, after one that succeeds: the failure
// function gets the error. What the run's start set (its retries, its
// failure function, the user's headers) holds for every later step.
const failing = () => serve(async (context) => {
  const r = seen(context.workflowRunId);
  await context.run("fine", () => {
    r.fine = (r.fine ?? 0) + 1;
    return "fine";
  });
  await context.run("doomed", () => {
    r.doomedHeader = context.headers.get("x-caller");
    r.doomedCalls = (r.doomedCalls ?? 0) + 1;
    if (!r.healed) throw new Error("doomed on purpose");
    return "healed";
  });
  await context.run("after", () => {
    r.after = true;
  });
}, options("/failing", {
  retries: 0,
  failureFunction: async ({ context, failStatus, failResponse }) => {
    seen(context.workflowRunId).failures.push({ failStatus, failResponse, auth: context.headers.get("x-caller") });
  },
}));

// A run that sleeps long enough to be canceled.
const sleepy = () => serve(async (context) => {
  const r = seen(context.workflowRunId);
  await context.run("before", () => r.steps.push("before"));
  await context.sleep("long", 30);
  await context.run("after", () => r.steps.push("after"));
}, options("/sleepy"));

// A run whose slow step outlives the worker delivering it.
const durable = () => serve(async (context) => {
  const r = seen(context.workflowRunId);
  const a = await context.run("a", () => (r.steps.push("a"), 1));
  const b = await context.run("slow", async () => {
    r.steps.push("slow");
    if (KILL_FILE && !r.killed) {
      r.killed = true;
      fs.writeFileSync(KILL_FILE, context.workflowRunId);
      await until("the workers killed", () => !fs.existsSync(KILL_FILE), 60000);
    }
    return a + 1;
  });
  await context.run("c", () => {
    r.steps.push("c");
    r.result = b + 1;
  });
}, options("/durable"));

let routes = {};
let many;

// runLog is a run's log as retryd serves it to the SDK ([] once ended).
const runLog = async (id) => {
  const res = await fetch(`${RETRYD_URL}/v2/workflows/runs/${id}`, { headers: { authorization: `Bearer ${RETRYD_TOKEN}` } });
  return res.status === 200 ? await res.json() : [];
};

const server = http.createServer(async (req, res) => {
  const chunks = [];
  for await (const c of req) chunks.push(c);
  const body = Buffer.concat(chunks);
  const path = req.url.split("?")[0];
  if (path === "/third") {
    const v = await receiver.verify({ signature: req.headers["upstash-signature"] ?? "", body: body.toString(), url: `${base}${req.url}` }).catch(() => false);
    res.writeHead(v && req.headers["x-test"] === "yes" ? 200 : 400, { "content-type": "text/plain" });
    res.end(`third party got ${body}`);
    return;
  }
  const route = path.startsWith("/many/") ? { handler: many.POST } : routes[path];
  if (!route) {
    res.writeHead(404);
    res.end();
    return;
  }
  const headers = new Headers();
  for (const [k, v] of Object.entries(req.headers)) headers.set(k, Array.isArray(v) ? v.join(", ") : v);
  const response = await route.handler(new Request(`${base}${req.url}`, { method: req.method, headers, body: req.method === "GET" ? undefined : body }));
  res.writeHead(response.status, Object.fromEntries(response.headers));
  res.end(Buffer.from(await response.arrayBuffer()));
});

before(async () => {
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  base = `http://127.0.0.1:${server.address().port}`;
  routes = makeRoutes();
  many = invoking();
});

after(() => server.close());

test("a workflow of every step kind runs to its end", async () => {
  const { workflowRunId } = await client.trigger({ url: `${base}/every`, body: { order: 7 } });
  const r = seen(workflowRunId);
  const waiters = await until("the run to wait for its event", async () => {
    const w = await client.getWaiters({ eventId: `event-${workflowRunId}` });
    return w.length > 0 && w;
  }, 30000);
  assert.equal(waiters[0].url, `${base}/every`);
  const told = await client.notify({ eventId: `event-${workflowRunId}`, eventData: { paid: true } });
  assert.equal(told.length, 1);
  assert.ok(told[0].messageId, JSON.stringify(told));
  await until("the run to finish", () => r.result, 30000);
  assert.equal(r.result.first, "order 7");
  assert.equal(r.result.left, "L");
  assert.equal(r.result.right, "R");
  assert.equal(r.result.called.status, 200);
  assert.equal(r.result.called.body, 'third party got {"x":7}');
  assert.deepEqual(r.result.event, { eventData: { paid: true }, timeout: false });
  assert.deepEqual(r.result.quiet, { eventData: undefined, timeout: true });
  assert.equal(r.result.toldWaiters, 0);
  assert.deepEqual(r.steps.filter((s) => s === "last"), ["last"]);
  // The run ended: its log is gone, as the SDK's end asked.
  await until("the run's log to go", async () => {
    const res = await fetch(`${RETRYD_URL}/v2/workflows/runs/${workflowRunId}`, { headers: { authorization: `Bearer ${RETRYD_TOKEN}` } });
    return res.status === 404;
  });
  // The logs keep it: its state and its steps, in order.
  const { runs } = await client.logs({ workflowRunId });
  assert.equal(runs.length, 1);
  assert.equal(runs[0].workflowState, "RUN_SUCCESS");
  assert.equal(runs[0].workflowUrl, `${base}/every`);
  assert.ok(runs[0].workflowRunCompletedAt >= runs[0].workflowRunCreatedAt);
  const names = runs[0].steps.map((g) => `${g.type}:${g.steps.map((st) => st.stepName).join("+")}`);
  assert.deepEqual(names.slice(0, 5), ["sequential:init", "sequential:first", "sequential:nap", "sequential:until", "parallel:left+right"]);
  assert.ok(names.includes("sequential:last"), names.join(" "));
  assert.equal(runs[0].steps[1].steps[0].out, JSON.stringify("order 7"));
});

test("a run id started twice is one run", async () => {
  const asked = `twice-${Date.now()}`;
  const { workflowRunId } = await client.trigger({ url: `${base}/sleepy`, body: {}, workflowRunId: asked });
  const again = await client.trigger({ url: `${base}/sleepy`, body: {}, workflowRunId: asked });
  assert.equal(again.workflowRunId, workflowRunId);
  await until("its first step", () => seen(workflowRunId).steps.includes("before"));
  // The second start made nothing: once the first step's result is in
  // the log, the run has run its first step once.
  await until("the first step's result in the log", async () => (await runLog(workflowRunId)).length >= 2);
  assert.deepEqual(seen(workflowRunId).steps, ["before"]);
  await client.cancel({ ids: workflowRunId });
  assert.deepEqual(seen(workflowRunId).steps, ["before"]);
});

test("a failing step calls the failure function with its error", async () => {
  const { workflowRunId } = await client.trigger({ url: `${base}/failing`, body: {}, headers: { "x-caller": "tester" }, retries: 1 });
  const r = seen(workflowRunId);
  await until("the failure function", () => r.failures.length > 0, 30000);
  assert.equal(r.doomedHeader, "tester");
  assert.equal(r.doomedCalls, 2); // one retry, as the start set
  // The logs show the run failed, its failed step in the DLQ.
  const { runs } = await client.logs({ workflowRunId });
  assert.equal(runs[0].workflowState, "RUN_FAILED");
  assert.ok(runs[0].dlqId);
  const next = runs[0].steps.find((g) => g.type === "next");
  assert.equal(next.steps[0].state, "STEP_FAILED");
  assert.equal(next.steps[0].messageId, runs[0].dlqId);
  assert.equal(r.failures[0].failStatus, 500);
  assert.equal(r.failures[0].failResponse, "doomed on purpose");
  assert.equal(r.failures[0].auth, "tester");
  // Resumed from the DLQ once the cause is fixed, the run goes on from
  // its failed step.
  const { messages } = await client.dlq.list({ filter: { workflowRunId } });
  assert.equal(messages.length, 1);
  assert.equal(messages[0].dlqId, runs[0].dlqId);
  assert.equal(messages[0].workflowUrl, `${base}/failing`);
  r.healed = true;
  const resumed = await client.dlq.resume({ dlqId: messages[0].dlqId });
  assert.equal(resumed.workflowRunId, workflowRunId);
  await until("the resumed run's end", () => r.after, 30000);
  assert.equal(r.fine, 1);
  await until("the resumed run's success in the logs", async () => (await client.logs({ workflowRunId })).runs[0].workflowState === "RUN_SUCCESS");
});

test("a failed run restarted from the DLQ runs again from its start, with its start's settings", async () => {
  const { workflowRunId } = await client.trigger({ url: `${base}/failing`, body: {}, retries: 0, headers: { "x-caller": "restarter" } });
  const r = seen(workflowRunId);
  await until("the failure function", () => r.failures.length > 0, 30000);
  const { messages } = await client.dlq.list({ filter: { workflowRunId } });
  // Canceled meanwhile: the run has ended, and is restarted all the same.
  await client.cancel({ ids: workflowRunId });
  r.healed = true;
  r.doomedHeader = undefined;
  const restarted = await client.dlq.restart({ dlqId: messages[0].dlqId });
  assert.equal(restarted.workflowRunId, workflowRunId);
  await until("the restarted run's end", () => r.after, 30000);
  assert.equal(r.fine, 2);
  assert.equal(r.doomedHeader, "restarter");
  assert.equal((await client.dlq.list({ filter: { workflowRunId } })).messages.length, 0);
});

test("a failed run's message deleted from the DLQ is gone", async () => {
  const { workflowRunId } = await client.trigger({ url: `${base}/failing`, body: {}, retries: 0 });
  const r = seen(workflowRunId);
  await until("the failure function", () => r.failures.length > 0, 30000);
  const { messages } = await client.dlq.list({ filter: { workflowRunId } });
  const { deleted } = await client.dlq.delete(messages[0].dlqId);
  assert.equal(deleted, 1);
  assert.equal((await client.dlq.list({ filter: { workflowRunId } })).messages.length, 0);
  await client.cancel({ ids: workflowRunId });
});

test("a canceled run takes no further step", async () => {
  const { workflowRunId } = await client.trigger({ url: `${base}/sleepy`, body: {} });
  const r = seen(workflowRunId);
  await until("its first step", () => r.steps.includes("before"));
  // The sleep's message is published once the first step's result is
  // delivered.
  await until("the first step's result in the log", async () => (await runLog(workflowRunId)).length >= 2);
  const started = await client.logs({ workflowRunId, state: "RUN_STARTED" });
  assert.equal(started.runs.length, 1);
  assert.equal(started.runs[0].steps.find((g) => g.type === "next").steps[0].state, "STEP_PROGRESS"); // the sleep
  const { cancelled } = await client.cancel(workflowRunId);
  assert.equal(cancelled, 1);
  assert.equal((await client.logs({ workflowRunId })).runs[0].workflowState, "RUN_CANCELED");
  const res = await fetch(`${RETRYD_URL}/v2/workflows/runs/${workflowRunId}`, { headers: { authorization: `Bearer ${RETRYD_TOKEN}` } });
  assert.equal(res.status, 404);
  assert.deepEqual(r.steps, ["before"]);
});

test("an invoked run returns its result, its failure or its cancel to the run that invoked it", async () => {
  const { workflowRunId } = await client.trigger({ url: `${base}/many/parent`, body: {} });
  const r = seen(workflowRunId);
  await until("the parent's end", () => r.result, 60000);
  assert.deepEqual(r.result.ok, { body: { doubled: 42, header: "parent" }, isFailed: false, isCanceled: false });
  assert.deepEqual(r.result.failed, { body: undefined, isFailed: true, isCanceled: false });
  assert.deepEqual(r.result.canceled, { body: undefined, isFailed: false, isCanceled: true });
  assert.deepEqual(r.steps, ["last"]);
  // The logs name each child's invoker.
  const { runs } = await client.logs({ workflowUrl: `${base}/many/child` });
  assert.equal(runs.length, 1);
  assert.equal(runs[0].invoker.workflowRunId, workflowRunId);
  assert.equal(runs[0].workflowRunResponse, JSON.stringify({ doubled: 42, header: "parent" }));
});

test("the runs a filter selects are canceled", async () => {
  const a = await client.trigger({ url: `${base}/sleepy`, body: {} });
  const b = await client.trigger({ url: `${base}/sleepy`, body: {} });
  for (const { workflowRunId } of [a, b]) await until("its first step", () => seen(workflowRunId).steps.includes("before"));
  const { cancelled } = await client.cancel({ urlStartingWith: `${base}/sleepy` });
  assert.equal(cancelled, 2);
  for (const { workflowRunId } of [a, b]) {
    assert.equal((await client.logs({ workflowRunId })).runs[0].workflowState, "RUN_CANCELED");
  }
});

test("a run waits for its webhook, and hears the call", async () => {
  const { workflowRunId } = await client.trigger({ url: `${base}/hooked`, body: {} });
  const r = seen(workflowRunId);
  await until("the webhook's URL", () => r.hook, 30000);
  assert.ok(r.hook.startsWith(`${RETRYD_URL}/v2/workflows/hooks/`), r.hook);
  // Called before the run waits, the webhook says so; then it is heard.
  await until("the webhook to be heard", async () => {
    const res = await fetch(r.hook, { method: "POST", body: "hello hook", headers: { "x-hook": "yes" } });
    return res.status === 200;
  }, 30000);
  await until("the run's end", () => r.result, 30000);
  assert.deepEqual(r.result, { timeout: false, method: "POST", body: "hello hook", header: "yes" });
  const again = await fetch(r.hook, { method: "POST", body: "again" });
  assert.equal(again.status, 404);
});

test("a run outlives the worker that was delivering its step", { skip: !KILL_FILE }, async () => {
  const { workflowRunId } = await client.trigger({ url: `${base}/durable`, body: {} });
  const r = seen(workflowRunId);
  await until("the run's end", () => r.result !== undefined, 90000);
  assert.equal(r.result, 3);
  assert.ok(r.killed);
  assert.deepEqual(r.steps.filter((s) => s === "c"), ["c"]);
});
