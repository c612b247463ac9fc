"""The contract's field rules live in the protos as buf.validate annotations; the server
enforces them with its own interpreter (``memoryd.server.validation._schema``). These tests hold
that interpreter to protovalidate's own Python implementation, on every request type of every
service, with values around every annotated bound."""

from __future__ import annotations

import math

import protovalidate
import pytest
from buf.validate import validate_pb2
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memoryd.server.validation._schema import UnsupportedRule, _plan, schema_violations
from memoryd.v1 import memory_pb2 as pb
from memoryd.v1 import memory_service_pb2, token_admin_service_pb2, view_admin_service_pb2
from memoryd.v1 import memory_service_pb2 as svc

SERVICES = [service for module in (memory_service_pb2, view_admin_service_pb2, token_admin_service_pb2)
            for service in module.DESCRIPTOR.services_by_name.values()]
REQUESTS = sorted({m.input_type.full_name: m.input_type for s in SERVICES for m in s.methods}.items())
UUID = "0b9a7a58-2f55-4b1e-9a8e-3f0c2f3b6a11"
STRINGS = ["", "a", "u1", "alice@example.com", "home_city", "k:x/y", "*", "a*", "x y", "a\n", "\n", "-a",
           "é", "日本語", "a" * 64, "a" * 65, "a" * 128, "a" * 129, "é" * 40, "é" * 70, UUID, UUID.upper(),
           "urn:uuid:" + UUID, UUID.replace("-", ""), "passphrase", "p" * 1024, "p" * 1025, "tag\x01", "a" * 501,
           "a" * 513, "a" * 1025]
INTS = [-1, 0, 1, 5, 31, 32, 33, 200, 201, 10**6]
FLOATS = [0.0, 0.5, 1.0, -0.1, 1.1, math.nan, math.inf]
SECONDS = [-1, 0, 1, 2_592_000, 2_592_001]


def _message_class(descriptor: Descriptor) -> type[Message]:
    return message_factory.GetMessageClass(descriptor)


def _scalar(field: FieldDescriptor, *, item: bool = False) -> st.SearchStrategy[object]:
    kind = field.type
    if kind == FieldDescriptor.TYPE_STRING:
        return st.one_of(st.sampled_from(STRINGS), st.text(max_size=8))
    if kind == FieldDescriptor.TYPE_BYTES:
        return st.sampled_from([b"", b"x", b"\x00" * 3])
    if kind in (FieldDescriptor.TYPE_INT32, FieldDescriptor.TYPE_INT64):
        return st.sampled_from(INTS)
    if kind in (FieldDescriptor.TYPE_FLOAT, FieldDescriptor.TYPE_DOUBLE):
        return st.sampled_from(FLOATS)
    if kind == FieldDescriptor.TYPE_BOOL:
        return st.booleans()
    if kind == FieldDescriptor.TYPE_ENUM:
        numbers = sorted(field.enum_type.values_by_number)
        # protovalidate-py 1.2.0 does not apply enum.defined_only to a repeated field's items
        # (EnumRules.validate looks the whole list up): undefined items are tested below.
        return st.sampled_from(numbers if item else [*numbers, numbers[-1] + 1, 99])
    raise AssertionError(f"no values for {field.full_name}")


@st.composite
def messages(draw: st.DrawFn, descriptor: Descriptor, depth: int = 0, short: bool = False) -> Message:
    """A message of ``descriptor``; ``short``: its lists stay short (it is one of a long list)."""
    message = _message_class(descriptor)()
    name = descriptor.full_name
    if name == "google.protobuf.Timestamp":
        if draw(st.booleans()):
            message.seconds = draw(st.sampled_from([0, 1_700_000_000]))  # type: ignore[attr-defined]
        return message
    if name == "google.protobuf.Duration":
        message.seconds = draw(st.sampled_from(SECONDS))  # type: ignore[attr-defined]
        # cel-python holds durations as datetime.timedelta, to the microsecond: protovalidate's
        # Python implementation cannot see one nanosecond past a bound (the server does).
        message.nanos = draw(st.sampled_from([0, 0, 1000]))  # type: ignore[attr-defined]
        return message
    if name.startswith("google.protobuf.") or depth > 3:
        return message
    chosen = {o.name: draw(st.sampled_from([None, *[f.name for f in o.fields]])) for o in descriptor.oneofs}
    for field in descriptor.fields:
        oneof = field.containing_oneof
        if oneof is not None and not oneof.name.startswith("_") and chosen[oneof.name] != field.name:
            continue
        if not draw(st.integers(0, 3)):  # a quarter of the fields stay unset
            continue
        nested = field.message_type
        if field.is_repeated:
            # Around tags' 32 and rules' 64; one level of long lists at a time (a long list of
            # messages with long lists inside costs protovalidate's pure-Python CEL seconds).
            count = draw(st.sampled_from([0, 1, 2] if short else [0, 1, 2, 33, 65]))
            if nested is not None:
                values = draw(st.lists(messages(nested, depth + 1, short or count > 2), min_size=1, max_size=2))
                getattr(message, field.name).extend((values * count)[:count])
            else:
                values = draw(st.lists(_scalar(field, item=True), min_size=1, max_size=3))
                getattr(message, field.name).extend((values * count)[:count])
        elif nested is not None:
            getattr(message, field.name).CopyFrom(draw(messages(nested, depth + 1, short)))
        else:
            setattr(message, field.name, draw(_scalar(field)))
    return message


def _protovalidate_fields(message: Message) -> set[str]:
    out = set()
    for violation in protovalidate.collect_violations(message):
        path = ""
        for element in violation.proto.field.elements:
            path = f"{path}.{element.field_name}" if path else element.field_name
            if element.WhichOneof("subscript") == "index":
                path += f"[{element.index}]"
        out.add(path)
    return out


@pytest.mark.parametrize("name", [name for name, _ in REQUESTS])
def test_every_request_type_has_its_rules_planned(name: str) -> None:
    descriptor = dict(REQUESTS)[name]
    assert _plan(descriptor) is not None  # raises UnsupportedRule for an annotation it cannot enforce


@pytest.mark.parametrize("name", [name for name, _ in REQUESTS])
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
def test_the_server_refuses_exactly_the_fields_protovalidate_refuses(name: str, data: st.DataObject) -> None:
    message = data.draw(messages(dict(REQUESTS)[name]))
    assert {v.field for v in schema_violations(message)} == _protovalidate_fields(message)


@pytest.mark.parametrize(("message", "fields"), [
    (svc.WriteRequest(subject="alice", items=[pb.MemoryDraft(category=pb.CATEGORY_FACT, text="x", key="k\n")]),
     {"items[0].key"}),  # RE2's $ is the end of the text, not before a final line break
    (svc.GetHistoryRequest(subject="alice", memory_id="urn:uuid:" + UUID), {"memory_id"}),
    (svc.WriteRequest(subject="alice", turns=[pb.Turn(turn_id="t", speaker="s", text="x", time={"seconds": 1})] * 201),
     {"turns"}),
    (svc.RecallRequest(subject="alice", query="q", min_relevance=math.nan), {"min_relevance"}),
    (svc.EraseRequest(subject="alice", mode=svc.ERASE_MODE_FORGET), {"selector"}),
    (token_admin_service_pb2.IssueTokenRequest(agent="a", lifetime={"seconds": 2_592_001}), {"lifetime"}),
], ids=["trailing-newline", "uuid-urn", "turns-over-200", "nan", "oneof-required", "duration-over"])
def test_known_edges_agree(message: Message, fields: set[str]) -> None:
    assert {v.field for v in schema_violations(message)} == fields == _protovalidate_fields(message)


@pytest.mark.parametrize(("message", "field"), [
    (token_admin_service_pb2.IssueTokenRequest(agent="a", roles=[token_admin_service_pb2.TOKEN_ROLE_AGENT, 9]),
     "roles[1]"),
    (svc.RecallRequest(subject="alice", query="q", filter=pb.MemoryFilter(categories=[99])), "filter.categories[0]"),
], ids=["roles", "filter-categories"])
def test_an_undefined_enum_in_a_list_is_refused_as_the_rules_say(message: Message, field: str) -> None:
    # validate.proto: repeated.items rules apply to every item, so items.enum.defined_only
    # refuses an undefined one (protovalidate-py 1.2.0 misses it; the server does not).
    assert {v.field for v in schema_violations(message)} == {field}


def test_an_annotation_the_interpreter_does_not_know_is_refused_when_planned() -> None:
    file = descriptor_pb2.FileDescriptorProto(name="memoryd_probe/unknown_rule.proto", package="memoryd_probe",
                                              syntax="proto3", dependency=["buf/validate/validate.proto"])
    field = file.message_type.add(name="Probe").field.add(name="email", number=1, type=FieldDescriptor.TYPE_STRING,
                                                         label=FieldDescriptor.LABEL_OPTIONAL)
    field.options.Extensions[validate_pb2.field].string.email = True
    descriptor_pool.Default().AddSerializedFile(file.SerializeToString())
    probe = descriptor_pool.Default().FindMessageTypeByName("memoryd_probe.Probe")
    with pytest.raises(UnsupportedRule, match="email"):
        _plan(probe)
