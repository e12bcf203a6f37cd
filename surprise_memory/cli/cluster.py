"""Options and progress view of the commands that run many tasks: ``process``, ``eval-gebd``.

``--ray [ADDRESS]`` runs the tasks on Ray (:mod:`surprise_memory.offline.ray_runner`):
without ADDRESS on the local cluster, with it on an existing one; ``--workers``,
``--worker-gpus`` and ``--worker-cpus`` size the workers. Without ``--ray`` the tasks run
one after the other in this process and Ray is never imported.

``--ray`` takes an optional value, so ``--ray fleet/`` would read the folder as an
address: :func:`split_ray_value` gives back a value that is not an address (``auto``,
``HOST:PORT``, ``ray://...``) to the inputs.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from surprise_memory.offline.jobs import ProgressSnapshot
    from surprise_memory.offline.ray_runner import ClusterOptions

__all__ = ["add_cluster_options", "cluster_options", "progress_view", "split_ray_value"]

_ADDRESS = re.compile(r"^(auto|ray://\S+|[A-Za-z0-9_.\-]+:\d{1,5})$")
_LOCAL = "local"  # ray_runner.LOCAL, not imported: that module is for the --ray paths only


def add_cluster_options(parser: argparse.ArgumentParser, what: str) -> None:
    """Add ``--ray``, ``--workers``, ``--worker-gpus``, ``--worker-cpus`` to a command.

    Args:
        parser: The subcommand's parser.
        what: What one task is, for the help (``recording``, ``shard of videos``).

    """
    g = parser.add_argument_group(
        "Ray cluster",
        f"Run one task per {what} on Ray (pip install -r requirements/ray.txt); each worker "
        "loads the models once. Without --ray the tasks run here, one after the other.",
    )
    g.add_argument(
        "--ray",
        nargs="?",
        const=_LOCAL,
        metavar="ADDRESS",
        help="run on Ray: the local cluster (the one `ray start` left on this machine, or a "
        "new one for this job), or the cluster at ADDRESS (auto, HOST:PORT, ray://HOST:PORT)",
    )
    g.add_argument(
        "--workers", type=int, metavar="N", help="workers (default: as many as the cluster holds)"
    )
    g.add_argument(
        "--worker-gpus",
        type=float,
        metavar="G",
        help="GPUs per worker, fractional to share one (default: 1 when the cluster has GPUs "
        "and the device is not cpu, else 0)",
    )
    g.add_argument(
        "--worker-cpus", type=float, default=1.0, metavar="C", help="CPUs (threads) per worker"
    )


def split_ray_value(value: str | None) -> tuple[str | None, str | None]:
    """``(ray address or None, an input that --ray swallowed or None)``.

    ``--ray`` without a value gives the local cluster; a value that is an address, or does
    not exist as a path, is the address; an existing path is an input.
    """
    if value is None or value == _LOCAL:
        return value, None
    if _ADDRESS.match(value) and not Path(value).exists():
        return value, None
    return _LOCAL, value


def cluster_options(args: argparse.Namespace) -> ClusterOptions | None:
    """The Ray options given, None without ``--ray`` (Ray is then not imported).

    Raises:
        ConfigError: A count is out of range.

    """
    if args.ray is None:
        return None
    from surprise_memory.offline.ray_runner import ClusterOptions

    return ClusterOptions(
        address=args.ray, workers=args.workers, gpus=args.worker_gpus, cpus=args.worker_cpus
    )


def progress_view(
    total: int | None, unit: str, noun: str, enabled: bool
) -> tuple[Callable[[ProgressSnapshot], None] | None, Callable[[], None]]:
    """A progress bar over a job: units with rate and ETA, tasks done and failed beside.

    Args:
        total: Units of the whole job, None when unknown.
        unit: The unit (``frame``, ``video``).
        noun: The tasks (``recordings``, ``shards``).
        enabled: False = no bar.

    Returns:
        The listener for :class:`~surprise_memory.offline.jobs.JobProgress` and a closer.

    """
    if not enabled:
        return None, lambda: None
    from tqdm import tqdm  # type: ignore[import-untyped]

    bar: Any = tqdm(total=total, unit=unit, desc="job", file=sys.stderr)

    def listen(snap: ProgressSnapshot) -> None:
        bar.set_postfix_str(
            f"{snap.done}/{snap.tasks} {noun}" + (f", {snap.failed} failed" if snap.failed else ""),
            refresh=False,
        )
        bar.update(snap.units - bar.n)

    return listen, bar.close
