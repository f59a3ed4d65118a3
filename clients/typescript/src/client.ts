/**
 * MemoryClient: memstream's HTTP API with Mem0-like verbs (add, search, getAll, get, update,
 * delete, deleteAll, history) plus the agent loop's own (recordTurn, recordStep, context, profile).
 *
 * Every write answers a position whose `token` a read takes as `after` (read your writes: the read
 * waits, up to `wait_s`, until the memory it needs has been applied). Every call sends the API
 * key as `Authorization: Bearer …`. 503 and 429 are retried (`maxRetries`, honouring Retry-After
 * up to `maxRetryDelayMs`); other errors raise at once (src/errors.ts).
 */
import { errorFor, InvalidInput, MemstreamError, RequestTimeout, Unavailable } from "./errors.js";
import type {
  AddOptions, AddResult, Context, ContextOptions, DeleteAllOptions, DeleteOptions, DeleteSessionOptions,
  FilterOptions, Forgotten,
  GetAllOptions, JsonBody, ListOptions, Memory, MemoryHistory, MemoryPage, Message, Method, Path, Position,
  Positions, Preferences, Profile, ProfileOptions, QueryOf, ReadOptions, RecallHit, SearchOptions, SessionWindow,
  Step, Success, TaskFinish, TaskStart, TaskSteps, TaskStepsOptions, Turn, UpdateFields, UpdateResult,
} from "./types.js";

export interface ClientOptions {
  /** The API's base URL. Default: $MEMSTREAM_API_URL, else http://127.0.0.1:8080. */
  baseUrl?: string;
  /** The API key. Default: $MEMSTREAM_API_KEY (none: the server answers 401, raised as AccessDenied). */
  apiKey?: string;
  /** Per attempt, in milliseconds (default 30 000): the request is aborted and RequestTimeout raised. */
  timeoutMs?: number;
  /** Retries after a 503 or 429 (default 3); 0 turns retrying off. */
  maxRetries?: number;
  /** The longest wait before a retry, whatever Retry-After says (default 10 000 ms). */
  maxRetryDelayMs?: number;
  /** Extra headers on every request. */
  headers?: Record<string, string>;
  /** The fetch to use (default: the global one). */
  fetch?: typeof fetch;
}

type QueryValue = string | number | boolean | null | undefined;
interface CallSpec {
  path?: Record<string, string>;
  query?: Record<string, QueryValue>;
  body?: unknown;
}

declare const process: { env: Record<string, string | undefined> } | undefined;

function env(name: string): string | undefined {
  return typeof process === "undefined" ? undefined : process.env?.[name] || undefined;
}

function segment(value: string, what: string): string {
  if (typeof value !== "string" || value.length === 0) {
    throw new InvalidInput(`${what} must be a non-empty string`);
  }
  // the server's router decodes %2F before matching: an id with '/' cannot be carried in a path
  if (value.includes("/")) {
    throw new InvalidInput(`${what} ${JSON.stringify(value)} contains '/', which a URL path of the HTTP API cannot carry`);
  }
  return encodeURIComponent(value);
}

/** `agentId`/`runId` folded into `agent_id`/`run_id` (both of a pair, disagreeing: refused). */
function scope<T extends { agentId?: string; runId?: string; agent_id?: string | null; run_id?: string | null }>(
  o: T): Omit<T, "agentId" | "runId"> {
  const { agentId, runId, ...rest } = o;
  const out: Record<string, unknown> = rest;
  for (const [alias, name, value] of [["agentId", "agent_id", agentId], ["runId", "run_id", runId]] as const) {
    if (value === undefined) continue;
    if (out[name] != null && out[name] !== value) {
      throw new InvalidInput(`${alias} and ${name} disagree: give one of them`);
    }
    out[name] = value;
  }
  return out as Omit<T, "agentId" | "runId">;
}

function retryAfterMs(header: string | null): number | undefined {
  if (!header) return undefined;
  const s = Number(header);
  if (Number.isFinite(s) && s >= 0) return s * 1000;
  const at = Date.parse(header);   // an HTTP date
  return Number.isNaN(at) ? undefined : Math.max(0, at - Date.now());
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

export class MemoryClient {
  readonly baseUrl: string;
  private readonly apiKey?: string;
  private readonly timeoutMs: number;
  private readonly maxRetries: number;
  private readonly maxRetryDelayMs: number;
  private readonly headers: Record<string, string>;
  private readonly fetchImpl: typeof fetch;

  constructor(options: ClientOptions = {}) {
    this.baseUrl = (options.baseUrl ?? env("MEMSTREAM_API_URL") ?? "http://127.0.0.1:8080").replace(/\/+$/, "");
    this.apiKey = options.apiKey ?? env("MEMSTREAM_API_KEY");
    this.timeoutMs = options.timeoutMs ?? 30_000;
    this.maxRetries = Math.max(0, options.maxRetries ?? 3);
    this.maxRetryDelayMs = Math.max(0, options.maxRetryDelayMs ?? 10_000);
    this.headers = options.headers ?? {};
    const f = options.fetch ?? globalThis.fetch;
    if (typeof f !== "function") throw new MemstreamError("no fetch: use Node >= 18 or pass options.fetch");
    this.fetchImpl = f.bind(globalThis);
  }

  // -- writes ------------------------------------------------------------------------------------
  /**
   * Add memories (POST /v1/memories). `infer: true` (the default) extracts from the text as from
   * a user turn; `infer: false` keeps each text as stated (with `category`, `importance`). Either
   * way the server decides them like any fact (dedup, conflicts): pass the answer's `token` as
   * `after` to a read to see the result.
   */
  add(input: string | Message[], options: AddOptions): Promise<AddResult> {
    const text = typeof input === "string" ? { content: input } : { messages: input };
    return this.call("post", "/v1/memories", { body: { ...scope(options), ...text } });
  }

  /** Publish several turns in order (POST /v1/turns/batch, at most 100): all checked, then all published. */
  async addTurns(turns: Turn[]): Promise<Position[]> {
    const out: Positions = await this.call("post", "/v1/turns/batch", { body: { turns } });
    return out.positions;
  }

  /** Publish one conversation turn (POST /v1/turns). */
  recordTurn(turn: Turn): Promise<Position> {
    return this.call("post", "/v1/turns", { body: turn });
  }

  /** Publish one task step (POST /v1/steps). */
  recordStep(step: Step): Promise<Position> {
    return this.call("post", "/v1/steps", { body: step });
  }

  /** Start a task (POST /v1/tasks/start): its step buffer starts over. */
  startTask(task: TaskStart): Promise<Position> {
    return this.call("post", "/v1/tasks/start", { body: task });
  }

  /** Finish a task (POST /v1/tasks/finish) with its outcome. */
  finishTask(task: TaskFinish): Promise<Position> {
    return this.call("post", "/v1/tasks/finish", { body: task });
  }

  /**
   * Edit a memory as a new version (PATCH /v1/users/{user}/memories/{id}): at least one of
   * content, category, importance, metadata (null clears it); the rest stay the memory's own. The
   * answer's `memory_id` is the new version (the edited one becomes outdated); only an active
   * memory can be edited (Conflict otherwise).
   */
  update(user: string, memoryId: string, fields: UpdateFields): Promise<UpdateResult> {
    return this.call("patch", "/v1/users/{user}/memories/{memory_id}", { path: { user, memory_id: memoryId }, body: fields });
  }

  /** Delete one memory for good, and every memory merged into it (DELETE …/memories/{id}). */
  delete(user: string, memoryId: string, options: DeleteOptions = {}): Promise<Forgotten> {
    return this.call("delete", "/v1/users/{user}/memories/{memory_id}",
      { path: { user, memory_id: memoryId }, query: options });
  }

  /** Delete all of a user's memories (DELETE /v1/users/{user}/memories); new turns build new memory. */
  deleteAll(user: string, options: DeleteAllOptions = {}): Promise<Position> {
    return this.call("delete", "/v1/users/{user}/memories", { path: { user }, query: options });
  }

  /**
   * Clear one conversation session (DELETE /v1/users/{user}/sessions/{session}): its messages and
   * summary leave the session window and the memories learned in it (`memory_ids`) are deleted.
   * Pass the answer's token as `after` to `session` to read the empty window.
   */
  deleteSession(user: string, session: string, options: DeleteSessionOptions = {}): Promise<Forgotten> {
    return this.call("delete", "/v1/users/{user}/sessions/{session}", { path: { user, session }, query: options });
  }

  // -- reads -------------------------------------------------------------------------------------
  /** Memories relevant to a query, best first (POST /v1/recall). */
  search(user: string, query: string, options: SearchOptions = {}): Promise<RecallHit[]> {
    return this.call("post", "/v1/recall", { body: { ...options, user, query } });
  }

  /**
   * One page of a user's memories, oldest first; `next_cursor` (as `cursor`) pages on. Without
   * `filters`: GET /v1/users/{user}/memories (status, category, agent_id, run_id, created_/updated_
   * after/before); with `filters`: POST /v1/memories/search (and/or, eq ne in nin gt gte lt lte,
   * metadata keys).
   */
  getAll(user: string, options: GetAllOptions = {}): Promise<MemoryPage> {
    if (options.filters !== undefined) {
      const { filters, ...rest } = options as FilterOptions;
      const listOnly = Object.keys(rest).filter((k) => !["status", "cursor", "limit", "after", "wait_s"].includes(k));
      if (listOnly.length) {
        throw new InvalidInput(`getAll with filters takes ${listOnly.join(", ")} inside \`filters\`, not beside it`);
      }
      return this.call("post", "/v1/memories/search", { body: { ...rest, user, filters } });
    }
    const { filters: _none, ...query } = scope(options as ListOptions);
    return this.call("get", "/v1/users/{user}/memories", { path: { user }, query });
  }

  /** Every memory getAll would page through, one at a time (follows `next_cursor`). */
  async *iterAll(user: string, options: GetAllOptions = {}): AsyncGenerator<Memory> {
    let cursor = options.cursor ?? undefined;
    do {
      const page = await this.getAll(user, { ...options, cursor } as GetAllOptions);
      yield* page.memories;
      cursor = page.next_cursor ?? undefined;
    } while (cursor);
  }

  /** One memory (GET /v1/users/{user}/memories/{id}); NotFound when it is not the caller's. */
  get(user: string, memoryId: string, options: ReadOptions = {}): Promise<Memory> {
    return this.call("get", "/v1/users/{user}/memories/{memory_id}",
      { path: { user, memory_id: memoryId }, query: options });
  }

  /** A memory's versions, oldest first, and what caused each (GET …/{id}/history). */
  history(user: string, memoryId: string, options: ReadOptions = {}): Promise<MemoryHistory> {
    return this.call("get", "/v1/users/{user}/memories/{memory_id}/history",
      { path: { user, memory_id: memoryId }, query: options });
  }

  /** Prompt context within a token budget (POST /v1/context): `text`, and per slot what was kept and cut. */
  context(user: string, query: string, options: ContextOptions = {}): Promise<Context> {
    return this.call("post", "/v1/context", { body: { ...options, user, query } });
  }

  /** Identity, preferences and policies, by category (GET /v1/users/{user}/profile). */
  profile(user: string, options: ProfileOptions = {}): Promise<Profile> {
    return this.call("get", "/v1/users/{user}/profile", { path: { user }, query: options });
  }

  /** The key-value preference table (GET /v1/users/{user}/preferences). */
  preferences(user: string, options: ProfileOptions = {}): Promise<Preferences> {
    return this.call("get", "/v1/users/{user}/preferences", { path: { user }, query: options });
  }

  /** A session's window of recent messages and its summary (GET /v1/users/{user}/sessions/{session}). */
  session(user: string, session: string, options: ReadOptions = {}): Promise<SessionWindow> {
    return this.call("get", "/v1/users/{user}/sessions/{session}", { path: { user, session }, query: options });
  }

  /** The last `k` steps of a task (GET /v1/users/{user}/tasks/{task}/steps). */
  taskSteps(user: string, task: string, options: TaskStepsOptions = {}): Promise<TaskSteps> {
    return this.call("get", "/v1/users/{user}/tasks/{task}/steps", { path: { user, task }, query: options });
  }

  // -- the wire ------------------------------------------------------------------------------------
  /** A route the server's OpenAPI document declares, typed by it (body, query and answer). */
  private call<P extends Path, M extends Method>(method: M, path: P, spec: {
    path?: Record<string, string>; query?: QueryOf<P, M> | Record<string, QueryValue>; body?: JsonBody<P, M>;
  }): Promise<Success<P, M>> {
    return this.request(method, path, spec as CallSpec) as Promise<Success<P, M>>;
  }

  /** One request, retried on 503/429. */
  async request(method: Method, template: string, spec: CallSpec = {}): Promise<unknown> {
    const url = new URL(this.baseUrl + template.replace(/\{(\w+)\}/g, (_, name: string) => {
      const value = spec.path?.[name];
      if (value === undefined) throw new InvalidInput(`missing path parameter ${name}`);
      return segment(value, name === "memory_id" ? "memory id" : name);
    }));
    for (const [k, v] of Object.entries(spec.query ?? {})) {
      if (v !== undefined && v !== null) url.searchParams.set(k, String(v));
    }
    const headers: Record<string, string> = { Accept: "application/json", ...this.headers };
    if (this.apiKey) headers.Authorization = `Bearer ${this.apiKey}`;
    let body: string | undefined;
    if (spec.body !== undefined) {
      headers["Content-Type"] = "application/json";
      body = JSON.stringify(spec.body);
    }
    for (let attempt = 0; ; attempt++) {
      const { status, data, retryAfter } = await this.once(method, url, headers, body);
      if (status < 400) return data;
      const retriable = status === 503 || status === 429;
      if (retriable && attempt < this.maxRetries) {
        const wait = retryAfter ?? 500 * 2 ** attempt;
        await sleep(Math.min(wait, this.maxRetryDelayMs));
        continue;
      }
      throw errorFor(status, data, retryAfter === undefined ? undefined : retryAfter / 1000);
    }
  }

  private async once(method: Method, url: URL, headers: Record<string, string>, body?: string) {
    const controller = new AbortController();
    const timer = setTimeout(() => controller.abort(), this.timeoutMs);
    try {
      const resp = await this.fetchImpl(url, { method: method.toUpperCase(), headers, body, signal: controller.signal });
      const text = await resp.text();   // within the timeout too
      let data: unknown = text;
      try {
        data = text ? JSON.parse(text) : null;
      } catch {
        data = text.slice(0, 300);
      }
      return { status: resp.status, data, retryAfter: retryAfterMs(resp.headers.get("retry-after")) };
    } catch (err) {
      if (controller.signal.aborted) {
        throw new RequestTimeout(`${method.toUpperCase()} ${url.pathname}: no answer within ${this.timeoutMs} ms`,
          { cause: err });
      }
      throw new Unavailable(`${method.toUpperCase()} ${url.pathname}: cannot reach ${this.baseUrl}: ${String(err)}`,
        { cause: err });
    } finally {
      clearTimeout(timer);
    }
  }
}
