"""Portable archives of a subject's memories: the format, its canonical bytes, and sealing.

Pure: no I/O, no store, no gRPC. A plain archive (version 1) is canonical JSON (sorted keys,
UTF-8, no spaces)::

    {"format": "memoryd-export", "version": 1, "exported_at": "...", "subject": "alice",
     "memories": [{"category": "fact", "key": "employer", "text": "...", "importance": 0.5,
                   "provenance": {"agent": "...", "source_kind": "input", ...}, ...}, ...]}

Each memory carries only the fields the exporting view shows; an absent field is restored
with Write's default. A sealed archive wraps the plain one::

    {"format": "memoryd-export-sealed", "version": 1, "kdf": "scrypt", "n": 32768, "r": 8,
     "p": 1, "salt": b64, "nonce": b64, "ciphertext": b64}

The key is scrypt(passphrase, salt); the cipher AES-256-GCM, whose associated data is the
envelope without its ciphertext, so format, version and KDF parameters cannot be altered.

Reading an archive is the one boundary where its bytes become Python values, and anything
the bytes can hold becomes ``ArchiveInvalid`` with a field path here, never an exception
further on: a number no double can hold is read as the infinity ``json`` makes of ``1e400``
(Write's rules then refuse it where it lands), a name given twice in one object and an
unpaired surrogate escape (``"\\ud800"``, which no UTF-8 string can carry) are refused as read.
Each entry then becomes the ``MemoryDraft`` a Write would carry and passes Write's own checks.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import re
from datetime import UTC, datetime
from typing import Any

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.scrypt import Scrypt
from google.protobuf import timestamp_pb2

from memoryd.domain import ArchiveInvalid, Category, Draft, FieldViolation, Memory, Scope, SourceKind, Stability
from memoryd.v1 import memory_pb2 as pb

from .._config import Limits
from .._enums import CATEGORY, SCOPE, SOURCE_KIND, STABILITY, EnumMap
from ..validation import Checker, draft_from_message

FORMAT = "memoryd-export"
SEALED_FORMAT = "memoryd-export-sealed"
VERSION = 1
MIN_PASSPHRASE_BYTES = 8
MAX_PASSPHRASE_BYTES = 1024
# scrypt at n=2**15, r=8 costs 32 MiB and ~0.1 s per try. Version 1 accepts only these
# parameters: an archive must not be able to make the server spend more.
SCRYPT_N, SCRYPT_R, SCRYPT_P = 2**15, 8, 1
SALT_BYTES, NONCE_BYTES = 16, 12
# The most memories one archive may hold: an import is one transaction.
MAX_MEMORIES = 10_000

_ENTRY_FIELDS = frozenset({
    "category", "key", "text", "data", "importance", "confidence", "stability", "pinned", "tags", "valid_from",
    "valid_until", "scope", "session_id", "provenance", "created_at", "updated_at", "version",
})
_PROVENANCE_FIELDS = frozenset({"agent", "source_kind", "source_turn_id", "source_turn_ids"})
_DOCUMENT_FIELDS = frozenset({"format", "version", "exported_at", "subject", "memories"})
_ENVELOPE_FIELDS = frozenset({"format", "version", "kdf", "n", "r", "p", "salt", "nonce", "ciphertext"})
# A memory's version is an int64 (memoryd.v1.Memory.version).
_MAX_VERSION = 2**63 - 1
# The longest run of digits read as an int: a 64-bit one has at most 19 digits and a sign.
_MAX_INT_CHARS = 20
_SURROGATE = re.compile("[\ud800-\udfff]")
# Bytes that decode as UTF-8 hold none: only a JSON escape can spell one.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
# An entry holds a domain enum's value ("fact"); a MemoryDraft the proto value it maps to.
_ENUMS: dict[str, tuple[type[Any], EnumMap[Any, Any]]] = {
    "category": (Category, CATEGORY),
    "scope": (Scope, SCOPE),
    "stability": (Stability, STABILITY),
}


def encode(document: dict[str, Any]) -> bytes:
    """The canonical bytes of a document: sorted keys, UTF-8, no insignificant spaces."""
    return json.dumps(document, sort_keys=True, ensure_ascii=False, separators=(",", ":"),
                      allow_nan=False).encode()


def _iso(value: datetime) -> str:
    return value.astimezone(UTC).isoformat().replace("+00:00", "Z")


def memory_entry(m: Memory, visible: frozenset[str]) -> dict[str, Any]:
    """One memory as an archive entry, with only the ``visible`` fields (a view's field mask)."""
    values: dict[str, Any] = {
        "category": m.category.value,
        "key": m.key,
        "text": m.text,
        # Stored as float4: rounding keeps 0.7 from becoming 0.699999988 in the archive.
        "importance": round(m.importance, 6),
        "confidence": round(m.confidence, 6),
        "stability": m.stability.value,
        "pinned": m.pinned,
        "tags": sorted(m.tags),
        "version": m.version,
    }
    entry = {name: value for name, value in values.items() if name in visible}
    if "data" in visible and m.data is not None:
        entry["data"] = m.data
    # Scope and session only together: either alone could not be restored.
    if {"scope", "session_id"} <= visible:
        entry["scope"] = m.scope.value
        entry["session_id"] = m.session_id
    for name in ("valid_from", "valid_until", "created_at", "updated_at"):
        value = getattr(m, name)
        if name in visible and value is not None:
            entry[name] = _iso(value)
    if "provenance" in visible:
        entry["provenance"] = {"agent": m.agent, "source_kind": m.source_kind.value,
                               "source_turn_id": m.source_turn_id}
        # Every turn only when there are several: an archive of one-turn memories stays
        # readable by servers of the version before (they refuse fields they do not know).
        if len(m.source_turn_ids) > 1:
            entry["provenance"]["source_turn_ids"] = list(m.source_turn_ids)
    return entry


def plain_archive(subject: str, entries: list[dict[str, Any]], exported_at: datetime) -> bytes:
    return encode({"format": FORMAT, "version": VERSION, "exported_at": _iso(exported_at), "subject": subject,
                   "memories": entries})


def _key(passphrase: str, salt: bytes) -> bytes:
    return Scrypt(salt=salt, length=32, n=SCRYPT_N, r=SCRYPT_R, p=SCRYPT_P).derive(passphrase.encode())


def _envelope_header(salt: bytes, nonce: bytes) -> dict[str, Any]:
    return {"format": SEALED_FORMAT, "version": VERSION, "kdf": "scrypt", "n": SCRYPT_N, "r": SCRYPT_R,
            "p": SCRYPT_P, "salt": base64.b64encode(salt).decode(), "nonce": base64.b64encode(nonce).decode()}


def seal(plain: bytes, passphrase: str, *, salt: bytes | None = None, nonce: bytes | None = None) -> bytes:
    """The sealed archive of ``plain``; salt and nonce are random unless given (for tests)."""
    size = len(passphrase.encode())
    if not MIN_PASSPHRASE_BYTES <= size <= MAX_PASSPHRASE_BYTES:
        raise ValueError(f"a passphrase must be {MIN_PASSPHRASE_BYTES} to {MAX_PASSPHRASE_BYTES} bytes")
    salt = os.urandom(SALT_BYTES) if salt is None else salt
    nonce = os.urandom(NONCE_BYTES) if nonce is None else nonce
    header = _envelope_header(salt, nonce)
    ciphertext = AESGCM(_key(passphrase, salt)).encrypt(nonce, plain, encode(header))
    return encode({**header, "ciphertext": base64.b64encode(ciphertext).decode()})


def _invalid(field: str, description: str) -> ArchiveInvalid:
    return ArchiveInvalid([FieldViolation(field, description)])


def _shown(value: Any) -> str:
    """A value or name for a message: short, and never a lone surrogate, which no reply can carry."""
    if isinstance(value, bool | int | float):
        text = json.dumps(value)
    elif isinstance(value, str):
        text = value[:64]
    else:
        text = "a list" if isinstance(value, list) else "an object" if isinstance(value, dict) else "null"
    return text.encode("utf-8", "backslashreplace").decode()


def _integer(digits: str) -> int | float:
    # Every number of an archive becomes a double (importance, confidence, a Struct's values)
    # or must be an int64 (versions). A longer run of digits is read as a double, infinite when
    # no double holds it, just as json reads 1e400; never as an int of hundreds of digits,
    # which no double holds (float() of it raises OverflowError) and int() refuses past 4300
    # digits (ValueError).
    return int(digits) if len(digits) <= _MAX_INT_CHARS else float(digits)


class _RepeatedName(ValueError):
    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.name = name


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    # Canonical JSON never repeats a name; an archive that does could read one way to a tool
    # that keeps the first value and another way here, which keeps the last.
    found = dict(pairs)
    if len(found) < len(pairs):
        seen: set[str] = set()
        for name, _ in pairs:
            if name in seen:
                raise _RepeatedName(name)
            seen.add(name)
    return found


def _load(data: bytes, field: str) -> dict[str, Any]:
    try:
        text = data.decode()
    except UnicodeDecodeError:
        raise _invalid(field, "is not UTF-8 text") from None
    if text.startswith("\ufeff"):
        raise _invalid(field, "starts with a byte order mark: an archive is UTF-8 JSON without one")
    try:
        document = json.loads(text, parse_int=_integer, object_pairs_hook=_object)
    except _RepeatedName as repeated:
        raise _invalid(field, f"gives the name '{_shown(repeated.name)}' twice in one object") from None
    except (ValueError, RecursionError):
        raise _invalid(field, "is not a JSON document") from None
    if not isinstance(document, dict):
        raise _invalid(field, "must be a JSON object")
    unpaired = _unpaired_surrogates(document, "archive") if _SURROGATE_ESCAPE.search(text) else []
    if unpaired:
        raise ArchiveInvalid(unpaired)
    return document


def _unpaired_surrogates(document: dict[str, Any], root: str) -> list[FieldViolation]:
    """Every string of ``document`` holding an unpaired surrogate escape, by path.

    JSON may spell one (``"\\ud800"``) and ``json`` reads it, but no UTF-8 string holds it: a
    protobuf string, a Postgres text or a reply naming it would fail later, as INTERNAL.
    Iterative: data nests as deep as the JSON parser allows. It stops at the hundredth: a reply
    carries fewer (``MAX_VIOLATION_BYTES``), and 4 MiB of ``"\\ud800",`` would be 450,000.
    """
    found: list[FieldViolation] = []
    stack: list[tuple[str, Any]] = [(root, document)]
    while stack and len(found) < 100:
        path, value = stack.pop()
        if isinstance(value, str) and _SURROGATE.search(value):
            found.append(FieldViolation(path, "holds an unpaired surrogate escape, which is not UTF-8 text"))
        elif isinstance(value, dict):
            for name, child in value.items():
                if _SURROGATE.search(name):
                    found.append(FieldViolation(path, f"has the name '{_shown(name)}', which holds an unpaired "
                                                      "surrogate escape and is not UTF-8 text"))
                else:
                    stack.append((f"{path}.{name[:64]}", child))
        elif isinstance(value, list):
            stack.extend((f"{path}[{i}]", child) for i, child in enumerate(value))
    return sorted(found, key=lambda v: v.field)


def _unknown_fields(document: dict[str, Any], known: frozenset[str], what: str) -> None:
    unknown = sorted(set(document) - known)
    if unknown:
        raise ArchiveInvalid([FieldViolation(f"archive.{name[:64]}", f"is not a field of {what}") for name in unknown])


def _check_version(document: dict[str, Any]) -> None:
    version = document.get("version")
    if type(version) is not int or version != VERSION:
        raise _invalid("archive.version", f"unknown version '{_shown(version)}': this server reads version "
                                          f"{VERSION}")


def _b64(envelope: dict[str, Any], name: str, size: int | None = None) -> bytes:
    value = envelope.get(name)
    try:
        if not isinstance(value, str):
            raise ValueError
        raw = base64.b64decode(value, validate=True)
    except (ValueError, binascii.Error):
        raise _invalid(f"archive.{name}", "must be base64") from None
    if size is not None and len(raw) != size:
        raise _invalid(f"archive.{name}", f"must be {size} bytes")
    return raw


def _unseal(envelope: dict[str, Any], passphrase: str) -> bytes:
    _check_version(envelope)
    _unknown_fields(envelope, _ENVELOPE_FIELDS, "a sealed archive")
    for name, expected in (("kdf", "scrypt"), ("n", SCRYPT_N), ("r", SCRYPT_R), ("p", SCRYPT_P)):
        if envelope.get(name) != expected or type(envelope.get(name)) is not type(expected):
            raise _invalid(f"archive.{name}", f"must be {expected!r} in version {VERSION}")
    salt, nonce = _b64(envelope, "salt", SALT_BYTES), _b64(envelope, "nonce", NONCE_BYTES)
    ciphertext = _b64(envelope, "ciphertext")
    if not passphrase:
        raise _invalid("passphrase", "is required to open a sealed archive")
    try:
        return AESGCM(_key(passphrase, salt)).decrypt(nonce, ciphertext, encode(_envelope_header(salt, nonce)))
    except InvalidTag:
        raise _invalid("passphrase", "does not open this archive: the passphrase is wrong or the archive "
                                     "was altered") from None


def open_archive(data: bytes, passphrase: str = "") -> dict[str, Any]:
    """The plain archive document in ``data`` (unsealed with ``passphrase`` if sealed).

    Raises ArchiveInvalid naming what is wrong; checks the document's shape, not its memories.
    """
    document = _load(data, "archive")
    if document.get("format") == SEALED_FORMAT:
        document = _load(_unseal(document, passphrase), "archive.ciphertext")
        if document.get("format") != FORMAT:
            raise _invalid("archive.format", f"a sealed archive must hold a '{FORMAT}' document")
    elif document.get("format") != FORMAT:
        raise _invalid("archive.format", f"must be '{FORMAT}' or '{SEALED_FORMAT}'")
    _check_version(document)  # first: another version may have other fields
    _unknown_fields(document, _DOCUMENT_FIELDS, "an archive")
    memories = document.get("memories")
    if not isinstance(memories, list):
        raise _invalid("archive.memories", "must be a list")
    if len(memories) > MAX_MEMORIES:
        raise _invalid("archive.memories", f"must have at most {MAX_MEMORIES} entries")
    if not isinstance(document.get("subject", ""), str):
        raise _invalid("archive.subject", "must be a string")
    return document


def drafts(document: dict[str, Any], limits: Limits) -> list[Draft]:
    """The memories of an opened archive as drafts, checked by Write's own rules.

    Every invalid field of every memory is reported at once (``archive.memories[3].key``).
    """
    check = Checker(limits)
    _timestamp(check, "archive.exported_at", document.get("exported_at"))  # for reading only, but well formed
    out: list[Draft] = []
    for i, entry in enumerate(document["memories"]):
        path = f"archive.memories[{i}]"
        item = _item(check, path, entry)
        if item is not None:
            check.rules(item, path)
        draft = draft_from_message(check, path, item) if item is not None else None
        if draft is not None:
            out.append(draft)
    if check.violations:
        raise ArchiveInvalid(check.violations)
    return out


def _item(check: Checker, path: str, entry: Any) -> pb.MemoryDraft | None:
    """An archive entry as the MemoryDraft a Write would carry; None if its shape is wrong."""
    if not isinstance(entry, dict):
        check.fail(path, "must be a JSON object")
        return None
    before = len(check.violations)
    for name in sorted(set(entry) - _ENTRY_FIELDS):
        check.fail(f"{path}.{str(name)[:64]}", "is not a field of an archived memory")
    item = pb.MemoryDraft()
    for name in ("key", "text", "session_id"):
        if name in entry:
            if isinstance(entry[name], str):
                setattr(item, name, entry[name])
            else:
                check.fail(f"{path}.{name}", "must be a string")
    for name, (domain, enum) in _ENUMS.items():
        if name in entry:
            if isinstance(entry[name], str) and entry[name] in {v.value for v in domain}:
                setattr(item, name, enum.to_proto[domain(entry[name])])
            else:
                check.fail(f"{path}.{name}", f"must be one of {', '.join(v.value for v in domain)}")
    for name in ("importance", "confidence"):
        if name in entry:
            if isinstance(entry[name], int | float) and not isinstance(entry[name], bool):
                setattr(item, name, float(entry[name]))
            else:
                check.fail(f"{path}.{name}", "must be a number")
    if "pinned" in entry:
        if isinstance(entry["pinned"], bool):
            item.pinned = entry["pinned"]
        else:
            check.fail(f"{path}.pinned", "must be true or false")
    if "tags" in entry:
        tags = entry["tags"]
        if isinstance(tags, list) and all(isinstance(t, str) for t in tags):
            item.tags.extend(tags)
        else:
            check.fail(f"{path}.tags", "must be a list of strings")
    if entry.get("data") is not None:
        try:
            if not isinstance(entry["data"], dict):
                raise TypeError
            item.data.update(entry["data"])
        except (TypeError, ValueError):
            check.fail(f"{path}.data", "must be a JSON object")
        except RecursionError:
            check.fail(f"{path}.data", f"must be at most {check.limits.max_data_depth} levels deep")
    for name in ("valid_from", "valid_until", "created_at", "updated_at"):
        stamp = _timestamp(check, f"{path}.{name}", entry.get(name))
        if stamp is not None and name.startswith("valid_"):
            getattr(item, name).CopyFrom(stamp)
    if "version" in entry and (type(entry["version"]) is not int or not 1 <= entry["version"] <= _MAX_VERSION):
        check.fail(f"{path}.version", f"must be an integer from 1 to {_MAX_VERSION}")
    _provenance(check, f"{path}.provenance", entry.get("provenance"), item)
    return item if len(check.violations) == before else None


def _timestamp(check: Checker, field: str, value: Any) -> timestamp_pb2.Timestamp | None:
    if value is None:
        return None
    try:
        if not isinstance(value, str):
            raise ValueError
        moment = datetime.fromisoformat(value)
        if moment.tzinfo is None:
            raise ValueError
        stamp = timestamp_pb2.Timestamp()
        stamp.FromDatetime(moment.astimezone(UTC))
        return stamp
    except (ValueError, OverflowError):
        check.fail(field, "must be an ISO 8601 time with a time zone")
        return None


def _provenance(check: Checker, path: str, value: Any, item: pb.MemoryDraft) -> None:
    if value is None:
        return
    if not isinstance(value, dict):
        check.fail(path, "must be a JSON object")
        return
    for name in sorted(set(value) - _PROVENANCE_FIELDS):
        check.fail(f"{path}.{str(name)[:64]}", "is not a field of provenance")
    # The agent is informational: the importing agent becomes the writer.
    if not isinstance(value.get("agent", ""), str):
        check.fail(f"{path}.agent", "must be a string")
    kind = value.get("source_kind")
    if kind is not None:
        if isinstance(kind, str) and kind in {v.value for v in SourceKind}:
            item.source_kind = SOURCE_KIND.to_proto[SourceKind(kind)]
        else:
            check.fail(f"{path}.source_kind", f"must be one of {', '.join(v.value for v in SourceKind)}")
    turn = value.get("source_turn_id", "")
    if isinstance(turn, str):
        item.source_turn_id = turn
    else:
        check.fail(f"{path}.source_turn_id", "must be a string")
    # Archives of the version before have source_turn_id alone.
    turns = value.get("source_turn_ids", [])
    if isinstance(turns, list) and all(isinstance(t, str) for t in turns):
        item.source_turn_ids.extend(turns)
    else:
        check.fail(f"{path}.source_turn_ids", "must be a list of strings")
