"""The fleet link's pure parts: merging answers, the link's state, its findings, the ledger."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest

from surprise_memory.errors import StoreError, StoreUnreachableError
from surprise_memory.health import Level
from surprise_memory.memory.pose import Pose
from surprise_memory.memory.retrieval import RetrievalQuery
from surprise_memory.memory.store import EpisodeRecord, RetrievalHit, RetrievalHits, partial_of
from surprise_memory.memory.store.fleet import (
    Backlog,
    DeliveryLedger,
    FleetStatus,
    LinkMonitor,
    LinkReport,
    Pending,
    fleet_findings,
)
from surprise_memory.memory.store.hits import merge_hits


def _hit(
    ep_id: str, stamp: int, score: float | None = None, dist: float | None = None
) -> RetrievalHit:
    record = EpisodeRecord(
        id=ep_id,
        stamp_ns=stamp,
        start_ns=stamp,
        end_ns=stamp,
        pose=Pose(),
        pose_valid=False,
        surprise=1.0,
        threshold=1.0,
        frame_stamps_ns=(stamp,),
        frame_paths=(),
        encoder_model="",
        encoder_pretrained=True,
        embedder_model="m",
        embedder_pretrained=True,
        created_wall_ns=0,
    )
    return RetrievalHit(record, score, dist)


def _ids(hits: list[RetrievalHit]) -> list[str]:
    return [h.episode.id for h in hits]


def test_merged_answers_rank_as_one_store_would() -> None:
    ranked = RetrievalQuery(embedding=np.ones(4), embedder_model="m")
    own = [_hit("a", 1, 0.9), _hit("b", 2, 0.5)]
    fleet = [_hit("c", 3, 0.7), _hit("a", 1, 0.9), _hit("d", 4, 0.5)]
    assert _ids(merge_hits(ranked, 3, own, fleet)) == ["a", "c", "d"]  # ties: the newer
    near = RetrievalQuery(near=(0.0, 0.0, 0.0))
    by_place = merge_hits(near, 9, [_hit("a", 1, dist=3.0)], [_hit("b", 2, dist=1.0)])
    assert _ids(by_place) == ["b", "a"]
    newest = merge_hits(RetrievalQuery(), 2, [_hit("a", 5)], [_hit("b", 9), _hit("c", 1)])
    assert _ids(newest) == ["b", "a"] and partial_of(newest) == ""
    assert partial_of(RetrievalHits([], partial="down")) == "down"
    assert partial_of([_hit("a", 1)]) == ""  # a plain list: a store that is always whole


def test_the_link_state_follows_the_calls() -> None:
    monitor = LinkMonitor(slow_after_s=0.05)
    assert monitor.report().state == "connecting"
    with monitor.call(check=True):
        pass
    assert monitor.report().state == "connected" and monitor.report().round_trip_s is not None
    with pytest.raises(StoreUnreachableError), monitor.call():
        raise StoreUnreachableError("cut")
    report = monitor.report()
    assert report.state == "unreachable" and report.detail == "cut" and monitor.unreachable
    with pytest.raises(StoreError), monitor.call():
        raise StoreError("schema newer")  # answered: reachable, refusing
    assert monitor.report().state == "connected" and monitor.report().refused == "schema newer"
    with monitor.call(check=True):
        time.sleep(0.08)
    assert monitor.report().state == "slow" and monitor.report().refused == ""

    class Timed:  # a store that times its exchanges, as the PostgreSQL store does
        def waiting_seconds(self) -> float:
            return 0.2  # an exchange in progress that waits

        def slowest_exchange_seconds(self) -> float:
            return 0.01

    with monitor.call(Timed()):
        assert monitor.report().state == "slow" and monitor.report().waiting_s == 0.2
    report = monitor.report()
    assert report.state == "connected" and report.round_trip_s == 0.01  # its exchanges: fast
    # a link that answered fast and now says nothing is not slow: it does not answer
    with monitor.call(Timed()):
        report = monitor.report()
        assert report.state == "not answering", report
        assert report.detail == "a call has waited 0.2 s for an answer"


def _status(state: str, nbytes: int = 0, refused: str = "") -> FleetStatus:
    link = LinkReport(state, "cut", 12.0, 0.01, 0.0, refused)
    backlog = Backlog(3, nbytes, time.time_ns() - 30 * 10**9, 5, 0)
    return FleetStatus(link, backlog, bound_bytes=1000, location="fleet-db")


def test_findings_warn_for_the_link_and_err_for_losses() -> None:
    assert [f for f in fleet_findings(_status("connected"), time.time_ns()) if f] == []
    (down,) = fleet_findings(_status("unreachable"), time.time_ns())
    assert down is not None and down.level is Level.WARN
    assert "fleet store fleet-db unreachable for 12 s" in down.reason
    assert "3 episode(s)" in down.reason and "the oldest for 30 s" in down.reason
    (slow,) = fleet_findings(_status("slow"), time.time_ns())
    assert slow is not None and slow.level is Level.WARN and "slow" in slow.reason
    (silent,) = fleet_findings(_status("not answering"), time.time_ns())
    assert silent is not None and silent.level is Level.WARN
    assert (
        "fleet store fleet-db not answering: cut" in silent.reason and "slow" not in silent.reason
    )
    full = fleet_findings(_status("connected", nbytes=800), time.time_ns())
    assert [f.level for f in full if f] == [Level.ERROR]  # 80% of the bound
    refused = fleet_findings(_status("connected", refused="another embedder"), time.time_ns())
    assert [f.level for f in refused if f] == [Level.ERROR]


def test_the_ledger_keeps_its_state_across_opens(tmp_path: Path) -> None:
    ledger = DeliveryLedger(tmp_path)
    ledger.append([Pending(f"e{i}", 100 + i, float(i), i) for i in range(4)])
    ledger.mark_sent("e0")
    ledger.mark_not_sent("e2", "refused")
    assert ledger.next_pending() == Pending("e1", 101, 1.0, 1)
    ledger.close()
    again = DeliveryLedger(tmp_path)
    try:
        assert again.known() == {"e0", "e1", "e3"}
        assert again.backlog() == Backlog(2, 101 + 103, 1, 0, 0)
        assert again.oldest_sent() == "e0" and again.not_sent() == [("e2", "refused")]
        assert again.lowest_pending(keep={"e1"}) == Pending("e3", 103, 3.0, 3)
        again.forget(["e0"])
        assert again.oldest_sent() is None
    finally:
        again.close()
