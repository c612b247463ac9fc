// MemorydStore: LangGraph.js's long-term BaseStore on a memoryd server, through the caller's token.
// The same mapping and the same calls as the Python client's MemorydStore (docs/langgraph.md).
import type { MessageInitShape } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import {
  BaseStore,
  validateNamespace,
  type GetOperation,
  type Item,
  type ListNamespacesOperation,
  type MatchCondition,
  type Operation,
  type OperationResults,
  type PutOperation,
  type SearchItem,
  type SearchOperation,
} from "@langchain/langgraph-checkpoint";
import type { MemorydClient } from "../client.js";
import { Category, type MemoryDraftSchema, type MemoryFilterSchema } from "../gen/memoryd/v1/memory_pb.js";
import { Consistency, EraseMode, WriteOutcome } from "../gen/memoryd/v1/memory_service_pb.js";
import {
  comparePy,
  itemData,
  matchesFilter,
  memoryKey,
  namespaceMatches,
  namespaceTags,
  prefixTag,
  storedItem,
  valueText,
} from "./mapping.js";

/** The keyed categories whose new value replaces the current one (the old kept as a version):
 * what a put by key means. Constraints accumulate and events take no key. */
export const CATEGORIES = { fact: Category.FACT, preference: Category.PREFERENCE, goal: Category.GOAL,
  context: Category.CONTEXT } as const;
const MAX_ITEMS = 100; // Write items, filter keys and Recall top_k: the server's default limits
const PAGE = 500; // MemoryView's largest page

export interface MemorydStoreOptions {
  /** The memoryd subject every namespace belongs to; or */
  subject?: string;
  /** the position of the namespace label that names the subject (1 for ["memories", userId]).
   * Exactly one of the two. */
  subjectAt?: number;
  /** The memoryd category of the items (default fact): it decides their time to live and which
   * view rules apply. */
  category?: keyof typeof CATEGORIES;
  /** The value's paths whose text memoryd searches (LangGraph's index fields; ["$"], the default,
   * is the whole value as JSON). */
  indexFields?: string[];
  /** Minutes each put item stays true (memoryd's valid_until); none: the category's own. */
  defaultTtl?: number;
  /** The least relevance a query search returns; 0, the default, ranks every candidate. */
  minRelevance?: number;
  /** Puts return once the items are searchable by meaning (default true). */
  waitIndexed?: boolean;
}

type Draft = MessageInitShape<typeof MemoryDraftSchema>;
type ItemKey = string; // JSON of [namespace, key]: one item

const itemKey = (namespace: readonly string[], key: string): ItemKey => JSON.stringify([namespace, key]);
const isPut = (op: Operation): op is PutOperation => "value" in op;
const isGet = (op: Operation): op is GetOperation => "key" in op && "namespace" in op && !("value" in op);
const isSearch = (op: Operation): op is SearchOperation => "namespacePrefix" in op;
const isList = (op: Operation): op is ListNamespacesOperation => "limit" in op && !("namespacePrefix" in op);

/**
 * A LangGraph.js BaseStore whose items are memoryd memories, shared with the Python store: an item
 * one puts, the other reads. Every call is one of the client's RPCs, so it carries the client's
 * token and the server applies that agent's view: what it hides, get/search/listNamespaces do not
 * return, and what it may not write or erase fails with the server's error (a MemorydError).
 *
 *     const store = new MemorydStore(createMemorydClient({ target, token }), { subjectAt: 1 });
 *     await store.put(["memories", "alice"], "food", { text: "Alice loves Lyon's bouchons" });
 *     await store.search(["memories", "alice"], { query: "where does alice like to eat?" });
 */
export class MemorydStore extends BaseStore {
  readonly client: MemorydClient;
  readonly subject: string | undefined;
  readonly subjectAt: number | undefined;
  readonly category: Category;
  readonly indexFields: string[];
  readonly defaultTtl: number | undefined;
  readonly minRelevance: number;
  readonly waitIndexed: boolean;

  constructor(client: MemorydClient, options: MemorydStoreOptions) {
    super();
    const { subject, subjectAt, category = "fact" } = options;
    if ((subject === undefined) === (subjectAt === undefined)) {
      throw new TypeError("MemorydStore takes subject (one subject for every namespace) or subjectAt " +
        "(the namespace label that names it), exactly one");
    }
    if (subjectAt !== undefined && !(Number.isInteger(subjectAt) && subjectAt >= 0)) {
      throw new RangeError("subjectAt is a position in the namespace, from 0");
    }
    if (!Object.hasOwn(CATEGORIES, category)) {
      throw new RangeError(`category must be one of ${Object.keys(CATEGORIES).join(", ")}, got '${category}'`);
    }
    this.client = client;
    this.subject = subject;
    this.subjectAt = subjectAt;
    this.category = CATEGORIES[category];
    this.indexFields = options.indexFields ?? ["$"];
    this.defaultTtl = options.defaultTtl;
    this.minRelevance = options.minRelevance ?? 0;
    this.waitIndexed = options.waitIndexed ?? true;
  }

  /** Runs `operations`; as in InMemoryStore, reads see the state before the batch's writes. */
  async batch<Op extends Operation[]>(operations: Op): Promise<OperationResults<Op>> {
    for (const op of operations) if (isPut(op)) validateNamespace(op.namespace);
    const results: unknown[] = new Array(operations.length).fill(undefined);
    const gets = new Map<string, [number, GetOperation][]>();
    const puts = new Map<ItemKey, PutOperation>();
    for (const [i, op] of operations.entries()) {
      if (isPut(op)) {
        const id = itemKey(op.namespace, op.key);
        puts.set(id, op); // the last put of a key wins, as in InMemoryStore
      } else if (isGet(op)) {
        const subject = this.#subjectOf(op.namespace);
        if (!gets.has(subject)) gets.set(subject, []);
        gets.get(subject)!.push([i, op]);
      } else if (isSearch(op)) {
        results[i] = await this.#search(op);
      } else if (isList(op)) {
        results[i] = await this.#listNamespaces(op);
      } else {
        throw new TypeError(`unknown operation ${JSON.stringify(op)}`);
      }
    }
    for (const [subject, entries] of gets) {
      const found = await this.#get(subject, entries.map(([, op]) => op));
      for (const [i, op] of entries) results[i] = found.get(itemKey(op.namespace, op.key)) ?? null;
    }
    await this.#apply([...puts.values()]);
    return results as OperationResults<Op>;
  }

  // --- the mapping onto memoryd's calls -------------------------------------------------------

  #subjectOf(namespace: readonly string[]): string {
    if (this.subject !== undefined) return this.subject;
    const at = this.subjectAt ?? 0;
    const label = namespace[at];
    if (label === undefined || label === "*") {
      throw new RangeError(`MemorydStore(subjectAt: ${at}) reads the memoryd subject from label ${at + 1} of the ` +
        `namespace, and ${JSON.stringify(namespace)} does not name it: memoryd lists and searches one subject at a time`);
    }
    return label;
  }

  #filter(prefix: readonly string[], keys: string[] = []): MessageInitShape<typeof MemoryFilterSchema> {
    return { categories: [this.category], tags: [prefixTag(prefix)], keys };
  }

  async #get(subject: string, wanted: GetOperation[]): Promise<Map<ItemKey, Item>> {
    const byKey = new Map(wanted.map((op) => [memoryKey(op.namespace, op.key), itemKey(op.namespace, op.key)]));
    const keys = [...byKey.keys()].sort();
    const found = new Map<ItemKey, Item>();
    for (let start = 0; start < keys.length; start += MAX_ITEMS) {
      const filter = this.#filter([], keys.slice(start, start + MAX_ITEMS));
      for await (const memory of this.client.iterMemories({ subject, filter, pageSize: PAGE })) {
        const stored = storedItem(memory);
        // The item must say it is the one asked for: a hashed key, or a memory some other
        // writer gave a key of ours, answers nothing.
        if (stored && byKey.get(memory.key) === itemKey(stored.namespace, stored.key)) {
          found.set(itemKey(stored.namespace, stored.key), stored);
        }
      }
    }
    return found;
  }

  /** Every item under `prefix` of the subject the view reads, most recently updated first. */
  async *#scan(subject: string, prefix: readonly string[]): AsyncGenerator<Item> {
    for await (const memory of this.client.iterMemories({ subject, filter: this.#filter(prefix), pageSize: PAGE })) {
      const stored = storedItem(memory);
      if (stored && under(stored.namespace, prefix)) yield stored;
    }
  }

  async #search(op: SearchOperation): Promise<SearchItem[]> {
    const prefix = op.namespacePrefix;
    const subject = this.#subjectOf(prefix);
    const limit = op.limit ?? 10, offset = op.offset ?? 0;
    if (limit <= 0) return [];
    const end = offset + limit;
    if (!op.query) {
      const kept: SearchItem[] = [];
      for await (const stored of this.#scan(subject, prefix)) {
        if (!matchesFilter(stored.value, op.filter)) continue;
        kept.push(stored);
        if (kept.length >= end) break;
      }
      return kept.slice(offset, end);
    }
    // Recall ranks at most topK candidates: with a filter the best MAX_ITEMS are fetched and
    // filtered here, so a filter that few of them pass finds fewer (docs/langgraph.md).
    const hasFilter = op.filter !== undefined && Object.keys(op.filter).length > 0;
    const answer = await this.client.recall({
      subject, query: op.query, filter: this.#filter(prefix), topK: hasFilter ? MAX_ITEMS : Math.min(end, MAX_ITEMS),
      minRelevance: this.minRelevance, excludeNeighbours: true,
      weights: { similarity: 1, recency: 0, importance: 0 },
    });
    const ranked: SearchItem[] = [];
    for (const scored of answer.memories) {
      const hit = scored.memory && storedItem(scored.memory);
      if (hit && under(hit.namespace, prefix) && matchesFilter(hit.value, op.filter)) {
        ranked.push({ ...hit, score: scored.score });
      }
    }
    return ranked.slice(offset, end);
  }

  async #listNamespaces(op: ListNamespacesOperation): Promise<string[][]> {
    const conditions: MatchCondition[] = op.matchConditions ?? [];
    let prefix: string[] = [];
    for (const condition of conditions) {
      if (condition.matchType !== "prefix") continue;
      // The labels before the first wildcard narrow the scan on the server (a tag).
      const wildcard = condition.path.indexOf("*");
      const fixed = wildcard < 0 ? condition.path : condition.path.slice(0, wildcard);
      if (fixed.length > prefix.length) prefix = fixed;
    }
    const subject = this.#subjectOf(conditions.find((c) => c.matchType === "prefix")?.path ?? []);
    const seen = new Map<ItemKey, string[]>();
    for await (const stored of this.#scan(subject, prefix)) {
      if (!conditions.every((c) => namespaceMatches(c, stored.namespace))) continue;
      const namespace = op.maxDepth !== undefined ? stored.namespace.slice(0, op.maxDepth) : stored.namespace;
      seen.set(JSON.stringify(namespace), namespace);
    }
    return [...seen.values()].sort(compareNamespaces).slice(op.offset, op.offset + op.limit);
  }

  async #apply(puts: PutOperation[]): Promise<void> {
    const writes = new Map<string, { drafts: Draft[]; named: PutOperation[] }>();
    for (const op of puts) {
      const subject = this.#subjectOf(op.namespace);
      if (op.value === null) {
        // Deleting forgets the memory (kept for audit, never read again); a view that may not
        // erase it refuses, with the server's reason.
        await this.client.erase({ subject, selector: { case: "key", value: memoryKey(op.namespace, op.key) },
          mode: EraseMode.FORGET, reason: "LangGraph store delete" });
        continue;
      }
      const entry = writes.get(subject) ?? { drafts: [], named: [] };
      entry.drafts.push(this.#draft(op, op.value));
      entry.named.push(op);
      writes.set(subject, entry);
    }
    const consistency = this.waitIndexed ? Consistency.WAIT_INDEXED : Consistency.INDEX_ASYNC;
    for (const [subject, { drafts, named }] of writes) {
      for (let start = 0; start < drafts.length; start += MAX_ITEMS) {
        const answer = await this.client.write({ subject, items: drafts.slice(start, start + MAX_ITEMS), consistency });
        answer.results.forEach((result, i) => {
          if (result.outcome === WriteOutcome.REJECTED || result.outcome === WriteOutcome.PENDING) {
            const op = named[start + i]!;
            throw new Error(`memoryd did not store ${JSON.stringify(op.namespace)}/${JSON.stringify(op.key)}: ` +
              `WRITE_OUTCOME_${WriteOutcome[result.outcome]}, ${result.reason}`);
          }
        });
      }
    }
  }

  #draft(op: PutOperation, value: Record<string, unknown>): Draft {
    const fields = op.index === false ? undefined : (op.index ?? this.indexFields);
    const draft: Draft = {
      category: this.category, key: memoryKey(op.namespace, op.key), text: valueText(op.key, value, fields),
      tags: namespaceTags(op.namespace), data: itemData(op.namespace, op.key, value, this.defaultTtl),
    };
    if (this.defaultTtl !== undefined) {
      // A TTL is how long the value stays true (valid_until): memoryd reads nothing past it.
      draft.validUntil = timestampFromDate(new Date(Date.now() + this.defaultTtl * 60_000));
    }
    return draft;
  }
}

const under = (namespace: readonly string[], prefix: readonly string[]): boolean =>
  namespace.length >= prefix.length && prefix.every((label, i) => namespace[i] === label);

/** Python's order of tuples of str (what the Python store's list_namespaces sorts by). */
function compareNamespaces(a: string[], b: string[]): number {
  for (let i = 0; i < Math.min(a.length, b.length); i++) {
    const d = comparePy(a[i]!, b[i]!);
    if (d !== 0) return d;
  }
  return a.length - b.length;
}
