"""memoryd.client.langgraph — LangGraph's long-term store on memoryd (the ``langgraph`` extra).

    from memoryd.client import MemorydClient
    from memoryd.client.langgraph import MemorydStore

    store = MemorydStore(MemorydClient("127.0.0.1:50051", token=token), subject_at=1)
    graph = builder.compile(store=store)

A namespace and key become one keyed memory of a subject (docs/langgraph.md has the mapping);
every call goes through the client, with its token, so the server's view of that agent applies.
"""

from ._store import CATEGORIES, MemorydStore

__all__ = ["MemorydStore", "CATEGORIES"]
