"""The contract's field rules, read from the protos' ``buf.validate`` annotations and enforced on
every request before the hand-written rules run.

The protos carry each fixed field rule once, as a protovalidate annotation
(``(buf.validate.field).string.max_bytes = 128``), so every client language can see and check
it. The server enforces the annotations itself rather than through protovalidate's Python
package: its 1.x line (for the ``protobuf`` runtime) evaluates each rule as CEL in pure Python,
and its 2.x line runs on a different protobuf runtime (``protobuf-py``). This module interprets
the subset of the vocabulary the contract uses — ``required``, ``ignore``, string lengths,
patterns and UUIDs, number ranges, defined enums, repeated counts and items, duration ranges,
required oneofs — with protovalidate's semantics (``tests/server/test_schema_rules.py`` checks
them against protovalidate itself). An annotation outside the subset fails when the request type
is first planned, never silently: the architecture tests plan every request type.

What stays hand-written (the package's other modules) is what an annotation cannot say: limits a
server setting lowers, rules across fields, and the conversion into typed commands.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from functools import cache
from typing import Any, cast

from buf.validate import validate_pb2 as rules_pb
from google.protobuf import duration_pb2
from google.protobuf.descriptor import Descriptor, FieldDescriptor, OneofDescriptor
from google.protobuf.message import Message

from memoryd.domain import CONTRACT, FieldViolation, Grammar

__all__ = ["UnsupportedRule", "schema_violations"]

Violations = list[FieldViolation]
ElementCheck = Callable[[object, str, Violations], None]
FieldCheck = Callable[[Message, str, Violations], None]

_IF_ZERO = rules_pb.IGNORE_IF_ZERO_VALUE
_ALWAYS = rules_pb.IGNORE_ALWAYS
_UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
# The contract's identifier grammars, by their annotated pattern, to describe a mismatch in words.
_GRAMMAR_WORDS = {f"^{g.pattern.pattern}$": g.words for g in vars(CONTRACT).values() if isinstance(g, Grammar)}


def _field_rules(field: FieldDescriptor) -> rules_pb.FieldRules | None:
    # protoc's .pyi types an extension as a plain FieldDescriptor, which typeshed's
    # Extensions[...] does not accept: hence Any.
    options: Any = field.GetOptions()
    return cast(rules_pb.FieldRules, options.Extensions[rules_pb.field]) if options.HasExtension(rules_pb.field) \
        else None


def _oneof_rules(oneof: OneofDescriptor) -> rules_pb.OneofRules | None:
    options: Any = oneof.GetOptions()
    return cast(rules_pb.OneofRules, options.Extensions[rules_pb.oneof]) if options.HasExtension(rules_pb.oneof) \
        else None


class UnsupportedRule(TypeError):
    """An annotation this interpreter does not implement: a contract change that must come with
    its enforcement."""


def schema_violations(message: Message, path: str = "") -> Violations:
    """Every annotated rule ``message`` breaks, at most one per field, with paths under ``path``."""
    out: Violations = []
    _walk(message, path, out)
    return out


def _walk(message: Message, path: str, out: Violations) -> None:
    for check in _plan(message.DESCRIPTOR):
        check(message, path, out)


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


@cache
def _plan(descriptor: Descriptor) -> tuple[FieldCheck, ...]:
    """The checks of one message type, compiled once."""
    checks: list[FieldCheck] = []
    for oneof in descriptor.oneofs:
        oneof_rules = _oneof_rules(oneof)
        if oneof_rules is not None and oneof_rules.required:
            checks.append(_required_oneof(oneof.name, [f.name for f in oneof.fields]))
    for field in descriptor.fields:
        rules = _field_rules(field) or rules_pb.FieldRules()
        if rules.ignore == _ALWAYS:
            continue
        checks.append(_field_check(field, rules))
    return tuple(checks)


def _required_oneof(name: str, members: list[str]) -> FieldCheck:
    listed = ", ".join(members)

    def check(message: Message, path: str, out: Violations) -> None:
        if message.WhichOneof(name) is None:
            out.append(FieldViolation(_join(path, name), f"exactly one of {listed} is required"))
    return check


def _annotated(descriptor: Descriptor, seen: frozenset[str] = frozenset()) -> bool:
    """Whether ``descriptor`` or a message type it holds carries a rule: the types worth
    descending into (not google.protobuf.Struct, say, whose maps nest without end)."""
    if descriptor.full_name in seen:
        return False
    seen = seen | {descriptor.full_name}
    if any(_oneof_rules(o) is not None for o in descriptor.oneofs):
        return True
    for field in descriptor.fields:
        if _field_rules(field) is not None:
            return True
        if field.message_type is not None and _annotated(field.message_type, seen):
            return True
    return False


def _field_check(field: FieldDescriptor, rules: rules_pb.FieldRules) -> FieldCheck:
    _only(rules, {"required", "ignore", "repeated", *_ELEMENT_RULES}, field.full_name)
    name, required, ignore_zero = field.name, rules.required, rules.ignore == _IF_ZERO
    nested = field.message_type if field.message_type is not None and _annotated(field.message_type) else None
    if nested is not None and nested.GetOptions().map_entry:
        raise UnsupportedRule(f"{field.full_name}: rules inside map values are not enforced by memoryd")
    if field.is_repeated:
        return _repeated_check(field, rules, nested)
    element = _element_check(field, rules)
    presence = field.has_presence

    def check(message: Message, path: str, out: Violations) -> None:
        here = _join(path, name)
        value = getattr(message, name)
        present = message.HasField(name) if presence else value != field.default_value
        if not present:
            if required:
                out.append(FieldViolation(here, "is required"))
                return
            if presence or ignore_zero:
                return
        if element is not None:
            before = len(out)
            element(value, here, out)
            if len(out) > before:
                return
        if nested is not None and present:
            _walk(value, here, out)
    return check


def _repeated_check(field: FieldDescriptor, rules: rules_pb.FieldRules, nested: Descriptor | None) -> FieldCheck:
    name, required = field.name, rules.required
    which = rules.WhichOneof("type")
    if which not in (None, "repeated"):
        raise UnsupportedRule(f"{field.full_name}: {which} rules on a repeated field")
    counts = rules.repeated
    _only(counts, {"min_items", "max_items", "items"}, field.full_name)
    min_items = counts.min_items if counts.HasField("min_items") else None
    max_items = counts.max_items if counts.HasField("max_items") else None
    items = counts.items if counts.HasField("items") else None
    item_check = _element_check(field, items) if items is not None else None
    if items is not None:
        _only(items, {"ignore", *_ELEMENT_RULES}, field.full_name + "[]")
    skip_zero_items = items is not None and items.ignore == _IF_ZERO

    def check(message: Message, path: str, out: Violations) -> None:
        here = _join(path, name)
        values = getattr(message, name)
        if not values:
            if required:
                out.append(FieldViolation(here, "is required"))
            elif min_items:
                out.append(FieldViolation(here, f"must have at least {min_items} entries"))
            return
        if min_items is not None and len(values) < min_items:
            out.append(FieldViolation(here, f"must have at least {min_items} entries"))
        elif max_items is not None and len(values) > max_items:
            out.append(FieldViolation(here, f"must have at most {max_items} entries"))
        for i, value in enumerate(values):
            at = f"{here}[{i}]"
            if item_check is not None and not (skip_zero_items and not value):
                before = len(out)
                item_check(value, at, out)
                if len(out) > before:
                    continue
            if nested is not None:
                _walk(value, at, out)
    return check


_ELEMENT_RULES = {"string", "bytes", "int32", "int64", "float", "double", "enum", "duration"}


def _only(rules: Message, allowed: set[str], where: str) -> None:
    for descriptor, _ in rules.ListFields():
        if descriptor.name not in allowed:
            raise UnsupportedRule(f"{where}: buf.validate rule {descriptor.name!r} is not enforced by memoryd")


def _element_check(field: FieldDescriptor, rules: rules_pb.FieldRules) -> ElementCheck | None:
    which = rules.WhichOneof("type")
    if which is None:
        return None
    where = field.full_name
    if which == "string":
        return _string(rules.string, where)
    if which == "bytes":
        return _bytes(rules.bytes, where)
    if which in ("int32", "int64", "float", "double"):
        return _number(cast(Numbers, getattr(rules, which)), where)
    if which == "enum":
        return _enum(rules.enum, field, where)
    if which == "duration":
        return _duration(rules.duration, where)
    raise UnsupportedRule(f"{where}: buf.validate {which} rules are not enforced by memoryd")


def _string(rules: rules_pb.StringRules, where: str) -> ElementCheck:
    _only(rules, {"min_len", "max_len", "min_bytes", "max_bytes", "pattern", "uuid"}, where)
    has = rules.HasField
    min_len = rules.min_len if has("min_len") else None
    max_len = rules.max_len if has("max_len") else None
    min_bytes = rules.min_bytes if has("min_bytes") else None
    max_bytes = rules.max_bytes if has("max_bytes") else None
    pattern = _pattern(rules.pattern, where) if has("pattern") else None
    words = _GRAMMAR_WORDS.get(rules.pattern, f"text matching {rules.pattern}")
    uuid = rules.uuid

    def check(value: object, path: str, out: Violations) -> None:
        assert isinstance(value, str)
        size = len(value.encode())
        if min_len is not None and len(value) < min_len:
            out.append(FieldViolation(path, "must not be empty" if min_len == 1 else
                                      f"must be at least {min_len} characters"))
        elif max_len is not None and len(value) > max_len:
            out.append(FieldViolation(path, f"must be at most {max_len} characters"))
        elif (min_bytes is not None and size < min_bytes) or (max_bytes is not None and size > max_bytes):
            if min_bytes is not None and max_bytes is not None:
                out.append(FieldViolation(path, f"must be {min_bytes} to {max_bytes} bytes"))
            elif max_bytes is not None:
                out.append(FieldViolation(path, f"must be at most {max_bytes} bytes"))
            else:
                out.append(FieldViolation(path, f"must be at least {min_bytes} bytes"))
        elif pattern is not None and pattern.search(value) is None:
            out.append(FieldViolation(path, f"must be {words}"))
        elif uuid and _UUID.fullmatch(value) is None:
            out.append(FieldViolation(path, "must be a UUID"))
    return check


def _pattern(pattern: str, where: str) -> re.Pattern[str]:
    # protovalidate patterns are RE2, searched, not matched; the contract's are anchored, and RE2's
    # `$` (without multi-line) matches only at the very end, which Python spells `\Z`.
    if not (pattern.startswith("^") and pattern.endswith("$") and not pattern.endswith("\\$")):
        raise UnsupportedRule(f"{where}: pattern {pattern!r} must be anchored with ^ and $")
    return re.compile(pattern[:-1] + r"\Z")


def _bytes(rules: rules_pb.BytesRules, where: str) -> ElementCheck:
    _only(rules, {"min_len", "max_len"}, where)
    min_len = rules.min_len if rules.HasField("min_len") else None
    max_len = rules.max_len if rules.HasField("max_len") else None

    def check(value: object, path: str, out: Violations) -> None:
        assert isinstance(value, bytes)
        if min_len is not None and len(value) < min_len:
            out.append(FieldViolation(path, f"must be at least {min_len} bytes"))
        elif max_len is not None and len(value) > max_len:
            out.append(FieldViolation(path, f"must be at most {max_len} bytes"))
    return check


Numbers = rules_pb.Int32Rules | rules_pb.Int64Rules | rules_pb.FloatRules | rules_pb.DoubleRules


def _number(rules: Numbers, where: str) -> ElementCheck:
    _only(rules, {"gte", "lte", "gt", "lt"}, where)
    lo = rules.gte if rules.HasField("gte") else None
    hi = rules.lte if rules.HasField("lte") else None
    above = rules.gt if rules.HasField("gt") else None
    below = rules.lt if rules.HasField("lt") else None

    def check(value: object, path: str, out: Violations) -> None:
        assert isinstance(value, int | float)
        nan = isinstance(value, float) and math.isnan(value)
        if lo is not None and hi is not None:
            if nan or not lo <= value <= hi:
                out.append(FieldViolation(path, f"must be between {lo:g} and {hi:g}"))
        elif lo is not None and (nan or value < lo):
            out.append(FieldViolation(path, f"must be at least {lo:g}"))
        elif hi is not None and (nan or value > hi):
            out.append(FieldViolation(path, f"must be at most {hi:g}"))
        elif above is not None and (nan or value <= above):
            out.append(FieldViolation(path, f"must be greater than {above:g}"))
        elif below is not None and (nan or value >= below):
            out.append(FieldViolation(path, f"must be less than {below:g}"))
    return check


def _enum(rules: rules_pb.EnumRules, field: FieldDescriptor, where: str) -> ElementCheck:
    _only(rules, {"defined_only", "not_in"}, where)
    assert field.enum_type is not None
    values = field.enum_type.values_by_number
    defined_only, excluded = rules.defined_only, frozenset(rules.not_in)

    def check(value: object, path: str, out: Violations) -> None:
        assert isinstance(value, int)
        if defined_only and value not in values:
            out.append(FieldViolation(path, f"unknown value {value}"))
        elif value in excluded:
            out.append(FieldViolation(path, f"must not be {values[value].name if value in values else value}"))
    return check


def _duration(rules: rules_pb.DurationRules, where: str) -> ElementCheck:
    _only(rules, {"gte", "lte"}, where)
    lo = _nanos(rules.gte) if rules.HasField("gte") else None
    hi = _nanos(rules.lte) if rules.HasField("lte") else None
    words = (f"between {_span(lo)} and {_span(hi)}" if lo is not None and hi is not None else
             f"at least {_span(lo)}" if lo is not None else f"at most {_span(hi)}")

    def check(value: object, path: str, out: Violations) -> None:
        assert isinstance(value, duration_pb2.Duration)
        nanos = _nanos(value)
        if (lo is not None and nanos < lo) or (hi is not None and nanos > hi):
            out.append(FieldViolation(path, f"must be {words}"))
    return check


def _nanos(duration: duration_pb2.Duration) -> int:
    return duration.seconds * 1_000_000_000 + duration.nanos


def _span(nanos: int | None) -> str:
    assert nanos is not None
    seconds, rest = divmod(nanos, 1_000_000_000)
    if rest:
        return f"{nanos / 1e9:g} seconds"
    for unit, size in (("day", 86400), ("hour", 3600), ("minute", 60), ("second", 1)):
        if seconds % size == 0 and seconds >= size:
            count = seconds // size
            return f"{count} {unit}{'' if count == 1 else 's'}"
    return "0 seconds"
