"""Bayesian surprise of an embedding stream under a sliding diagonal Gaussian.

The paper's predictive model at step t is a diagonal Gaussian fit on the W previous
embeddings z_{t-W} .. z_{t-1}: per-dimension mean mu and population standard deviation
sigma (ddof = 0, floored at eps). The new embedding z_t is scored against it *before* it
enters the window::

    s(t)  = (1/D) * sum_d |z_t[d] - mu[d]| / sigma[d]            (l1 surrogate)
    KL(t) = 1/(2 W^2) * sum_d (z_t[d] - mu[d])^2 / sigma[d]^2     (KL to leading order)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from surprise_memory.config import ScorerConfig
from surprise_memory.errors import InputError

__all__ = ["SurpriseResult", "SurpriseScorer", "diagonal_gaussian_kl"]


@dataclass(frozen=True)
class SurpriseResult:
    """The surprise of one embedding: ``score`` = s(t), ``kl`` = KL(t) (see module docstring)."""

    score: float
    kl: float


class SurpriseScorer:
    """Streaming surprise scorer over a sliding window of W embeddings.

    ``update(z)`` costs O(D): the window's per-dimension mean and sum of squared
    deviations are kept as running sums (Welford's update for a value replacing the oldest
    one), in float64. To keep rounding drift bounded over days of frames, the sums are
    recomputed exactly from the held window once every W updates (O(W*D) once per W
    frames, so still O(D) amortised).

    Args:
        window: W, the number of earlier embeddings in the Gaussian (paper: 64).
        eps: Floor of sigma; a constant dimension then scores 0 while it stays constant.

    Raises:
        ConfigError: ``window`` or ``eps`` out of range.

    """

    def __init__(self, window: int = 64, eps: float = 1e-6) -> None:
        self._config = ScorerConfig(window=window, eps=eps)
        self._w = self._config.window
        self._eps = self._config.eps
        self.reset()

    @classmethod
    def from_config(cls, config: ScorerConfig) -> SurpriseScorer:
        """Build a scorer from its config dataclass."""
        return cls(window=config.window, eps=config.eps)

    @property
    def window(self) -> int:
        """W, the number of earlier embeddings in the predictive Gaussian."""
        return self._w

    @property
    def dim(self) -> int | None:
        """D, fixed by the first embedding (None before)."""
        return self._dim

    @property
    def mean(self) -> npt.NDArray[np.float64]:
        """mu, the window's per-dimension mean that the next ``update`` scores against.

        A read-only view (empty before the first embedding); copy it to keep it.
        """
        view: npt.NDArray[np.float64] = self._mean.view()
        view.flags.writeable = False
        return view

    @property
    def ready(self) -> bool:
        """True once W embeddings are held, i.e. the next ``update`` returns a result."""
        return self._count >= self._w

    def reset(self) -> None:
        """Forget every embedding, including the dimension."""
        self._dim: int | None = None
        self._buffer = np.zeros((0, 0))
        self._count = 0
        self._head = 0
        self._mean = np.zeros(0)
        self._m2 = np.zeros(0)
        self._inv_std = np.zeros(0)
        self._slides_since_refresh = 0

    def update(self, z: npt.ArrayLike) -> SurpriseResult | None:
        """Score ``z`` against the window, then add it to the window.

        Args:
            z: One embedding, a 1-D array of D finite numbers (D fixed by the first call).

        Returns:
            None while fewer than W earlier embeddings are held, else the surprise of ``z``.

        Raises:
            InputError: ``z`` is not 1-D, has the wrong length, or holds NaN/inf. The
                scorer's state is unchanged, so the caller may skip ``z`` and go on.

        """
        x = self._check_shape(z)
        if self._count < self._w:
            self._check_finite(x)
            self._add_warmup(x)
            return None
        d = x - self._mean
        u = d * self._inv_std
        kl = float(np.dot(u, u)) / (2.0 * self._w * self._w)
        if not np.isfinite(kl):  # NaN/inf in z propagate here: one check instead of a scan
            self._check_finite(x)
            raise InputError(f"embedding values overflow the surprise (KL = {kl})")
        score = float(np.abs(u, out=u).sum()) / u.size  # .mean() costs 4x more here
        self._slide(x, d)
        return SurpriseResult(score=score, kl=kl)

    def _check_shape(self, z: npt.ArrayLike) -> npt.NDArray[np.float64]:
        x = np.asarray(z, dtype=np.float64)
        if x.ndim != 1 or x.size == 0:
            raise InputError(f"embedding must be a non-empty 1-D array, got shape {x.shape}")
        if self._dim is None:
            self._dim = int(x.size)
            self._buffer = np.zeros((self._w, self._dim))
            self._mean = np.zeros(self._dim)
            self._m2 = np.zeros(self._dim)
        elif x.size != self._dim:
            raise InputError(f"embedding has {x.size} dimensions, the stream has {self._dim}")
        return x

    @staticmethod
    def _check_finite(x: npt.NDArray[np.float64]) -> None:
        if not np.isfinite(x).all():
            bad = int(np.count_nonzero(~np.isfinite(x)))
            raise InputError(f"embedding holds {bad} NaN/inf value(s) of {x.size}")

    def _add_warmup(self, x: npt.NDArray[np.float64]) -> None:
        self._buffer[self._count] = x
        self._count += 1
        delta = x - self._mean
        self._mean += delta / self._count
        self._m2 += delta * (x - self._mean)
        if self._count == self._w:
            self._refresh()

    def _slide(self, x: npt.NDArray[np.float64], d: npt.NDArray[np.float64]) -> None:
        """Replace the oldest embedding by x (d = x - mean) in O(D)."""
        slot = self._buffer[self._head]
        diff = x - slot
        slot[:] = x
        self._head = (self._head + 1) % self._w
        # Welford for a replaced value: m2 += diff * ((x - new_mean) + (old - mean)),
        # where x - new_mean = d - diff/W and old - mean = d - diff
        t = diff * (1.0 + 1.0 / self._w)
        np.subtract(2.0 * d, t, out=t)
        t *= diff
        self._m2 += t  # may dip below 0 by rounding: the eps^2 floor below covers it
        diff *= 1.0 / self._w
        self._mean += diff
        self._slides_since_refresh += 1
        if self._slides_since_refresh >= self._w:
            self._refresh()
        else:
            self._update_inv_std()

    def _update_inv_std(self) -> None:
        var = self._m2 * (1.0 / self._w)
        np.maximum(var, self._eps * self._eps, out=var)  # sigma floored at eps
        np.sqrt(var, out=var)
        self._inv_std = np.reciprocal(var, out=var)

    def _refresh(self) -> None:
        """Recompute the window's sums exactly from the held embeddings (bounds drift)."""
        self._mean = self._buffer.mean(axis=0)
        self._m2 = ((self._buffer - self._mean) ** 2).sum(axis=0)
        self._slides_since_refresh = 0
        self._update_inv_std()


def diagonal_gaussian_kl(
    mu_p: npt.ArrayLike,
    sigma_p: npt.ArrayLike,
    mu_q: npt.ArrayLike,
    sigma_q: npt.ArrayLike,
) -> float:
    """Exact KL(p || q) between two diagonal Gaussians, in nats.

    KL = sum_d [ ln(sigma_q/sigma_p) + (sigma_p^2 + (mu_p - mu_q)^2) / (2 sigma_q^2) - 1/2 ]
    """
    mp, sp = np.asarray(mu_p, np.float64), np.asarray(sigma_p, np.float64)
    mq, sq = np.asarray(mu_q, np.float64), np.asarray(sigma_q, np.float64)
    return float(np.sum(np.log(sq / sp) + (sp**2 + (mp - mq) ** 2) / (2.0 * sq**2) - 0.5))
