"""Running median and median absolute deviation over a bounded history."""

from __future__ import annotations

import bisect
import math
from collections import deque

__all__ = ["MAD_TO_SIGMA", "RollingMedianMAD"]

MAD_TO_SIGMA = 1.4826
"""Scale that makes the MAD a consistent estimator of a Gaussian's standard deviation."""


class RollingMedianMAD:
    """Exact median and MAD of the ``capacity`` most recent values.

    The values are kept twice: in arrival order (to know which one leaves) and sorted.
    Adding a value costs a binary search plus a pointer move in the sorted list (a C
    ``memmove`` of at most ``capacity`` pointers, about a microsecond at 3000); the median
    is two index reads, and the MAD an O(log n) selection: the absolute deviations from
    the median form two sorted runs (left of the median, read backwards, and right of it),
    and their k-th smallest element is found by bisection on how many come from each run.
    Results equal ``numpy.median`` of the values and of their absolute deviations.

    Args:
        capacity: Number of most recent values kept (>= 1).

    """

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError(f"capacity={capacity}: must be >= 1")
        self._capacity = capacity
        self._fifo: deque[float] = deque()
        self._sorted: list[float] = []

    def __len__(self) -> int:
        return len(self._sorted)

    @property
    def capacity(self) -> int:
        """Number of most recent values kept."""
        return self._capacity

    def push(self, value: float) -> None:
        """Add ``value``; the oldest value leaves when the history is full."""
        if len(self._fifo) == self._capacity:
            oldest = self._fifo.popleft()
            del self._sorted[bisect.bisect_left(self._sorted, oldest)]
        self._fifo.append(value)
        bisect.insort(self._sorted, value)

    def clear(self) -> None:
        """Forget every value."""
        self._fifo.clear()
        self._sorted.clear()

    def median(self) -> float:
        """Median of the held values (mean of the two middle ones for an even count)."""
        n = len(self._sorted)
        if n == 0:
            return math.nan
        s = self._sorted
        if n % 2:
            return s[n // 2]
        return 0.5 * (s[n // 2 - 1] + s[n // 2])

    def mad(self, median: float | None = None) -> float:
        """Median absolute deviation from the median (unscaled).

        Args:
            median: The current median when the caller has it already.
        """
        n = len(self._sorted)
        if n == 0:
            return math.nan
        m = self.median() if median is None else median
        s = self._sorted
        split = bisect.bisect_left(s, m)
        # deviations: left run m - s[split-1-i] (i = 0..split-1), right run s[split+j] - m,
        # both ascending. Find the cut taking the `half` smallest of their union.
        n_left, n_right = split, n - split
        half = n // 2 + 1 if n % 2 else n // 2
        lo, hi = max(0, half - n_right), min(half, n_left)
        inf = math.inf
        while True:
            i = (lo + hi) // 2  # i from the left run, half - i from the right run
            j = half - i
            a_left = m - s[split - i] if i > 0 else -inf
            a_right = m - s[split - 1 - i] if i < n_left else inf
            b_left = s[split + j - 1] - m if j > 0 else -inf
            b_right = s[split + j] - m if j < n_right else inf
            if a_left > b_right:
                hi = i - 1
            elif b_left > a_right:
                lo = i + 1
            else:
                break
        largest_taken = max(a_left, b_left)
        if n % 2:
            return largest_taken
        return 0.5 * (largest_taken + min(a_right, b_right))  # the two middle deviations

    def threshold(self, gamma: float) -> float:
        """Tau = median + gamma * 1.4826 * MAD of the held values."""
        m = self.median()
        return m + gamma * MAD_TO_SIGMA * self.mad(m)
