"""The keyword channel: tokenising (jieba, Snowball), keyed term hashes written with each memory,
and BM25 ranking in one SQL statement under the read filter.
"""

from ._bm25 import fold_owners_stats, fold_stats, keyword_search
from ._keywords import TermHasher, check_terms_written, delete_terms, tokenize, warm_up, write_terms

__all__ = ["TermHasher", "check_terms_written", "delete_terms", "fold_owners_stats", "fold_stats",
           "keyword_search", "tokenize", "warm_up", "write_terms"]
