// The client's own mechanics, against a tiny local HTTP server (no memstream needed): retries on
// 503/429 honouring Retry-After with a cap, time-outs, errors, headers and URL encoding.
import assert from "node:assert/strict";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { after, before, describe, it } from "node:test";

import {
  AccessDenied, Conflict, Gone, InvalidInput, MemoryClient, MemstreamError, NotFound, RequestTimeout, Unavailable,
} from "memstream-client";

interface Seen { method: string; url: string; headers: IncomingMessage["headers"]; body: string }
type Handler = (req: Seen, n: number, res: ServerResponse) => void;

let handler: Handler = (_r, _n, res) => res.end("{}");
const seen: Seen[] = [];
const server = createServer((req, res) => {
  let body = "";
  req.on("data", (c) => (body += c));
  req.on("end", () => {
    const s = { method: req.method ?? "", url: req.url ?? "", headers: req.headers, body };
    seen.push(s);
    handler(s, seen.length, res);
  });
});
let base = "";

function answer(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}) {
  res.writeHead(status, { "content-type": "application/json", ...headers });
  res.end(JSON.stringify(body));
}

function reset(h: Handler) {
  seen.length = 0;
  handler = h;
}

before(async () => {
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
after(() => {
  server.closeAllConnections();
  server.close();
});

const POS = { topic: "memstream.turns", partition: 0, offset: 1, token: "memstream.turns:0:1" };

describe("retries", () => {
  it("retries a 503 after its Retry-After (seconds), then answers", async () => {
    reset((_r, n, res) => (n === 1 ? answer(res, 503, { error: "not applied yet" }, { "Retry-After": "1" })
      : answer(res, 200, [])));
    const c = new MemoryClient({ baseUrl: base, apiKey: "k" });
    const t0 = Date.now();
    assert.deepEqual(await c.search("alice", "hello"), []);
    const waited = Date.now() - t0;
    assert.equal(seen.length, 2, "one retry");
    assert.ok(waited >= 950, `waited ${waited} ms, Retry-After said 1 s`);
    assert.ok(waited < 5000, `waited ${waited} ms`);
  });

  it("caps the wait and gives up after maxRetries with Unavailable (429 too)", async () => {
    reset((_r, _n, res) => answer(res, 429, { error: "slow down" }, { "Retry-After": "120" }));
    const c = new MemoryClient({ baseUrl: base, apiKey: "k", maxRetries: 2, maxRetryDelayMs: 20 });
    const t0 = Date.now();
    const err = await c.profile("alice").catch((e: unknown) => e);
    assert.ok(err instanceof Unavailable && err instanceof MemstreamError, String(err));
    assert.equal(err.status, 429);
    assert.equal(err.retryAfterS, 120);
    assert.match(err.message, /HTTP 429: slow down/);
    assert.equal(seen.length, 3, "the first try and two retries");
    assert.ok(Date.now() - t0 < 2000, "the cap, not Retry-After's 120 s");
  });

  it("does not retry other errors", async () => {
    reset((_r, _n, res) => answer(res, 500, { error: "internal error" }));
    const c = new MemoryClient({ baseUrl: base, apiKey: "k" });
    const err = await c.get("alice", "m1").catch((e: unknown) => e);
    assert.ok(err instanceof MemstreamError && !(err instanceof Unavailable), String(err));
    assert.equal(err.status, 500);
    assert.equal(seen.length, 1);
  });

  it("maxRetries: 0 turns retrying off", async () => {
    reset((_r, _n, res) => answer(res, 503, { error: "down" }, { "Retry-After": "0" }));
    const err = await new MemoryClient({ baseUrl: base, maxRetries: 0 }).profile("a").catch((e: unknown) => e);
    assert.ok(err instanceof Unavailable);
    assert.equal(seen.length, 1);
  });
});

describe("time-outs and unreachable servers", () => {
  it("aborts a request after timeoutMs with RequestTimeout", async () => {
    let hung: ServerResponse | undefined;
    reset((_r, _n, res) => { hung = res; });   // answers only after the test
    const c = new MemoryClient({ baseUrl: base, apiKey: "k", timeoutMs: 150 });
    const t0 = Date.now();
    const err = await c.profile("alice").catch((e: unknown) => e);
    assert.ok(err instanceof RequestTimeout && err instanceof MemstreamError, String(err));
    assert.ok(Date.now() - t0 < 3000);
    hung?.end();
  });

  it("a server that cannot be reached is Unavailable", async () => {
    const c = new MemoryClient({ baseUrl: "http://127.0.0.1:9", apiKey: "k", maxRetries: 0 });
    const err = await c.profile("alice").catch((e: unknown) => e);
    assert.ok(err instanceof Unavailable && err.status === undefined, String(err));
  });
});

describe("errors by status", () => {
  for (const [status, Cls] of [[401, AccessDenied], [403, AccessDenied], [404, NotFound], [409, Conflict],
    [410, Gone], [413, InvalidInput], [422, InvalidInput]] as const) {
    it(`${status} is ${Cls.name}`, async () => {
      reset((_r, _n, res) => answer(res, status, { error: "nope", problems: ["k: too small"] }));
      const err = await new MemoryClient({ baseUrl: base }).search("a", "q").catch((e: unknown) => e);
      assert.ok(err instanceof Cls && err instanceof MemstreamError, String(err));
      assert.equal(err.name, Cls.name);
      assert.equal(err.status, status);
      assert.deepEqual(err.problems, ["k: too small"]);
      assert.equal(err.message, `HTTP ${status}: nope: k: too small`);
    });
  }
});

describe("requests", () => {
  it("sends the key as a Bearer token, from the option or MEMSTREAM_API_KEY", async () => {
    reset((_r, _n, res) => answer(res, 200, {}));
    await new MemoryClient({ baseUrl: base, apiKey: "msk_option" }).profile("a");
    assert.equal(seen[0]!.headers.authorization, "Bearer msk_option");
    const saved = process.env.MEMSTREAM_API_KEY;
    process.env.MEMSTREAM_API_KEY = "msk_env";
    try {
      await new MemoryClient({ baseUrl: base }).profile("a");
    } finally {
      if (saved === undefined) delete process.env.MEMSTREAM_API_KEY; else process.env.MEMSTREAM_API_KEY = saved;
    }
    assert.equal(seen[1]!.headers.authorization, "Bearer msk_env");
  });

  it("encodes path segments and refuses a '/' in one", async () => {
    reset((_r, _n, res) => answer(res, 200, {}));
    const c = new MemoryClient({ baseUrl: base + "/", apiKey: "k" });
    await c.history("a b?#%é", "m_1-x", { after: "memstream.memory:0:5", wait_s: 2 });
    assert.equal(seen[0]!.url, "/v1/users/a%20b%3F%23%25%C3%A9/memories/m_1-x/history?after=memstream.memory%3A0%3A5&wait_s=2");
    const err = await c.get("a/b", "m1").catch((e: unknown) => e);
    assert.ok(err instanceof InvalidInput && /'\/'/.test(err.message), String(err));
    assert.equal(seen.length, 1, "nothing sent");
  });

  it("add: agentId/runId are agent_id/run_id; content or messages", async () => {
    reset((_r, _n, res) => answer(res, 202, { ...POS, positions: [POS] }));
    const c = new MemoryClient({ baseUrl: base, apiKey: "k" });
    await c.add("Likes tea", { user: "a", infer: false, agentId: "bot", runId: "r1", metadata: { n: 1 } });
    await c.add([{ role: "user", content: "hi" }], { user: "a", agent_id: "bot" });
    assert.deepEqual(JSON.parse(seen[0]!.body),
      { user: "a", infer: false, agent_id: "bot", run_id: "r1", metadata: { n: 1 }, content: "Likes tea" });
    assert.deepEqual(JSON.parse(seen[1]!.body), { user: "a", agent_id: "bot", messages: [{ role: "user", content: "hi" }] });
    assert.equal(seen[0]!.headers["content-type"], "application/json");
    assert.throws(() => c.add("x", { user: "a", agentId: "one", agent_id: "two" }), InvalidInput);
  });

  it("getAll: parameters as a query, filters as POST /v1/memories/search", async () => {
    reset((_r, _n, res) => answer(res, 200, { user: "a", memories: [], next_cursor: null }));
    const c = new MemoryClient({ baseUrl: base, apiKey: "k" });
    await c.getAll("a", { agentId: "bot", status: "all", limit: 5, created_after: "2026-01-01T00:00:00Z" });
    const q = new URL(seen[0]!.url, base);
    assert.equal(q.pathname, "/v1/users/a/memories");
    assert.deepEqual(Object.fromEntries(q.searchParams),
      { agent_id: "bot", status: "all", limit: "5", created_after: "2026-01-01T00:00:00Z" });
    await c.getAll("a", { filters: { metadata: { n: { gte: 1 } } }, limit: 2 });
    assert.equal(seen[1]!.method, "POST");
    assert.equal(seen[1]!.url, "/v1/memories/search");
    assert.deepEqual(JSON.parse(seen[1]!.body), { limit: 2, user: "a", filters: { metadata: { n: { gte: 1 } } } });
    // a list parameter beside `filters` belongs inside them
    assert.throws(() => c.getAll("a", { filters: {}, category: "fact" } as never), /inside `filters`/);
  });

  it("update is a PATCH of the fields given (null metadata clears it)", async () => {
    reset((_r, _n, res) => answer(res, 202, { ...POS, memory_id: "m2" }));
    const out = await new MemoryClient({ baseUrl: base }).update("a", "m1", { content: "new", metadata: null });
    assert.equal(out.memory_id, "m2");
    assert.equal(seen[0]!.method, "PATCH");
    assert.equal(seen[0]!.url, "/v1/users/a/memories/m1");
    assert.deepEqual(JSON.parse(seen[0]!.body), { content: "new", metadata: null });
  });

  it("iterAll follows next_cursor", async () => {
    const mem = (id: string) => ({ memory_id: id, content: id, category: "fact", importance: 0.5, status: "active",
      created_at: "2026-01-01T00:00:00Z", updated_at: "2026-01-01T00:00:00Z" });
    reset((r, _n, res) => {
      const cursor = new URL(r.url, base).searchParams.get("cursor");
      answer(res, 200, cursor ? { user: "a", memories: [mem("m3")], next_cursor: null }
        : { user: "a", memories: [mem("m1"), mem("m2")], next_cursor: "c1" });
    });
    const ids: string[] = [];
    for await (const m of new MemoryClient({ baseUrl: base }).iterAll("a", { limit: 2 })) ids.push(m.memory_id);
    assert.deepEqual(ids, ["m1", "m2", "m3"]);
    assert.equal(new URL(seen[1]!.url, base).searchParams.get("cursor"), "c1");
  });
});
