"""The GEBD comparison table: the paper's published figure beside the measured ones.

:data:`PAPER_GEBD_ROW` is the paper's number; :func:`measured_row` turns a
:class:`~surprise_memory.evaluation.protocol.GebdResult` measured here into a row, marked as
measured and with its dataset, weights and detector settings; :func:`format_comparison_table`
prints them together.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from surprise_memory.evaluation.protocol import GebdResult

__all__ = [
    "PAPER_GEBD_ROW",
    "TableRow",
    "format_comparison_table",
    "measured_row",
    "print_comparison_table",
]


@dataclass(frozen=True)
class TableRow:
    """One row of the GEBD comparison table.

    Attributes:
        method: What was run.
        setting: e.g. "online, unsupervised".
        mean_f1: Kinetics-GEBD F1 averaged over the relative distances 0.05 .. 0.50.
        f1_at_05: F1 at relative distance 0.05 when known, else None.
        measured: True for a number measured by this code, False for a published one.
        source: Where a published number comes from, or how a measured one was obtained
            (dataset split, weights, detector settings).

    """

    method: str
    setting: str
    mean_f1: float
    f1_at_05: float | None
    measured: bool
    source: str


PAPER_GEBD_ROW = TableRow(
    method="V-JEPA-2 Bayesian surprise + robust gate",
    setting="online, unsupervised",
    mean_f1=0.833,
    f1_at_05=None,
    measured=False,
    source=(
        'published: "Worth Remembering: Surprise-Gated Robot Episodic Memory", '
        "Kinetics-GEBD val, F1 averaged over rel. dist. 0.05..0.50"
    ),
)
"""The paper's figure. Other published rows are added only with their source named."""


def measured_row(
    result: GebdResult,
    *,
    weights: str,
    mode: Literal["causal", "offline"],
    dataset: str = "Kinetics-GEBD val",
    settings: Mapping[str, Any] | None = None,
) -> TableRow:
    """A table row for a result measured here.

    Args:
        result: The evaluation of our predictions.
        weights: The encoder weights used (hub id or folder; "random init" for the tiny
            preset), printed so that no one mistakes a smoke run for the paper's number.
        mode: ``"causal"`` (the robot's gate) or ``"offline"`` (tau over each video).
        dataset: The annotation file's split.
        settings: Detector settings to print (e.g.
            :attr:`~surprise_memory.evaluation.detector.GebdDetector.settings`).

    """
    detail = ", ".join(f"{k}={v}" for k, v in (settings or {}).items())
    return TableRow(
        method=f"ours: surprise + {'causal gate' if mode == 'causal' else 'offline tau'}",
        setting="online, unsupervised" if mode == "causal" else "offline, unsupervised",
        mean_f1=result.mean_f1,
        f1_at_05=result.f1_at(0.05) if 0.05 in result.thresholds else None,
        measured=True,
        source=(
            f"measured here: {dataset}, {result.evaluated + result.no_prediction} videos, "
            f"weights {weights}" + (f", {detail}" if detail else "")
        ),
    )


def format_comparison_table(
    measured: Sequence[TableRow], published: Sequence[TableRow] = (PAPER_GEBD_ROW,)
) -> str:
    """The comparison table as text: published rows first, then the measured ones.

    Each row is marked ``measured`` or ``published`` and followed by its source line.
    """
    head = f"{'':<10}{'method':<44}{'setting':<24}{'F1@0.05':>8}{'F1 mean':>9}"
    lines = ["Kinetics-GEBD: F1 averaged over relative distance 0.05..0.50", head]
    for row in (*published, *measured):
        at05 = "-" if row.f1_at_05 is None else f"{row.f1_at_05:.3f}"
        tag = "measured" if row.measured else "published"
        lines.append(f"{tag:<10}{row.method[:43]:<44}{row.setting:<24}{at05:>8}{row.mean_f1:>9.3f}")
        lines.append(f"{'':<10}  ({row.source})")
    return "\n".join(lines)


def print_comparison_table(
    measured: Sequence[TableRow], published: Sequence[TableRow] = (PAPER_GEBD_ROW,)
) -> None:
    """Print :func:`format_comparison_table`."""
    print(format_comparison_table(measured, published))
