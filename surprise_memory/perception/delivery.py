"""How many camera frames a node lost, judged from the stamps of the frames it received.

A ``sensor_msgs/Image`` header has no sequence number, so a node cannot count the frames
it never saw. It can estimate them: a camera stamps its frames one period apart (with
some jitter), so a gap of about n periods between two received stamps means n - 1 frames
were lost in between. :class:`FrameLossEstimator` does that in O(1) per frame, with no
history beyond a bounded window of recent gaps:

* **The period** is the running mean of the gaps that surely hold one or two periods
  (within a quarter of a period of it: never a k-period gap read as k +- 1 while the
  period is within a third of the truth, so the mean cannot settle between multiples).
  It restarts from the smallest of the last :data:`GAP_WINDOW` gaps whenever that gap is
  not within [0.75, 1.5] periods: at the first gap, after a first gap that spanned lost
  frames, and when the camera changes its rate (faster: at once; slower: once the window
  holds none of the old gaps). The smallest recent gap is a single period as long as one
  received gap in the window is: with 4 of 5 frames lost at random, all 64 miss with a
  chance of 0.81**64 < 1e-5. Until then a camera that halved its rate looks like the
  loss of every other frame; no estimate from stamps alone can tell the two apart sooner.
* **A pause** (a gap longer than ``max(PAUSE_MIN_S, PAUSE_MEAN_GAPS mean gaps)``: a
  camera stopped, a bag paused) is not counted as loss. Jitter of the stamps is allowed up
  to a tenth of a period either way (more makes the smallest recent gap less than 0.75
  periods, and the period restarts too low).
* **A duplicate stamp** is counted apart and ignored; **a stamp going backwards** (a bag
  looped) starts a new sequence: its gap is not judged, the period is kept.

:class:`WindowSpan` judges the encoder's windows the same way: a window of M frames that
spans more than M - 1 input periods was built from frames further apart than the
configured rate (the model then sees another time scale).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from surprise_memory.errors import ConfigError
from surprise_memory.stamps import NS_PER_SECOND

__all__ = [
    "GAP_WINDOW",
    "PAUSE_MEAN_GAPS",
    "PAUSE_MIN_S",
    "DeliveryCounts",
    "FrameLossEstimator",
    "WindowSpan",
    "frames_missing",
]

GAP_WINDOW = 64
"""Recent gaps whose smallest restarts the period of a camera that slowed down."""

PAUSE_MIN_S = 1.0
"""A gap of at least this many seconds (and :data:`PAUSE_MEAN_GAPS` mean gaps) is a pause."""

PAUSE_MEAN_GAPS = 20
"""A gap of at least this many mean received gaps (and :data:`PAUSE_MIN_S`) is a pause.
Gaps over random loss are about geometric: one of 20 mean gaps comes about once in
e**20 = 5e8 gaps, whatever the loss (10 would be once in 22,000: hours at 30 Hz)."""

_MEAN_GAP_WEIGHT = 32  # the running mean of the gaps follows about the last 32
_PERIOD_WEIGHT = 64  # the period: the mean of the last ~64 single-period gaps


@dataclass(frozen=True)
class DeliveryCounts:
    """What a stream delivered, counted from its stamps.

    Attributes:
        received: Frames received (distinct stamps).
        lost: Frames the camera stamped between received ones that never arrived
            (estimated from the gaps).
        span_ns: Camera time the judged gaps cover (pauses and backward jumps excluded).
        duplicates: Frames whose stamp equalled the previous one (not counted as received).
        pauses: Gaps judged as pauses, not loss.

    """

    received: int = 0
    lost: int = 0
    span_ns: int = 0
    duplicates: int = 0
    pauses: int = 0

    @property
    def expected(self) -> int:
        """Frames the camera published over the judged span: received + lost."""
        return self.received + self.lost

    @property
    def fraction_lost(self) -> float:
        """The share of the expected frames that were lost (0.0 when none was expected)."""
        return self.lost / self.expected if self.expected else 0.0

    @property
    def received_hz(self) -> float | None:
        """Frames received per second of camera time (None before two frames)."""
        if self.span_ns <= 0:
            return None
        return self.received * NS_PER_SECOND / self.span_ns

    def since(self, earlier: DeliveryCounts) -> DeliveryCounts:
        """The counts added after ``earlier`` (a period's share of running totals)."""
        return DeliveryCounts(
            received=self.received - earlier.received,
            lost=self.lost - earlier.lost,
            span_ns=self.span_ns - earlier.span_ns,
            duplicates=self.duplicates - earlier.duplicates,
            pauses=self.pauses - earlier.pauses,
        )


class _WindowMin:
    """Minimum of the last ``size`` values, O(1) amortised per value (a monotonic deque)."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._count = 0
        self._items: deque[tuple[int, int]] = deque()  # (index, value), values increasing

    def push(self, value: int) -> int:
        """Add a value; return the minimum of the last ``size`` values."""
        while self._items and self._items[-1][1] >= value:
            self._items.pop()
        self._items.append((self._count, value))
        self._count += 1
        if self._items[0][0] <= self._count - 1 - self._size:
            self._items.popleft()
        return self._items[0][1]

    def clear(self) -> None:
        self._items.clear()


class FrameLossEstimator:
    """The camera's period and the frames this node lost, from received stamps (O(1) each).

    Streaming shape: :meth:`update` per received frame, :meth:`flush` at the end of a
    stream (judges what is held and returns the totals), :meth:`reset` for a new camera.
    The first :data:`GAP_WINDOW` gaps are held (a bounded list) and judged together once
    they are all in: the period is not known before, and a gap judged against a wrong one
    would count the wrong loss.

    Args:
        window: Recent gaps whose smallest restarts the period when the camera slows
            down (:data:`GAP_WINDOW`).

    Raises:
        ConfigError: window < 2.

    """

    def __init__(self, window: int = GAP_WINDOW) -> None:
        if window < 2:
            raise ConfigError(f"window={window}: must be >= 2")
        self._window = window
        self._gaps = _WindowMin(window)
        self.reset()

    def reset(self) -> None:
        """Forget the camera (period, last stamp, recent gaps) and the totals."""
        self._gaps.clear()
        self._period_ns: float | None = None
        self._judged = 0  # periods (in gaps of one or two) that refined it since its restart
        self._mean_gap_ns = 0.0  # running mean of the judged gaps (pauses excluded)
        self._last_ns: int | None = None
        self._warmup: list[int] | None = []  # the first gaps, judged once the period is known
        self._received = 0
        self._lost = 0
        self._span_ns = 0
        self._duplicates = 0
        self._pauses = 0

    @property
    def period_ns(self) -> int | None:
        """The camera's estimated frame period (None before the first gap)."""
        return None if self._period_ns is None else round(self._period_ns)

    @property
    def camera_hz(self) -> float | None:
        """The camera's estimated rate (None before the first gap)."""
        return None if self._period_ns is None else NS_PER_SECOND / self._period_ns

    @property
    def counts(self) -> DeliveryCounts:
        """Running totals since construction or :meth:`reset`.

        The frames of the first :data:`GAP_WINDOW` gaps count once they are judged.
        """
        return DeliveryCounts(
            self._received, self._lost, self._span_ns, self._duplicates, self._pauses
        )

    def update(self, stamp_ns: int) -> int:
        """Count a received frame by its stamp.

        Args:
            stamp_ns: The frame's header stamp.

        Returns:
            Frames estimated lost just before this one (0 for the first frame, a
            duplicate, a backward jump or the end of a pause). The first
            :data:`GAP_WINDOW` gaps after the start or :meth:`reset` are judged together,
            once the period is known (the call that completes them returns their loss).

        """
        last = self._last_ns
        if last is not None and stamp_ns == last:
            self._duplicates += 1
            return 0
        self._last_ns = stamp_ns
        if last is None or stamp_ns < last:  # first frame, or a new sequence (bag looped)
            self._received += 1
            return 0
        gap = stamp_ns - last
        period = self._follow_period(gap, self._gaps.push(gap))
        warmup = self._warmup
        if warmup is None:
            return self._judge(gap, period)
        warmup.append(gap)
        if len(warmup) < self._window:
            return 0
        return self._judge_warmup(period)

    def _judge_warmup(self, period: float) -> int:
        """Judge the gaps held until the period was known."""
        gaps = self._warmup or []
        self._warmup = None
        if gaps:
            self._mean_gap_ns = float(sorted(gaps)[len(gaps) // 2])  # not swayed by a pause
        return sum(self._judge(gap, period) for gap in gaps)

    def _judge(self, gap: int, period: float) -> int:
        """Count one gap: a pause, or the frames lost in it."""
        self._received += 1
        mean_gap = self._mean_gap_ns or gap
        if gap >= max(PAUSE_MIN_S * NS_PER_SECOND, PAUSE_MEAN_GAPS * mean_gap):
            self._pauses += 1
            return 0
        self._mean_gap_ns = mean_gap + (gap - mean_gap) / _MEAN_GAP_WEIGHT
        lost = max(1, round(gap / period)) - 1
        self._lost += lost
        self._span_ns += gap
        return lost

    def _follow_period(self, gap: int, smallest: int) -> float:
        """Update the period with a gap and the smallest recent gap; return it."""
        period = self._period_ns
        if period is None or not 0.75 * period <= smallest <= 1.5 * period:
            # the first gap; a recent gap well under the period (a faster camera, or a
            # first gap that spanned lost frames); or none near it (a slower camera)
            return self._restart_period(smallest)
        periods = round(gap / period)
        if 1 <= periods <= 2 and abs(gap - periods * period) < 0.25 * period:
            # one or two periods, surely: refine the mean period. Narrow enough never to
            # take a gap of k periods for k - 1 or k + 1 while the period is within a
            # third of the truth (which the restart rule keeps), so the mean cannot
            # settle between two multiples; two-period gaps halve the error of a
            # heavily lost stream, where single gaps are rare
            self._judged += periods
            period += (gap / periods - period) * periods / min(self._judged + 1, _PERIOD_WEIGHT)
            self._period_ns = period
        return period

    def _restart_period(self, gap: int) -> float:
        self._period_ns = float(gap)
        self._judged = 0
        return self._period_ns

    def flush(self) -> DeliveryCounts:
        """End of stream: judge the gaps still held (a stream shorter than the warm-up).

        Returns:
            The totals.

        """
        if self._warmup and self._period_ns is not None:
            self._judge_warmup(self._period_ns)
        return self.counts


def frames_missing(span_ns: int, frames: int, period_ns: int) -> int:
    """Frames missing from a run of ``frames`` stamps that spans ``span_ns``.

    Args:
        span_ns: Newest minus oldest stamp of the run.
        frames: Frames in the run (>= 1).
        period_ns: The period the frames should be apart (> 0).

    Returns:
        ``round(span / period) + 1 - frames``, at least 0: how many frames a run at the
        period would hold in that span beyond the ones it has.

    """
    return max(0, round(span_ns / period_ns) + 1 - frames)


class WindowSpan:
    """How far apart the frames of the encoder's windows were, against the input period.

    :meth:`add` per window; :meth:`take` per diagnostics period returns what the windows
    since the last call missed: their frames missing over the frames their spans should
    hold, and the mean span.
    """

    def __init__(self) -> None:
        self._clear()

    def _clear(self) -> None:
        self._windows = 0
        self._missing = 0
        self._expected = 0
        self._span_ns = 0
        self._periods_ns = 0

    def add(self, span_ns: int, frames: int, period_ns: int | None) -> int:
        """Judge one window.

        Args:
            span_ns: Newest minus oldest (distinct) frame stamp of the window.
            frames: Distinct frames in it (M less its padding).
            period_ns: The input period (``1/input_fps``, or the camera's estimated period
                when every frame is kept); None while unknown (the window is not judged).

        Returns:
            Frames missing from the window (0 when it was not judged).

        """
        if period_ns is None or period_ns <= 0 or frames < 2:
            return 0
        missing = frames_missing(span_ns, frames, period_ns)
        self._windows += 1
        self._missing += missing
        self._expected += frames + missing
        self._span_ns += span_ns
        self._periods_ns += period_ns * (frames - 1)
        return missing

    def take(self) -> tuple[float, float, float] | None:
        """The windows since the last call, then start afresh.

        Returns:
            ``(fraction of frames missing, mean span s, mean span s at the input
            period)``, or None when no window was judged.

        """
        if not self._windows:
            return None
        n = self._windows
        figures = (
            self._missing / self._expected,
            self._span_ns / n / NS_PER_SECOND,
            self._periods_ns / n / NS_PER_SECOND,
        )
        self._clear()
        return figures
