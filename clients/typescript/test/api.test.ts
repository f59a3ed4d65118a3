// The client against the REAL memstream API (no mocks): MEMSTREAM_API_URL and MEMSTREAM_API_KEY
// (a key with memory:read and memory:write). MEMSTREAM_TEST_BOUND_USER and MEMSTREAM_TEST_BOUND_KEY
// (a key bound to that one end user) add the reach checks. tests/test_ts_client.py runs this
// against an API and pipeline of its own; by hand, against any stack:
//   MEMSTREAM_API_URL=http://127.0.0.1:8080 MEMSTREAM_API_KEY=msk_… npm test
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { describe, it } from "node:test";

import {
  AccessDenied, Conflict, InvalidInput, type Memory, MemoryClient, NotFound,
} from "memstream-client";

const url = process.env.MEMSTREAM_API_URL;
const apiKey = process.env.MEMSTREAM_API_KEY;
const boundUser = process.env.MEMSTREAM_TEST_BOUND_USER;
const boundKey = process.env.MEMSTREAM_TEST_BOUND_KEY;
const skipAll = !url || !apiKey ? "MEMSTREAM_API_URL and MEMSTREAM_API_KEY are not both set: no API to test against" : false;

const WAIT = { wait_s: 60 };
const T = { timeout: 150_000 };
const mem = new MemoryClient({ baseUrl: url, apiKey, timeoutMs: 90_000 });
const uid = (prefix: string) => `${prefix}-${randomUUID().slice(0, 8)}`;

/** Polls `read` until `ok` holds (a deletion or a pipeline stage without a token to wait for). */
async function until<T>(read: () => Promise<T>, ok: (v: T) => boolean, what: string, ms = 60_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await read();
    if (ok(v)) return v;
    if (Date.now() > deadline) assert.fail(`timed out waiting for ${what}: last ${JSON.stringify(v)}`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

describe("the agent's memory, end to end", { skip: skipAll }, () => {
  const user = uid("ts");
  let stated: Memory;
  let lastToken = "";

  it("add: a memory kept as stated, with metadata, agent and run", T, async () => {
    const res = await mem.add("Prefers metric units", {
      user, infer: false, agentId: "travel-bot", run_id: "r1", importance: 0.7,
      metadata: { source: "settings", priority: 2 },
    });
    assert.equal(res.positions.length, 1);
    assert.equal(res.token, res.positions[0]!.token);
    const page = await mem.getAll(user, { after: res.token, ...WAIT });
    assert.equal(page.memories.length, 1);
    stated = page.memories[0]!;
    assert.equal(stated.content, "Prefers metric units");
    assert.equal(stated.agent_id, "travel-bot");
    assert.equal(stated.run_id, "r1");
    assert.deepEqual(stated.metadata, { source: "settings", priority: 2 });
    assert.equal(stated.importance, 0.7);
    assert.equal(page.next_cursor, null);
  });

  it("add: several messages at once, and inferred from what the user said", T, async () => {
    const batch = await mem.add([{ content: "Owns a blue bicycle" }, { content: "Plays chess on Sundays" }],
      { user, infer: false, agent_id: "coach", metadata: { source: "import", priority: 1 } });
    assert.equal(batch.positions.length, 2);
    const inferred = await mem.add([{ role: "user", content: "I live in Porto." },
      { role: "assistant", content: "Nice city!" }], { user, runId: "onboarding" });
    lastToken = inferred.token;
    const all = await until(() => mem.getAll(user, { after: inferred.token, ...WAIT }),
      (p) => p.memories.length === 4, "four memories");
    const porto = all.memories.find((m) => m.content === "User lives in Porto");
    assert.ok(porto, JSON.stringify(all.memories.map((m) => m.content)));
    assert.equal(porto.run_id, "onboarding");
  });

  it("addTurns: a batch published in order; recordTurn and the session window", T, async () => {
    const positions = await mem.addTurns([0, 1, 2].map((i) => ({
      user, session: "s1", role: "user" as const, content: `I have a dog named Rex${i}`, agent_id: "a1",
    })));
    assert.equal(positions.length, 3);
    const offsets = positions.map((p) => [p.partition, p.offset] as const);
    assert.equal(new Set(offsets.map(([p]) => p)).size, 1, "one user: one partition");
    assert.deepEqual(offsets, [...offsets].sort((a, b) => a[1] - b[1]));
    const last = await mem.recordTurn({ user, session: "s1", role: "assistant", content: "Three dogs named Rex!" });
    lastToken = positions[2]!.token;
    const window = await mem.session(user, "s1", { after: last.token, ...WAIT }) as { messages: { content: string }[] };
    assert.deepEqual(window.messages.map((m) => m.content).slice(0, 4),
      ["I have a dog named Rex0", "I have a dog named Rex1", "I have a dog named Rex2", "Three dogs named Rex!"]);
  });

  it("getAll: the agent and metadata filters, paging", T, async () => {
    const byAgent = await mem.getAll(user, { agentId: "travel-bot", after: lastToken, ...WAIT });
    assert.deepEqual(byAgent.memories.map((m) => m.memory_id), [stated.memory_id]);
    assert.deepEqual((await mem.getAll(user, { agent_id: "nobody" })).memories, []);
    const coach = await mem.getAll(user, { filters: { agent_id: "coach" } });
    assert.deepEqual(coach.memories.map((m) => m.content).sort(), ["Owns a blue bicycle", "Plays chess on Sundays"]);
    const cases: [object, string[]][] = [
      [{ metadata: { priority: { gte: 2 } } }, ["Prefers metric units"]],
      [{ metadata: { priority: { gt: 2 } } }, []],
      [{ and: [{ metadata: { source: "import" } }, { agent_id: { ne: "travel-bot" } }] },
        ["Owns a blue bicycle", "Plays chess on Sundays"]],
      [{ or: [{ run_id: "onboarding" }, { metadata: { source: "settings" } }] }, ["Prefers metric units", "User lives in Porto"]],
    ];
    for (const [filters, want] of cases) {
      const page = await mem.getAll(user, { filters });
      assert.deepEqual(page.memories.map((m) => m.content).sort(), want, JSON.stringify(filters));
    }
    // paging: every memory once (the dog turns made memories too: compare with one big page)
    const whole = (await mem.getAll(user, { limit: 200 })).memories.map((m) => m.memory_id);
    assert.ok(whole.length >= 4);
    const first = await mem.getAll(user, { limit: 2 });
    assert.equal(first.memories.length, 2);
    assert.ok(first.next_cursor);
    const ids: string[] = [];
    for await (const m of mem.iterAll(user, { limit: 2 })) ids.push(m.memory_id);
    assert.deepEqual(ids, whole);
  });

  it("get and history", T, async () => {
    const one = await mem.get(user, stated.memory_id);
    assert.equal(one.content, "Prefers metric units");
    const hist = await mem.history(user, stated.memory_id, WAIT);
    assert.equal(hist.memory_id, stated.memory_id);
    const first = hist.versions[0] as { type: string; content: string; caused_by: { type: string } };
    assert.equal(first.type, "memory.created");
    assert.equal(first.content, "Prefers metric units");
    assert.equal(first.caused_by.type, "fact.extracted");
  });

  it("search: recall with its filters", T, async () => {
    const hits = await mem.search(user, "which units does the user prefer?", { k: 3, ...WAIT, after: lastToken });
    assert.equal(hits[0]?.content, "Prefers metric units", JSON.stringify(hits));
    assert.ok("similarity" in hits[0]!.why);
    const inCategory = await mem.search(user, "units", { k: 10, categories: [stated.category] });
    assert.ok(inCategory.length > 0 && inCategory.every((h) => h.category === stated.category));
    const other = stated.category === "tool_failure" ? "policy" : "tool_failure";
    assert.deepEqual(await mem.search(user, "units", { categories: [other] }), []);
    // Mem0-style filters (agent, run, metadata), applied in SQL before ranking
    const q = "what does the user like to do?";
    const coach = await mem.search(user, q, { k: 10, filters: { agent_id: "coach" } });
    assert.deepEqual(coach.map((h) => h.content).sort(), ["Owns a blue bicycle", "Plays chess on Sundays"]);
    const important = await mem.search(user, q, { k: 10, filters: { metadata: { priority: { gte: 2 } } } });
    assert.deepEqual(important.map((h) => h.content), ["Prefers metric units"]);
    const either = await mem.search(user, q, { k: 10, filters: { or: [{ run_id: "onboarding" }, { agent_id: "travel-bot" }] } });
    assert.deepEqual(either.map((h) => h.content).sort(), ["Prefers metric units", "User lives in Porto"]);
  });

  it("context: prompt text within a budget", T, async () => {
    const ctx = await mem.context(user, "plan a trip: which units should I use?", { session: "s1", budget: 300 });
    assert.match(ctx.text, /Prefers metric units/);
    assert.equal((ctx.slots as { total: { budget: number } }).total.budget, 300);
    const coachOnly = await mem.context(user, "what are the user's hobbies?", { filters: { agent_id: "coach" } });
    // the recall slot reads through the filters (the profile slot stays the user's, every agent's)
    const relevant = coachOnly.text.split("## Relevant memories")[1] ?? "";
    assert.match(relevant, /chess/, coachOnly.text);
    assert.doesNotMatch(relevant, /Porto|metric/, coachOnly.text);
    const profile = await mem.profile(user);
    assert.equal(typeof profile, "object");
  });

  it("recordStep and the task's steps", T, async () => {
    const step = await mem.recordStep({ user, task: "t1", content: "opened the editor", kind: "tool" });
    const steps = await mem.taskSteps(user, "t1", { k: 5, after: step.token, ...WAIT }) as { steps: { content: string }[] };
    assert.deepEqual(steps.steps.map((s) => s.content), ["opened the editor"]);
  });

  it("update: an edit makes a new version", T, async () => {
    const res = await mem.update(user, stated.memory_id, { content: "Prefers imperial units", importance: 0.9 });
    assert.ok(res.token && res.memory_id);
    const now = await until(() => mem.get(user, res.memory_id, { after: res.token, ...WAIT }),
      (m) => m.content === "Prefers imperial units", "the updated memory");
    assert.equal(now.importance, 0.9);
    const hist = await mem.history(user, res.memory_id, WAIT);
    assert.ok(hist.versions.length >= 1);
    const listed = await mem.getAll(user, { after: res.token, ...WAIT });
    assert.ok(listed.memories.some((m) => m.content === "Prefers imperial units"));
    assert.ok(!listed.memories.some((m) => m.content === "Prefers metric units"));
    // the edited version is outdated now: only the active one can be edited
    await assert.rejects(mem.update(user, stated.memory_id, { importance: 0.1 }), Conflict);
    stated = now;
  });

  it("delete one, then all", T, async () => {
    const gone = await mem.delete(user, stated.memory_id, { reason: "user asked" });
    assert.ok(gone.memory_ids.includes(stated.memory_id));
    await until(() => mem.getAll(user), (p) => !p.memories.some((m) => m.memory_id === stated.memory_id),
      "the deleted memory to leave the list");
    await assert.rejects(until(() => mem.get(user, stated.memory_id).then(() => false, (e: unknown) => {
      throw e;
    }), () => false, "a 404", 30_000), NotFound);
    const all = await mem.deleteAll(user);
    assert.deepEqual((await mem.getAll(user, { after: all.token, ...WAIT })).memories, []);
  });
});

describe("errors from the real API", { skip: skipAll }, () => {
  it("a 422 names the field", T, async () => {
    const err = await mem.search("someone", "q", { k: 0 }).catch((e: unknown) => e);
    assert.ok(err instanceof InvalidInput, String(err));
    assert.equal(err.status, 422);
    assert.ok(err.problems.some((p) => p.startsWith("k: ")), JSON.stringify(err.problems));
    const bad = await mem.add("x", { user: "someone", infer: true, category: "fact" }).catch((e: unknown) => e);
    assert.ok(bad instanceof InvalidInput && /category/.test(bad.message), String(bad));
    const meta = await mem.addTurns([{ user: "someone", session: "s", role: "user", content: "ok" },
      { user: "someone", session: "s", role: "user", content: "x", metadata: { k: [1, 2] as never } }]).catch((e: unknown) => e);
    assert.ok(meta instanceof InvalidInput && meta.problems.some((p) => p.startsWith("turns.1")), String(meta));
  });

  it("a bad key is AccessDenied", T, async () => {
    const err = await new MemoryClient({ baseUrl: url, apiKey: "msk_nobody_nothing" }).profile("someone")
      .catch((e: unknown) => e);
    assert.ok(err instanceof AccessDenied && err.status === 401, String(err));
  });

  it("an `after` past the end of the log is a Conflict", T, async () => {
    const pos = await mem.recordTurn({ user: uid("ts"), session: "s", role: "user", content: "hello" });
    const [topic, partition, offset] = pos.token.split(":");
    const err = await mem.profile("someone", { after: `${topic}:${partition}:${Number(offset) + 1_000_000}`, wait_s: 1 })
      .catch((e: unknown) => e);
    assert.ok(err instanceof Conflict && err.status === 409, String(err));
  });

  it("another user's memory, through a key bound to one user, is NotFound", {
    ...T, skip: !boundUser || !boundKey ? "MEMSTREAM_TEST_BOUND_USER / MEMSTREAM_TEST_BOUND_KEY not set" : false,
  }, async () => {
    const bound = new MemoryClient({ baseUrl: url, apiKey: boundKey, timeoutMs: 90_000 });
    const other = uid("ts-other");
    const theirs = await mem.add("Keeps bees", { user: other, infer: false });
    const [m] = (await until(() => mem.getAll(other, { after: theirs.token, ...WAIT }), (p) => p.memories.length === 1,
      "the other user's memory")).memories;
    // their memory, named under the bound user or under its own: as if it did not exist
    await assert.rejects(bound.get(boundUser!, m!.memory_id), NotFound);
    await assert.rejects(bound.history(boundUser!, m!.memory_id), NotFound);
    await assert.rejects(bound.getAll(other), (e: unknown) => e instanceof NotFound || e instanceof AccessDenied);
    // its own user's memories are within reach
    const own = await bound.add("Likes hiking", { user: boundUser!, infer: false });
    const mine = await bound.getAll(boundUser!, { after: own.token, ...WAIT });
    assert.ok(mine.memories.some((x) => x.content === "Likes hiking"));
    assert.equal((await mem.get(other, m!.memory_id)).content, "Keeps bees");
  });

  it("an id with '/' is refused before sending", async () => {
    await assert.rejects(mem.get("a/b", "m1"), InvalidInput);
  });
});
