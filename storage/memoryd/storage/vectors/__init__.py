"""The vector index on Milvus (a server or Milvus Lite): one collection per embedding model, one
partition per tenant, and physical removal of deleted vectors from Lite's files.
"""

from ._milvus import IndexPartition, MilvusIndex
from ._records import IndexedMemory, collection_name, embedding_text, partition_name

__all__ = ["IndexPartition", "IndexedMemory", "MilvusIndex", "collection_name", "embedding_text", "partition_name"]
