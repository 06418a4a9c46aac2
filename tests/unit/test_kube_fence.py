"""The write fence (kube/fence.py): pure decisions with a fake clock."""

from __future__ import annotations

import threading

import pytest

from gitops_ray.kube import KubeError, LeaseExpired
from gitops_ray.kube.fence import NO_TERM, WriteFence, is_write, refusal, unfenced


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def fence(clock: FakeClock) -> WriteFence:
    f = WriteFence(clock=clock)
    f.grant(1, valid_until=clock.now + 3)
    return f


@pytest.mark.parametrize(("method", "query", "body", "write"), [
    ("GET", {}, None, False),
    ("get", None, None, False),
    ("POST", {"fieldManager": "gitops-ray"}, {"kind": "Event"}, True),
    ("PUT", {"dryRun": None}, {}, True),
    ("PATCH", {"fieldManager": "gitops-ray", "force": "true"}, {}, True),
    ("PATCH", {"dryRun": "All"}, {}, False),  # the pipeline's diff: a dry run
    ("POST", {"dryRun": "All"}, {}, False),
    ("DELETE", {}, {"kind": "DeleteOptions", "dryRun": ["All"]}, False),
    ("DELETE", {}, {"kind": "DeleteOptions", "propagationPolicy": "Foreground"}, True),
    ("DELETE", None, None, True),
    ("POST", {}, {"dryRun": ["All"]}, True),  # a body field only counts for DELETE
])
def test_what_counts_as_a_write(method: str, query: dict[str, object] | None, body: object,
                                write: bool) -> None:
    assert is_write(method, query, body) is write


def test_refusal_is_pure_and_names_the_reason() -> None:
    assert refusal(captured=None, term=2, valid_until=10, now=9.9) is None
    assert refusal(captured=2, term=2, valid_until=10, now=9.9) is None
    assert "not the leader" in str(refusal(captured=None, term=NO_TERM, valid_until=10, now=1))
    assert "term 1" in str(refusal(captured=1, term=2, valid_until=10, now=1))
    assert "while not leading" in str(refusal(captured=NO_TERM, term=2, valid_until=10, now=1))
    assert "expired 0.5s ago" in str(refusal(captured=2, term=2, valid_until=10, now=10.5))
    assert refusal(captured=2, term=2, valid_until=10, now=10) is not None  # at the deadline


def test_writes_pass_until_the_deadline_then_are_refused(fence: WriteFence,
                                                         clock: FakeClock) -> None:
    fence.check("PATCH /x")
    clock.now += 2.9
    fence.check("PATCH /x")
    assert fence.remaining() == pytest.approx(0.1)
    clock.now += 0.2  # e.g. SIGSTOPped: the monotonic clock kept going
    with pytest.raises(LeaseExpired, match=r"PATCH /x: write refused: the lease may have "
                                           r"expired 0\.1s ago"):
        fence.check("PATCH /x")
    assert fence.term() == NO_TERM and fence.remaining() == 0
    assert fence.refused == 1


def test_a_renewal_extends_the_same_term(fence: WriteFence, clock: FakeClock) -> None:
    with fence.scope() as valid:
        assert valid
        clock.now += 2.5
        fence.grant(1, valid_until=clock.now + 3)  # the elector renewed
        clock.now += 2.5
        fence.check("PUT /record")


def test_work_started_in_one_term_cannot_write_in_the_next(fence: WriteFence,
                                                            clock: FakeClock) -> None:
    with fence.scope() as valid:
        assert valid
        fence.revoke()
        fence.grant(2, valid_until=clock.now + 3)  # lost, then acquired again
        with pytest.raises(LeaseExpired, match="started under lease term 1 but the current "
                                               "term is 2"):
            fence.check("PATCH /rc")
    fence.check("PATCH /rc")  # new work, outside the old scope, is in term 2
    with fence.scope():
        fence.check("PATCH /rc")


def test_work_started_while_not_leading_never_writes(clock: FakeClock) -> None:
    fence = WriteFence(clock=clock)
    with fence.scope() as valid:
        assert not valid
        fence.grant(1, valid_until=clock.now + 3)
        with pytest.raises(LeaseExpired, match="while not leading"):
            fence.check("POST /events")


def test_revoked_fence_refuses_and_lease_expired_is_a_kube_error(fence: WriteFence) -> None:
    fence.revoke()
    with pytest.raises(KubeError, match="not the leader") as caught:
        fence.check("DELETE /rc")
    assert isinstance(caught.value, LeaseExpired) and caught.value.reason == "LeaseExpired"


def test_unfenced_lets_the_electors_own_writes_through(fence: WriteFence) -> None:
    fence.revoke()
    with unfenced():
        fence.check("PUT /leases/gitops-ray")
    with pytest.raises(LeaseExpired):
        fence.check("PUT /leases/gitops-ray")


def test_the_captured_term_belongs_to_one_thread(fence: WriteFence, clock: FakeClock) -> None:
    errors: list[BaseException] = []

    def other_thread() -> None:  # started after the term changed: no old scope
        try:
            fence.check("PATCH /rc")
        except LeaseExpired as e:
            errors.append(e)

    with fence.scope():
        fence.grant(2, valid_until=clock.now + 3)
        worker = threading.Thread(target=other_thread)
        worker.start()
        worker.join()
        with pytest.raises(LeaseExpired):
            fence.check("PATCH /rc")
    assert errors == []


def test_term_zero_cannot_be_granted(clock: FakeClock) -> None:
    with pytest.raises(ValueError, match="term 0"):
        WriteFence(clock=clock).grant(NO_TERM, valid_until=clock.now + 3)
