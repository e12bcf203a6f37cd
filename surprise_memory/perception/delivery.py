"""How many camera frames a node lost, judged from the stamps of the frames it received.

A ``sensor_msgs/Image`` header has no sequence number, so a node cannot count the frames
it never saw. It can estimate them: a camera takes its frames one period apart, so a
received frame about n periods after the previous one means n - 1 frames were lost in
between. The stamps jitter, though: a driver that stamps a frame when it publishes it
(common for USB cameras) stamps it late whenever the machine is busy, and a frame held up
by a stall comes out right before the next one (gaps of 1.7 and 0.05 periods where
nothing was lost). :class:`FrameLossEstimator` counts loss in O(1) per frame, with no
history beyond a bounded window of recent gaps, in a way such jitter does not fool:

* **Each frame is placed on the camera's grid** of periods, not judged against the
  previous stamp: its loss is the slots skipped since the previous frame's slot. The grid
  follows the stamps (:data:`GRID_FOLLOW`), so a late stamp alone lands near its own
  slot; a slot skipped only because a stamp was late is given back when a later frame
  lands in it, and counted lost once :data:`CONFIRM_FRAMES` frames came after it. Stamps
  late by up to most of a period cost no frame, where gaps judged one by one counted one
  at half a period.
* **The period** is the stamps' spacing over the grid's last 192-256 slots
  (:data:`ANCHOR_SLOTS`: a stall moves it by well under 1 %); before the grid spans that,
  it follows the stamps (:data:`PERIOD_FOLLOW`). It restarts whenever the recent gaps
  (the last :data:`GAP_WINDOW`) point to another one (:func:`recent_period`): their
  median (the period while fewer than half the frames are lost, however the stamps
  jitter: a gap lengthened by a late stamp is matched by one shortened), or, under heavy
  loss, the cluster of the smallest gaps, taken only when it explains the recent gaps as
  whole multiples of itself clearly better than the median does (:data:`FIT_MARGIN`; a
  stall's tiny gaps explain them no better than chance). The old rule, a restart from
  the smallest recent gap, took a stall's 1 ms gap for the period. A camera that changes
  its rate is followed within half a window; until then a camera that halved its rate
  looks like the loss of every other frame (no estimate from stamps alone can tell the
  two apart sooner).
* **A pause** (a gap longer than ``max(PAUSE_MIN_S, PAUSE_MEAN_GAPS mean gaps)``: a
  camera stopped, a bag paused) is not counted as loss.
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
    "ANCHOR_SLOTS",
    "CONFIRM_FRAMES",
    "FIT_MARGIN",
    "GAP_WINDOW",
    "GRID_FOLLOW",
    "PAUSE_MEAN_GAPS",
    "PAUSE_MIN_S",
    "PERIOD_FOLLOW",
    "SLOT_RING",
    "DeliveryCounts",
    "FrameLossEstimator",
    "WindowSpan",
    "frames_missing",
    "recent_period",
]

GAP_WINDOW = 64
"""Recent gaps from which the period restarts (a new camera rate, a first gap over loss)."""

FIT_MARGIN = 0.2
"""Heavy loss: the smallest gaps' period is taken over the median gap when it explains at
least 80 % of the recent gaps as whole multiples (within a quarter period) and this share
more of them than the median does. At 88 % loss with 10 % jitter it explains nearly all,
the median (about 5 periods) a third; a stall's tiny gaps explain about half, by chance."""

ANCHOR_SLOTS = 64
"""Once the grid spans this many slots, its period is the stamps' spacing over them (an
anchor every 64 slots, the oldest of :data:`_ANCHORS` used: a baseline of 192-256
periods, over which a stall of most of a period moves the period by well under 1 %)."""

_ANCHORS = 4

SLOT_RING = 4096
"""Recent frames whose slots are kept, for :meth:`FrameLossEstimator.missing_between` (the
encoder's windows: ``clip_frames`` of at most 1024, and the frames queued meanwhile)."""

CONFIRM_FRAMES = 6
"""A skipped slot is counted lost once this many frames came after it without landing in
it (a stall may hold up several frames in a row, each less late than the one before;
with 3, one run in 20 of the tests' loaded driver counted a frame lost, with 6 none)."""

GRID_FOLLOW = 1 / 4
"""How much of a frame's distance from its slot the camera's grid moves by (the grid
settles on the stamps' mean delay within a few frames; a lone late stamp moves it by a
quarter of its delay)."""

PERIOD_FOLLOW = GRID_FOLLOW**2 / 4
"""Until the grid spans :data:`ANCHOR_SLOTS`, how much of a frame's distance from its slot
(per period) the period moves by: with :data:`GRID_FOLLOW` a critically damped loop, so a
first period a few percent off (a median of jittered gaps) leaves no lasting phase error."""

PAUSE_MIN_S = 1.0
"""A gap of at least this many seconds (and :data:`PAUSE_MEAN_GAPS` mean gaps) is a pause."""

PAUSE_MEAN_GAPS = 20
"""A gap of at least this many mean received gaps (and :data:`PAUSE_MIN_S`) is a pause.
Gaps over random loss are about geometric: one of 20 mean gaps comes about once in
e**20 = 5e8 gaps, whatever the loss (10 would be once in 22,000: hours at 30 Hz)."""

_MEAN_GAP_WEIGHT = 32  # the running mean of the gaps follows about the last 32


@dataclass(frozen=True)
class DeliveryCounts:
    """What a stream delivered, counted from its stamps.

    Attributes:
        received: Frames received (distinct stamps).
        lost: Frames the camera took between received ones that never arrived
            (estimated from the stamps).
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


def _multiples_fit(gaps: list[int], period: float) -> float:
    """The share of ``gaps`` within a quarter period of a whole multiple (>= 1) of ``period``."""
    fit = 0
    for gap in gaps:
        ratio = gap / period
        fit += abs(ratio - max(1, round(ratio))) < 0.25
    return fit / len(gaps)


def _refined(gaps: list[int], period: float) -> float:
    """``period`` refined as the gaps' sum over the periods they hold (those near a multiple).

    In steps: a rough period (the median of a few single gaps, 5 % off) places the gaps of
    up to 3 periods; refined by those it places gaps of up to 12, then all (a gap of k
    periods is placed right while the period is within 1/(4k) of the truth).
    """
    for longest in (3.5, 12.5, float("inf")):
        held = total = 0
        for gap in gaps:
            ratio = gap / period
            periods = round(ratio)
            if periods >= 1 and ratio < longest and abs(ratio - periods) < 0.25:
                held += periods
                total += gap
        if held:
            period = total / held
    return period


def recent_period(gaps: list[int], current: float | None = None) -> float:
    """The period that ``gaps`` (sorted, not empty) point to: see the module docstring.

    Args:
        gaps: Recent gaps between received stamps, sorted.
        current: The period estimated so far (None before one).

    Returns:
        ``current`` while the median gap agrees with it (within [0.8, 1.25] of it), else
        ``current`` or the median of the smallest gaps' cluster, whichever is a fraction
        of the median that explains the gaps as whole multiples clearly better than the
        median does (:data:`FIT_MARGIN`: heavy loss), else the median gap.

    """
    median = gaps[(len(gaps) - 1) // 2]
    if current is not None and 0.8 * current <= median <= 1.25 * current:
        return current
    low = [g for g in gaps if g <= 1.5 * gaps[0]]
    median_fit: float | None = None
    for rough in (current, low[(len(low) - 1) // 2]):
        if rough is None or rough >= 0.75 * median:
            continue
        candidate = _refined(gaps, rough)
        fit = _multiples_fit(gaps, candidate)
        if fit < 1.0 - FIT_MARGIN:
            continue
        if median_fit is None:
            median_fit = _multiples_fit(gaps, median)
        if fit >= median_fit + FIT_MARGIN:
            return candidate
    return median


class FrameLossEstimator:
    """The camera's period and the frames this node lost, from received stamps (O(1) each).

    Streaming shape: :meth:`update` per received frame, :meth:`flush` at the end of a
    stream (judges what is held and returns the totals), :meth:`reset` for a new camera.
    The first :data:`GAP_WINDOW` gaps are held (a bounded list) and judged together once
    they are all in: the period is not known before, and a gap judged against a wrong one
    would count the wrong loss. After that, a skipped slot counts as lost once
    :data:`CONFIRM_FRAMES` frames came after it (a late frame may still land in it).

    Args:
        window: Recent gaps whose period the estimate restarts from (:data:`GAP_WINDOW`).

    Raises:
        ConfigError: window < 2.

    """

    def __init__(self, window: int = GAP_WINDOW) -> None:
        if window < 2:
            raise ConfigError(f"window={window}: must be >= 2")
        self._window = window
        self._gaps: deque[int] = deque(maxlen=window)
        self._slots = [0] * SLOT_RING  # each recent frame's absolute slot, by index
        self.reset()

    def reset(self) -> None:
        """Forget the camera (period, last stamp, recent gaps) and the totals."""
        self._gaps.clear()
        self._period_ns: float | None = None
        self._mean_gap_ns = 0.0  # running mean of the judged gaps (pauses excluded)
        self._last_ns: int | None = None
        self._warmup: list[int] | None = []  # the first gaps, judged once the period is known
        self._phase_ns = 0.0  # the last frame's stamp less its slot on the camera's grid
        self._slot = 0  # the last frame's slot on the grid since the sequence began
        self._time_ns = 0  # its stamp less the sequence's first
        self._seen = 0  # distinct frames received: the index the next one gets
        self._placed = 0  # frames placed on the grid (their absolute slots in the ring)
        self._abs_slot = -1  # the last placed frame's slot, counted over every sequence
        self._skipped_at = 0  # the frame whose gap began the slots not yet confirmed
        self._anchors: deque[tuple[int, int]] = deque(maxlen=_ANCHORS)  # (slot, time)
        self._unconfirmed = 0  # slots skipped that a late frame may still take back
        self._unconfirmed_for = 0  # frames received since the first of them was skipped
        self._received = 0
        self._lost = 0
        self._span_ns = 0
        self._duplicates = 0
        self._pauses = 0

    @property
    def period_ns(self) -> int | None:
        """The camera's estimated frame period (None until the first gaps are judged)."""
        return None if self._unsure else round(self._period_ns or 0)

    @property
    def camera_hz(self) -> float | None:
        """The camera's estimated rate (None until the first gaps are judged)."""
        return None if self._unsure else NS_PER_SECOND / (self._period_ns or 1)

    @property
    def _unsure(self) -> bool:
        """Whether the period is a first guess (the first :data:`GAP_WINDOW` gaps held)."""
        return self._period_ns is None or self._warmup is not None

    @property
    def counts(self) -> DeliveryCounts:
        """Running totals since construction or :meth:`reset`.

        The frames of the first :data:`GAP_WINDOW` gaps count once they are judged; a
        skipped slot once :data:`CONFIRM_FRAMES` frames came after it.
        """
        return DeliveryCounts(
            self._received, self._lost, self._span_ns, self._duplicates, self._pauses
        )

    def update(self, stamp_ns: int) -> int:
        """Count a received frame by its stamp.

        Args:
            stamp_ns: The frame's header stamp.

        Returns:
            Frames counted lost by this call: slots skipped :data:`CONFIRM_FRAMES` frames
            ago, or before a pause or a backward jump (0 for the first frame, a duplicate,
            and while the first :data:`GAP_WINDOW` gaps are held; the call that completes
            them returns the loss they confirm).

        """
        last = self._last_ns
        if last is not None and stamp_ns == last:
            self._duplicates += 1
            return 0
        self._last_ns = stamp_ns
        self._seen += 1
        if last is None or stamp_ns < last:  # first frame, or a new sequence (bag looped)
            confirmed = self._judge_warmup() if self._warmup else 0  # placed in order
            self._received += 1
            confirmed += self._new_sequence()
            self._place(1)
            return confirmed
        gap = stamp_ns - last
        self._gaps.append(gap)
        self._follow_period(recent_period(sorted(self._gaps), self._period_ns))
        warmup = self._warmup
        if warmup is None:
            return self._judge(gap)
        warmup.append(gap)
        if len(warmup) < self._window:
            return 0
        return self._judge_warmup()

    def _new_sequence(self) -> int:
        """The grid starts again at this frame; the loss not yet confirmed stands."""
        confirmed, self._unconfirmed = self._unconfirmed, 0
        self._lost += confirmed
        self._phase_ns = 0.0
        self._slot = self._time_ns = 0
        self._anchors.clear()
        return confirmed

    def _judge_warmup(self) -> int:
        """Judge the gaps held until the period was known."""
        gaps = self._warmup or []
        self._warmup = None
        if gaps:
            ordered = sorted(gaps)
            self._mean_gap_ns = float(ordered[len(gaps) // 2])  # not swayed by a pause
            # the period all of them point to (the one followed so far came from the first)
            self._period_ns = float(recent_period(ordered))
        return sum(self._judge(gap) for gap in gaps)

    def _judge(self, gap: int) -> int:
        """Count one gap: a pause, or place the frame on the grid; return the loss confirmed."""
        self._received += 1
        mean_gap = self._mean_gap_ns or gap
        if gap >= max(PAUSE_MIN_S * NS_PER_SECOND, PAUSE_MEAN_GAPS * mean_gap):
            self._pauses += 1
            confirmed = self._new_sequence()
            self._place(1)
            return confirmed
        self._mean_gap_ns = mean_gap + (gap - mean_gap) / _MEAN_GAP_WEIGHT
        self._span_ns += gap
        self._time_ns += gap
        period = self._period_ns
        assert period is not None  # set by the first gap
        offset = self._phase_ns + gap  # from the previous frame's slot
        slots = round(offset / period)
        if slots < 1 and self._unconfirmed:
            # in (or before) the slot of the previous frame: the frames before came late,
            # the slots their gaps seemed to skip were not skipped
            taken_back = min(self._unconfirmed, 1 - slots)
            self._unconfirmed -= taken_back
            self._slot -= taken_back
            self._abs_slot -= taken_back
            ring = self._slots
            for index in range(max(self._skipped_at, self._placed - SLOT_RING), self._placed):
                ring[index % SLOT_RING] -= taken_back  # at most CONFIRM_FRAMES frames
            offset += taken_back * period
            slots += taken_back
        confirmed = 0
        if self._unconfirmed:
            self._unconfirmed_for += 1
            if self._unconfirmed_for >= CONFIRM_FRAMES:
                confirmed, self._unconfirmed = self._unconfirmed, 0
                self._lost += confirmed
        if slots < 1:  # two frames in one slot: the grid starts again here
            self._phase_ns = 0.0
            self._place(1)
            return confirmed
        # the grid follows the stamps: its phase by GRID_FOLLOW of the frame's distance
        # from its slot; its period by PERIOD_FOLLOW of that distance per period until
        # the grid has a long baseline, then as the stamps' spacing over the slots since
        # an anchor ANCHOR_SLOTS or more back (the jitter divided by those slots)
        residual = offset - slots * period
        self._phase_ns = residual * (1.0 - GRID_FOLLOW)
        self._slot += slots
        self._period_ns = self._baseline_period() or period + residual * PERIOD_FOLLOW / slots
        self._place(slots)
        if slots > 1:
            if not self._unconfirmed:
                self._unconfirmed_for = 0
                self._skipped_at = self._placed - 1
            self._unconfirmed += slots - 1
        return confirmed

    def _place(self, slots: int) -> None:
        """Put the frame judged now ``slots`` after the last one on the grid."""
        self._abs_slot += slots
        self._slots[self._placed % SLOT_RING] = self._abs_slot
        self._placed += 1

    @property
    def frames_seen(self) -> int:
        """Distinct frames received so far (frame ``i`` is the ``i``-th, from 0)."""
        return self._seen

    def missing_between(self, first: int, last: int) -> int | None:
        """Frames the camera took between two received frames that never arrived.

        As the grid places them (pauses excluded): the stamps' jitter moves none.

        Args:
            first: Index of the earlier frame (:attr:`frames_seen` counts them).
            last: Index of the later one.

        Returns:
            The count, or None while it may still change (a frame placed within the last
            :data:`CONFIRM_FRAMES`, or not yet placed: the first gaps are held) or once
            ``first`` is more than :data:`SLOT_RING` frames back.

        """
        oldest = max(0, self._placed - SLOT_RING)
        if not oldest <= first <= last < self._placed - CONFIRM_FRAMES:
            return None
        ring = self._slots
        return ring[last % SLOT_RING] - ring[first % SLOT_RING] - (last - first)

    def _baseline_period(self) -> float | None:
        """The stamps' spacing over the slots since the oldest anchor (None while too few)."""
        anchors = self._anchors
        if self._slot < ANCHOR_SLOTS:  # the grid is still settling on the stamps
            return None
        if not anchors or self._slot - anchors[-1][0] >= ANCHOR_SLOTS:
            anchors.append((self._slot, self._time_ns))
        slot, time_ns = anchors[0]
        if self._slot - slot < ANCHOR_SLOTS:
            return None
        return (self._time_ns - time_ns) / (self._slot - slot)

    def _follow_period(self, recent: float) -> None:
        """Restart the period when the recent gaps' period is not the current one."""
        period = self._period_ns
        if period is None or not 0.8 * period <= recent <= 1.25 * period:
            # the first gap; the recent gaps point to another period (a faster or slower
            # camera, or a first gap that spanned lost frames)
            self._period_ns = float(recent)
            self._anchors.clear()

    def flush(self) -> DeliveryCounts:
        """End of stream: judge the gaps still held, confirm the last gap's loss.

        Returns:
            The totals.

        """
        if self._warmup and self._period_ns is not None:
            self._judge_warmup()
        self._new_sequence()
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

    def add(
        self, span_ns: int, frames: int, period_ns: int | None, missing: int | None = None
    ) -> int:
        """Judge one window.

        Args:
            span_ns: Newest minus oldest (distinct) frame stamp of the window.
            frames: Distinct frames in it (M less its padding).
            period_ns: The input period (``1/input_fps``, or the camera's estimated period
                when every frame is kept); None while unknown (the window is not judged).
            missing: The frames missing between its first and last frame where they are
                counted (every frame kept: the camera's grid,
                :meth:`FrameLossEstimator.missing_between`); None = from the span.

        Returns:
            Frames missing from the window (0 when it was not judged).

        """
        if period_ns is None or period_ns <= 0 or frames < 2:
            return 0
        if missing is None:
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
