"""Issue 43's Watch across replicas: a watcher on one replica sees what is written through the
other, a cursor received from one resumes on the other, and a subject purged through one ends
as SUBJECT_ERASED on the other — the change log is in the shared PostgreSQL, so any replica
serves any cursor. No timing is asserted (bench/: `memoryd bench watch --replicas 2`); a change
that does not come within a generous wait fails."""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator

import grpc
import pytest

from memoryd.v1 import memory_pb2 as pb
from memoryd.v1 import memory_service_pb2 as svc

from ..support import Agent, draft, full_view, put_view, rule, token_for, unique
from ..support_distributed import Deployment, ExternalPostgres, MilvusStandalone
from ._callers import Caller, new_tenant
from .conftest import new_deployment

pytestmark = pytest.mark.slow
WAIT = 30.0  # seconds for one change to arrive: generous, not a latency bound
CREATED, SUBJECT_ERASED = svc.MEMORY_CHANGE_KIND_CREATED, svc.MEMORY_CHANGE_KIND_SUBJECT_ERASED
A, B = 0, 1  # the replicas
FENCE = "fence."  # the key prefix of the facts that show a stream is open (Watcher.open_with)


@pytest.fixture(scope="module")
def shape(pg15: ExternalPostgres, milvus_standalone: MilvusStandalone,
          tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    deployment = new_deployment(pg15, milvus_standalone, tmp_path_factory.mktemp("watch"))
    deployment.start_replica()  # the first creates the shared keys
    deployment.start_replica()
    deployment.start_worker()
    yield deployment
    deployment.stop_all()


class Watcher:
    """A Watch stream read on its own thread; what it receives waits in a queue."""

    def __init__(self, agent: Agent, request: svc.WatchRequest) -> None:
        self.call = agent.memory.Watch(request, metadata=agent.metadata)
        self.received: queue.Queue[svc.WatchResponse | grpc.RpcError] = queue.Queue()
        self.fences = 0
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        try:
            for response in self.call:
                self.received.put(response)
        except grpc.RpcError as error:
            self.received.put(error)

    def next_change(self, timeout: float = WAIT, fences: bool = False) -> svc.WatchResponse:
        """The next change (heartbeats skipped, and the fences of ``open_with`` unless asked
        for); fails if the stream ended or nothing came."""
        while True:
            try:
                item = self.received.get(timeout=timeout)
            except queue.Empty:
                pytest.fail(f"no change within {timeout:.0f} s")
            if isinstance(item, grpc.RpcError):
                pytest.fail(f"the stream ended: {item.code().name} {item.details()}")
            if item.HasField("change") and (fences or not item.change.memory.key.startswith(FENCE)):
                return item

    def open_with(self, writer: Agent, subject: str) -> Watcher:
        """Return once the stream is open and positioned: a stream without a cursor starts at the
        changes committed after the server read its position, which no message announces, so
        write a fact it reads until one arrives, then one more and skip to it (changes come in
        commit order, so nothing written before that last fence is still to come)."""
        while True:
            self._fence(writer, subject)
            try:
                item = self.received.get(timeout=2)
            except queue.Empty:
                continue
            if isinstance(item, grpc.RpcError):
                pytest.fail(f"the stream ended: {item.code().name} {item.details()}")
            if item.HasField("change"):
                break
        last = self._fence(writer, subject)
        while self.next_change(fences=True).change.memory.key != last:
            pass
        return self

    def _fence(self, writer: Agent, subject: str) -> str:
        self.fences += 1
        key = f"{FENCE}{self.fences}"
        writer.write(subject, draft("fact", f"Fence {self.fences} of the test", key=key))
        return key

    def close(self) -> None:
        self.call.cancel()
        self._thread.join(10)


def _watch(caller: Caller, replica: int, subject: str = "alice", agent: Agent | None = None,
           **request: object) -> Watcher:
    return Watcher(agent or caller.via(replica), svc.WatchRequest(subject=subject, **request))  # type: ignore[arg-type]


def test_a_write_through_one_replica_reaches_watchers_on_the_other_as_their_views_show_it(shape: Deployment) -> None:
    tenant, caller = new_tenant(shape)
    signing = shape.keys / "signing.pem"
    with grpc.insecure_channel(shape.replicas[A].target) as channel:
        put_view(channel, signing, tenant, full_view("agent-facts", read_rules=[rule("fact")], write_rules=[]))
        facts_agent = Agent(channel, token_for(signing, tenant, "agent-facts"))
        full = _watch(caller, A).open_with(caller.via(B), "alice")
        facts = _watch(caller, A, agent=facts_agent).open_with(caller.via(B), "alice")
        try:
            hidden = caller.via(B).write("alice", draft("preference", "Prefers window seats", key="seat"))
            shown = caller.via(B).write("alice", draft("fact", "Lives in Lyon", key="city"))
            for watcher, expected in ((full, [hidden, shown]), (facts, [shown])):
                for written in expected:
                    change = watcher.next_change().change
                    assert change.kind == CREATED
                    assert change.memory.id == written.results[0].memory_id
            assert (change.memory.subject, change.memory.key, change.memory.text) == ("alice", "city", "Lives in Lyon")
        finally:
            full.close()
            facts.close()
            caller.close()


def test_a_cursor_from_one_replica_resumes_on_the_other_with_every_later_change_once(shape: Deployment) -> None:
    _, caller = new_tenant(shape)
    try:
        first = _watch(caller, A).open_with(caller.via(B), "alice")
        before = caller.via(B).write("alice", draft("fact", "Works as a nurse", key="job"))
        seen = first.next_change()
        assert seen.change.memory.id == before.results[0].memory_id and seen.cursor
        first.close()
        later = [caller.via(B).write("alice", draft("fact", text, key=key)).results[0].memory_id
                 for key, text in (("pet", "Has a cat named Miso"), ("sport", "Swims on Sundays"))]

        resumed = _watch(caller, B, cursor=seen.cursor)
        try:
            received = [resumed.next_change() for _ in later]
            assert [r.change.memory.id for r in received] == later  # in order, and not the one before
            fence = caller.via(A).write("alice", draft("fact", "Speaks Basque", key="language"))
            # The next change is the one written now: nothing of the resumed ones came twice.
            assert resumed.next_change().change.memory.id == fence.results[0].memory_id
        finally:
            resumed.close()
    finally:
        caller.close()


def test_a_subject_purged_through_one_replica_ends_as_subject_erased_on_the_other(shape: Deployment) -> None:
    _, caller = new_tenant(shape)
    subject = unique("bob")
    try:
        watcher = _watch(caller, A, subject=subject).open_with(caller.via(B), subject)
        try:
            written = caller.via(B).write(subject, draft("fact", "Plays chess", key="hobby"))
            assert watcher.next_change().change.memory.id == written.results[0].memory_id
            receipt = caller.via(B).erase(subject, svc.ERASE_MODE_PURGE, all_of_subject=True).receipt
            assert receipt.counts.memories >= 2  # the fences and the fact

            change = watcher.next_change().change
            assert change.kind == SUBJECT_ERASED
            # Only the subject: nothing of the purged memories is left to show.
            assert change.memory == pb.Memory(subject=subject)
        finally:
            watcher.close()
    finally:
        caller.close()
