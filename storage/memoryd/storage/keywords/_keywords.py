"""The keyword channel's terms: tokenising, keyed hashes, and writing them with the memory.

Text is tokenised here, in Python (jieba for Chinese, the Snowball English stemmer for
everything else), and Postgres receives only ``TermHasher`` hashes of the terms with their
frequencies (table ``memory_terms``, migration 0002). So the keyword index holds no memory
text that a backup, a replica or a query log could leak, and BM25 (``_bm25``) still ranks in
one SQL statement, under row level security, after the same WHERE clause as every other read.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import logging
import re
import threading
import unicodedata
import warnings
from collections import Counter
from collections.abc import Sequence
from typing import Any

import psycopg
import snowballstemmer

from memoryd.domain import Internal

from ..postgres import TenantConn
from ._segmenter_cache import default_cache_dir, prefix_dictionary

# Han ideographs (CJK Unified, extension A, compatibility, extensions B–F). Runs of them are
# segmented by jieba; everything else is split into words on non-alphanumerics.
_HAN = re.compile("([\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002fa1f]+)")
# Alphanumeric runs: `_` counts as a separator too, so "primary_language" is two words, as
# are "a.b", "a:b", "a/b" and "a-b".
_WORD = re.compile(r"[^\W_]+")

# Words too common to say anything about a memory. Kept small on purpose: BM25's idf already
# discounts common words; this list only keeps them from making a match on their own.
_ENGLISH_STOPWORDS = frozenset(
    "a about after all also am an and any are as at be been being but by can could did do does "
    "doing for from had has have having he her hers him his how i if in into is it its me my "
    "no nor not of on or our ours she so than that the their theirs them then there these they "
    "this those to too was we were what when where which while who whom why will with would "
    "you your yours".split()
)
# Chinese particles and pronouns that jieba emits as words of their own.
_CHINESE_STOPWORDS = frozenset("的 了 着 过 吗 呢 吧 啊 呀 和 与 及 是 在 也 都 就 我 你 他 她 它 我们 你们 他们".split())

_stemmer = snowballstemmer.stemmer("english")
_stemmer_lock = threading.Lock()
_jieba_lock = threading.Lock()
_jieba: Any = None


def _segmenter() -> Any:
    """jieba's tokenizer, built once on first use (its dictionary: ~1 s and ~65 MB of memory).

    A private ``jieba.Tokenizer``, so nothing else in the process that uses jieba's global one
    (custom words, another dictionary) changes how memoryd segments. Its prefix dictionary is
    built from the dictionary shipped in the pinned jieba wheel, not through ``initialize()``,
    which would load and write ``jieba.cache`` in the shared temp directory, where another
    local user could plant that file and change how memoryd segments; it is built once per
    user instead, in the user's own cache directory (``_segmenter_cache``), ~0.2 s to load.
    jieba logs to stderr and, on some setups, warns while importing (invalid escapes in its
    regexes when compiled from source; the ``pkg_resources`` deprecation); neither is about
    our input, so both are silenced here, and only here.
    """
    global _jieba
    if _jieba is None:
        with _jieba_lock:
            if _jieba is None:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", DeprecationWarning)
                    warnings.simplefilter("ignore", SyntaxWarning)
                    warnings.simplefilter("ignore", UserWarning)
                    import jieba
                jieba.setLogLevel(logging.WARNING)
                segmenter = jieba.Tokenizer()
                with segmenter.get_dict_file() as dictionary:
                    content = dictionary.read()
                segmenter.FREQ, segmenter.total = prefix_dictionary(content, segmenter.gen_pfdict,
                                                                    default_cache_dir())
                segmenter.initialized = True
                _jieba = segmenter
    return _jieba


def warm_up() -> None:
    """Load jieba's dictionary now (e.g. at server start) instead of in the first request."""
    _segmenter()


def tokenize(text: str) -> list[str]:
    """The terms of ``text``, in order, repeats kept (their count is the term frequency).

    NFKC first, so full-width letters and digits and compatibility ideographs match their
    ordinary forms; then casefold. Han runs are segmented with jieba's search mode, which
    also emits the shorter words inside long ones (中华人民共和国 → 中华, 人民, 共和国, …), so a
    query for a part finds the whole. Other words are stemmed (running, runs → run) unless
    they are stopwords or a single letter; numbers such as order ids and years are kept.
    """
    normalised = unicodedata.normalize("NFKC", text).casefold()
    tokens: list[str] = []
    for index, part in enumerate(_HAN.split(normalised)):
        if not part:
            continue
        if index % 2:  # a Han run: re.split puts the captured separators at odd positions
            tokens += [w for w in _segmenter().lcut_for_search(part) if w.strip() and w not in _CHINESE_STOPWORDS]
            continue
        for word in _WORD.findall(part):
            if word in _ENGLISH_STOPWORDS or (len(word) == 1 and not word.isdigit()):
                continue
            tokens.append(word if word.isdigit() else _stem(word))
    return tokens


@functools.lru_cache(maxsize=1 << 16)
def _stem(word: str) -> str:
    """The Snowball stem of ``word``, remembered: the pure-Python stemmer was ~40 % of the CPU
    of a Write of 50 memories, and a language's common words recur (at most 65,536 kept)."""
    with _stemmer_lock:  # the stemmer keeps its state in itself; writes tokenize on threads
        return str(_stemmer.stemWord(word))


class TermHasher:
    """Maps a term to a signed 64-bit integer: keyed BLAKE2b, so the index holds no words.

    The key matters: with a plain hash anyone holding the table could hash a dictionary and
    read the memories back; without the secret the hashes cannot be reversed that way. The
    same secret must be used for writing and searching, and changing it means re-indexing.
    """

    def __init__(self, secret: bytes) -> None:
        if not 16 <= len(secret) <= 64:
            raise ValueError("the term hashing secret must be 16 to 64 bytes")
        self._secret = secret
        self._tenants: dict[str, TermHasher] = {}

    def for_tenant(self, tenant: str) -> TermHasher:
        """A hasher keyed for one tenant: the same word hashes differently in every tenant, so
        term frequencies cannot be compared across tenants either. Derived once, kept while
        few tenants are active."""
        hasher = self._tenants.get(tenant)
        if hasher is None:
            if len(self._tenants) > 10_000:
                self._tenants.clear()
            hasher = self._tenants[tenant] = TermHasher(
                hashlib.blake2b(tenant.encode("utf-8"), key=self._secret, person=b"memoryd-terms").digest())
        return hasher

    def term(self, token: str) -> int:
        """First 8 bytes of BLAKE2b(token, key=secret), as a Postgres ``bigint``."""
        digest = hashlib.blake2b(token.encode("utf-8"), key=self._secret).digest()
        return int.from_bytes(digest[:8], "big", signed=True)

    def label(self, value: str) -> bytes:
        """A memory key's or tag's stored label: 16 bytes of keyed BLAKE2b, b"" for "" (no key).

        Labels are how keys and tags are found (equality, tag filters, the one current value
        per key) without being stored readable; their names are kept only sealed.
        """
        if not value:
            return b""
        return hashlib.blake2b(value.encode("utf-8"), key=self._secret, digest_size=16,
                               person=b"memoryd-labels").digest()

    def counts(self, tokens: Sequence[str]) -> Counter[int]:
        """Term frequencies by hash (two words that collide count as one term, as stored)."""
        return Counter(self.term(token) for token in tokens)


async def write_terms(
    conn: TenantConn,
    memories: Sequence[tuple[str, str, str, str]],
    hasher: TermHasher,
    *,
    fresh: frozenset[str] | set[str] = frozenset(),
) -> psycopg.AsyncCursor[Any]:
    """Index memories' keys and texts in the caller's transaction: one statement per kind
    for all of ``memories`` (owner, memory id, key, text), ``fresh`` being ids created in this
    transaction (they have no terms to delete).

    Runs inside the write's own transaction, so the terms change exactly when the memory
    does. The owner is the memory's stored subject ('' for org-scoped memories). Returns the
    cursor of the ``doc_len`` update, which names every memory it found: the caller checks
    (``check_terms_written``) that each one is this tenant's and its owner's — after the
    statements are sent, so a pipelined write waits for nothing here.
    """
    tenant = conn.tenant
    owners = [owner for owner, _, _, _ in memories]
    ids = [memory_id for _, memory_id, _, _ in memories]
    # Tokenizing 100 texts of 8 KiB takes 0.2-1 s (the more words new to the stem cache, the
    # longer, up to ~30 ms a text): on a worker thread, so the event loop is not held.
    lengths, terms, tfs = await asyncio.to_thread(_terms, memories, hasher)
    cur = await conn.execute(
        "UPDATE memories m SET doc_len = d.n FROM unnest(%s::uuid[], %s::text[], %s::int[]) AS d(id, subject, n) "
        "WHERE m.tenant_id = %s AND m.id = d.id AND m.subject = d.subject RETURNING m.id",
        (ids, owners, lengths, tenant),
    )
    if older := [m for m in ids if m not in fresh]:
        await conn.execute("DELETE FROM memory_terms WHERE tenant_id = %s AND memory_id = ANY(%s::uuid[])",
                           (tenant, older))
    if any(terms):
        await conn.execute(
            "INSERT INTO memory_terms (tenant_id, subject, memory_id, term, tf) "
            "SELECT %s, m.subject, m.id, t.term, t.tf "
            "FROM unnest(%s::text[], %s::uuid[], %s::text[], %s::text[]) AS m(subject, id, terms, tfs), "
            "unnest(string_to_array(m.terms, ',')::bigint[], string_to_array(m.tfs, ',')::integer[]) AS t(term, tf)",
            (tenant, owners, ids, terms, tfs),
        )
    return cur


def _terms(memories: Sequence[tuple[str, str, str, str]],
           hasher: TermHasher) -> tuple[list[int], list[str], list[str]]:
    """Each memory's document length, and its terms and their frequencies, each as one
    comma-separated string that Postgres splits: a Write of 100 texts of 8 KiB has ~100,000
    (term, tf) pairs, and psycopg adapting them as arrays took ~0.5 s (bench/RESULTS.md)."""
    lengths, terms, tfs = [], [], []
    for _, _, key, text in memories:
        tokens = tokenize(f"{key} {text}")
        counts = hasher.counts(tokens)
        lengths.append(len(tokens))
        terms.append(",".join(map(str, counts.keys())))
        tfs.append(",".join(map(str, counts.values())))
    return lengths, terms, tfs


async def check_terms_written(cur: psycopg.AsyncCursor[Any], memories: int) -> None:
    """Raise Internal (the transaction is rolled back) unless ``write_terms`` found all of its
    ``memories`` (distinct ids) as this tenant's and their owner's."""
    if len(await cur.fetchall()) != memories:
        raise Internal("write_terms: no such memory for this tenant and subject")


async def replace_terms(
    conn: TenantConn,
    subject: str,
    memory_id: str,
    key: str,
    text: str,
    hasher: TermHasher,
) -> int:
    """``write_terms`` for one memory; returns its document length. A memory that is not this
    tenant's and ``subject``'s is refused rather than indexed under the wrong owner."""
    await check_terms_written(await write_terms(conn, [(subject, memory_id, key, text)], hasher), 1)
    return len(tokenize(f"{key} {text}"))


async def delete_terms(conn: TenantConn, memory_ids: Sequence[str]) -> int:
    """Remove the memories' terms (forget/purge); return the number of term rows removed."""
    tenant = conn.tenant
    if not memory_ids:
        return 0
    cur = await conn.execute(
        "DELETE FROM memory_terms WHERE tenant_id = %s AND memory_id = ANY(%s::uuid[])", (tenant, list(memory_ids))
    )
    return cur.rowcount
