// @memoryd/client/langgraph: LangGraph.js's long-term store on memoryd (docs/langgraph.md). It
// needs @langchain/langgraph-checkpoint (an optional peer dependency); "@memoryd/client" alone
// never loads it.
export { CATEGORIES, MemorydStore, type MemorydStoreOptions } from "./store.js";
export { memoryKey, namespaceTags, prefixTag } from "./mapping.js";
