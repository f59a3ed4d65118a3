/**
 * The client's request and answer types, all derived from src/openapi.d.ts (generated from the
 * server's OpenAPI document): when the server changes a route or a field, regenerating that file
 * makes `tsc` fail wherever the client no longer matches.
 */
import type { components, paths } from "./openapi.js";

type Schemas = components["schemas"];

export type Method = "get" | "post" | "patch" | "delete";
/** The routes the server declares, and per route the methods it serves. */
export type Path = keyof paths;
export type Op<P extends Path, M extends Method> = NonNullable<paths[P][M]>;

/** The JSON body a route takes. */
export type JsonBody<P extends Path, M extends Method> =
  Op<P, M> extends { requestBody: { content: { "application/json": infer B } } } ? B
    : Op<P, M> extends { requestBody?: { content: { "application/json": infer B } } } ? B : never;

/** The query parameters a route takes. */
export type QueryOf<P extends Path, M extends Method> =
  Op<P, M> extends { parameters: { query?: infer Q } } ? NonNullable<Q> : never;

type JsonOf<R> = R extends { content: { "application/json": infer T } } ? T : never;
/** What a route answers on success (its 200, 201 or 202). */
export type Success<P extends Path, M extends Method> =
  Op<P, M> extends { responses: infer R }
    ? R extends { 200: infer A } ? JsonOf<A>
      : R extends { 201: infer A } ? JsonOf<A>
        : R extends { 202: infer A } ? JsonOf<A> : never
    : never;

// -- answers -----------------------------------------------------------------------------------
/** A publish's position: pass `token` as `after` to a read to see the write (read your writes). */
export type Position = Schemas["Position"];
export type AddResult = Schemas["MemoryAddOut"];
export type Positions = Schemas["PositionsOut"];
export type Memory = Schemas["MemoryOut"];
export type MemoryPage = Schemas["MemoryPageOut"];
export type MemoryHistory = Schemas["MemoryHistoryOut"];
export type RecallHit = Schemas["RecallHitOut"];
export type Forgotten = Schemas["ForgottenOut"];
export type Context = Schemas["ContextOut"];
export type Profile = Success<"/v1/users/{user}/profile", "get">;
export type Preferences = Success<"/v1/users/{user}/preferences", "get">;
export type SessionWindow = Success<"/v1/users/{user}/sessions/{session}", "get">;
export type TaskSteps = Success<"/v1/users/{user}/tasks/{task}/steps", "get">;

// -- requests ----------------------------------------------------------------------------------
export type Turn = Schemas["TurnIn"];
export type Step = Schemas["StepIn"];
export type Message = Schemas["MessageIn"];
export type MemoryFilter = Schemas["MemoryFilter"];
export type Category = NonNullable<Schemas["MemoryAddIn"]["category"]>;
export type Metadata = NonNullable<Schemas["MemoryAddIn"]["metadata"]>;

/** `agentId` / `runId`: the same as `agent_id` / `run_id` (give one of each pair). */
export interface ScopeAliases {
  agentId?: string;
  runId?: string;
}

/** add(): everything POST /v1/memories takes but the text (`user` is required). */
export type AddOptions = Omit<Schemas["MemoryAddIn"], "content" | "messages"> & ScopeAliases;

/** Reads that can wait for a write: `after` (a write's token) and `wait_s` (at most the server's limit). */
export type ReadOptions = { after?: string | null; wait_s?: number };

/** search(): POST /v1/recall's options (k, categories, tags, max_age_hours, min_score, expand, as_of, after, wait_s). */
export type SearchOptions = Omit<JsonBody<"/v1/recall", "post">, "user" | "query">;

/** getAll() without `filters`: GET /v1/users/{user}/memories's parameters (ANDed, in SQL). */
export type ListOptions = QueryOf<"/v1/users/{user}/memories", "get"> & ScopeAliases & { filters?: undefined };

/** getAll() with `filters`: POST /v1/memories/search (the full filter language: and/or, eq ne in nin gt gte lt lte). */
export type FilterOptions = Omit<JsonBody<"/v1/memories/search", "post">, "user" | "filters"> & { filters: MemoryFilter };

export type GetAllOptions = ListOptions | FilterOptions;

export type ContextOptions = Omit<JsonBody<"/v1/context", "post">, "user" | "query">;
export type ProfileOptions = QueryOf<"/v1/users/{user}/profile", "get">;
export type DeleteOptions = QueryOf<"/v1/users/{user}/memories/{memory_id}", "delete">;
export type DeleteAllOptions = QueryOf<"/v1/users/{user}/memories", "delete">;
export type DeleteSessionOptions = QueryOf<"/v1/users/{user}/sessions/{session}", "delete">;
export type TaskStepsOptions = QueryOf<"/v1/users/{user}/tasks/{task}/steps", "get">;
export type TaskStart = JsonBody<"/v1/tasks/start", "post">;
export type TaskFinish = JsonBody<"/v1/tasks/finish", "post">;

/** update(): PATCH /v1/users/{user}/memories/{id}'s fields (at least one; metadata null clears it). */
export type UpdateFields = JsonBody<"/v1/users/{user}/memories/{memory_id}", "patch">;
/** update()'s answer: the position, and `memory_id`, the new version the edit creates. */
export type UpdateResult = Success<"/v1/users/{user}/memories/{memory_id}", "patch">;
