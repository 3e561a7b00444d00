// until polls cond every 25 ms until it returns something truthy, which it
// returns; past ms it throws, naming what it waited for. Shared by the
// node:test suites: they synchronise by polling with a deadline, never by
// sleeping.
async function until(what, cond, ms = 15000) {
  const end = Date.now() + ms;
  for (;;) {
    const v = await cond();
    if (v) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

module.exports = { until };
