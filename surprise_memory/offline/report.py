"""A report a person can look at: one self-contained HTML page and a PNG of the surprise curve.

Reads what ``surprise-memory process`` left in a store folder (``run.json``, ``scores.csv``
and the episodes) and writes

* ``<name>.png``: s(t) over the recording, tau(t) dashed, each event a red marker and line,
  each suppressed gate candidate (habituation, budget) a grey cross on a dotted line
  (matplotlib, Agg backend, no display needed);
* ``<name>.html``: a page with no external request at all (inline CSS, images as base64
  ``data:`` URIs): a red banner when any model had random (untrained) weights, the run's
  summary, the curve, one row per episode (time, stamp, surprise, tau, pose, and its frames
  as thumbnails), the sentences a caller asked of the store and the episode each ranked
  first (:class:`TextAnswer`; the demo's), a table of the suppressed candidates (time,
  score, reason, habituation level, the event it resembled), then the settings and the
  model names.
"""

from __future__ import annotations

import base64
import html
import io
import json
import math
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from surprise_memory.errors import StoreError
from surprise_memory.memory.episodes import trigger_frame_index
from surprise_memory.offline.run_record import RUN_RECORD, SCORES_CSV, load_run_record, read_scores
from surprise_memory.stamps import NS_PER_SECOND, ns_to_seconds

__all__ = ["THUMB_WIDTH", "TextAnswer", "plot_surprise", "render_html", "write_report"]

THUMB_WIDTH = 144
"""Width in pixels of an episode thumbnail in the page."""

_CSS = """
body { font-family: sans-serif; margin: 24px; color: #222; background: #fff; }
h1 { font-size: 22px; margin: 0 0 8px 0; }
h2 { font-size: 17px; margin: 24px 0 8px 0; border-bottom: 1px solid #ccc; }
.untrained { background: #c62828; color: #fff; font-weight: bold; font-size: 18px;
  padding: 12px 16px; margin: 12px 0; border-radius: 4px; }
table.kv { border-collapse: collapse; font-size: 13px; }
table.kv td, table.kv th { border: 1px solid #ddd; padding: 3px 8px; text-align: left;
  vertical-align: top; }
#surprise-plot { width: 1200px; max-width: 100%; height: auto; border: 1px solid #ddd; }
.episode { margin: 10px 0 14px 0; }
.episode .meta { font-size: 13px; margin-bottom: 4px; }
.frames { display: flex; flex-wrap: wrap; gap: 4px; }
.frames figure { margin: 0; font-size: 11px; color: #555; text-align: center; }
img.thumb { width: 144px; height: auto; display: block; border: 1px solid #999; }
figure.trigger img.thumb { outline: 3px solid #c62828; outline-offset: -3px; }
.muted { color: #777; }
code { font-size: 12px; }
"""


@dataclass(frozen=True)
class TextAnswer:
    """A sentence asked of the store and the episode it ranked first, for the report.

    Attributes:
        text: The sentence.
        episode_id: The first episode (None: no hit).
        verdict: What the caller knows of it (the demo: right or wrong against the
            ground truth); empty when nothing is known.

    """

    text: str
    episode_id: str | None
    verdict: str = ""


def _answers_table(answers: Sequence[TextAnswer], records: Sequence[Any], origin: int) -> str:
    """The sentences and the episode each ranked first (its number in the episode list)."""
    if not answers:
        return ""
    numbered = {rec.id: (n, rec.stamp_ns) for n, rec in enumerate(records, 1)}
    rows = []
    for a in answers:
        if a.episode_id is None or a.episode_id not in numbered:
            first = "no episode"
        else:
            n, stamp = numbered[a.episode_id]
            t = (stamp - origin) / NS_PER_SECOND
            first = f'<a href="#episode-{n}">#{n}</a> t = {t:.2f} s'
        rows.append(
            f"<tr><td>{html.escape(a.text)}</td><td>{first}</td>"
            f"<td>{html.escape(a.verdict)}</td></tr>"
        )
    return (
        '<h2>Asked in words</h2><table id="answers"><tr><th>sentence</th>'
        "<th>first episode</th><th>verdict</th></tr>" + "".join(rows) + "</table>"
    )


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def plot_surprise(
    scores: dict[str, npt.NDArray[Any]],
    events_ns: list[int],
    origin_ns: int,
    *,
    title: str = "",
    untrained: bool = False,
    suppressed: Sequence[tuple[int, str]] = (),
) -> bytes:
    """The surprise curve as PNG bytes: s(t), tau(t) dashed, events in red, suppressed in grey.

    Args:
        scores: Columns of ``scores.csv`` (:func:`surprise_memory.offline.run_record.read_scores`).
        events_ns: Event stamps (int ns).
        origin_ns: Stamp of time zero on the x axis.
        title: Title above the plot.
        untrained: Say "untrained weights" in the title.
        suppressed: (stamp, reason) of gate candidates that did not become events.

    Returns:
        The PNG file's bytes.

    """
    import matplotlib

    matplotlib.use("Agg", force=True)
    from matplotlib.figure import Figure

    fig = Figure(figsize=(12, 3.6), dpi=100)
    ax = fig.add_subplot(1, 1, 1)
    t = (scores["stamp_ns"] - origin_ns) / NS_PER_SECOND
    s = scores["score"]
    if t.size:
        ax.plot(t, s, color="#1f77b4", linewidth=1.2, label="surprise s(t)")
        tau = scores["tau"]
        ok = np.isfinite(tau)
        if ok.any():
            ax.plot(t[ok], tau[ok], color="#ff7f0e", linestyle="--", linewidth=1.5, label="τ(t)")
        stamp_index = {int(v): i for i, v in enumerate(scores["stamp_ns"].tolist())}
        for k, e in enumerate(events_ns):
            x = (e - origin_ns) / NS_PER_SECOND
            ax.axvline(x, color="#d62728", alpha=0.5, linewidth=1.0)
            i = stamp_index.get(int(e))
            y = float(s[i]) if i is not None else float(np.nanmax(s))
            ax.plot([x], [y], "o", color="#d62728", markersize=7, label="event" if k == 0 else "")
        seen: set[str] = set()
        for e, reason in suppressed:
            x = (e - origin_ns) / NS_PER_SECOND
            ax.axvline(x, color="#777777", alpha=0.6, linewidth=1.0, linestyle=":")
            i = stamp_index.get(int(e))
            y = float(s[i]) if i is not None else float(np.nanmax(s))
            label = "" if reason in seen else f"suppressed ({reason})"
            seen.add(reason)
            marker = "x" if reason == "habituation" else "s"
            ax.plot([x], [y], marker, color="#555555", markersize=8, mew=2, label=label)
        ax.legend(loc="upper left", fontsize=9)
    else:
        ax.text(0.5, 0.5, "no scored frame", ha="center", va="center", transform=ax.transAxes)
    ax.set_xlabel("time since the first frame [s]")
    ax.set_ylabel("surprise s(t)")
    ax.grid(True, alpha=0.3)
    label = title + ("  (UNTRAINED weights)" if untrained else "")
    if label:
        ax.set_title(label, color="#c62828" if untrained else "#222")
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return buf.getvalue()


def _thumbnail(path: Path) -> str:
    """A JPEG thumbnail of a stored frame as base64 (empty string when unreadable)."""
    from PIL import Image

    try:
        with Image.open(path) as img:
            rgb = img.convert("RGB")
            if rgb.width > 2 * THUMB_WIDTH:
                height = max(1, round(rgb.height * 2 * THUMB_WIDTH / rgb.width))
                rgb = rgb.resize((2 * THUMB_WIDTH, height))
            buf = io.BytesIO()
            rgb.save(buf, format="JPEG", quality=85)
            return _b64(buf.getvalue())
    except OSError:
        return ""


def _kv_table(rows: list[tuple[str, Any]]) -> str:
    cells = "".join(
        f"<tr><th>{html.escape(str(k))}</th><td>{html.escape(str(v))}</td></tr>" for k, v in rows
    )
    return f'<table class="kv">{cells}</table>'


def _fmt(value: Any, spec: str = ".3f") -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "-"
    return format(value, spec)


def time_origin_ns(store: Any) -> int | None:
    """The time zero of a store's relative times, shared by the report, the CLI and the agent tool.

    The store's persisted origin: the first frame its writer saw (schema 2). A store whose
    origin is unknown (none noted, no episode) falls back to its run record's first frame.

    Args:
        store: An open store of either backend (only a folder store has a run record).

    Returns:
        The origin, int ns; None when neither is known.

    """
    origin = store.origin_ns
    if isinstance(origin, int):
        return origin
    folder = getattr(store, "path", None)  # a database store has no folder nor run record
    if folder is None:
        return None
    run = Path(folder) / RUN_RECORD
    if run.is_file():
        try:
            first = json.loads(run.read_text(encoding="utf-8"))["summary"]["first_stamp_ns"]
        except (OSError, ValueError, KeyError, TypeError):
            return None
        if isinstance(first, int):
            return first
    return None


def _suppressed_table(suppressed: list[dict[str, Any]], origin: int) -> str:
    """The gate candidates that did not become events, apart from the episodes."""
    head = "<h2>Suppressed candidates</h2>"
    if not suppressed:
        return head + '<p class="muted">None: every gate candidate became an event.</p>'
    rows = []
    for item in suppressed:
        similar = item.get("similar_to_ns")
        like = "-" if similar is None else f"{(similar - origin) / NS_PER_SECOND:.2f} s"
        rows.append(
            f'<tr class="suppressed"><td>{(item["stamp_ns"] - origin) / NS_PER_SECOND:.2f} s</td>'
            f"<td>{_fmt(item.get('score'))}</td><td>{_fmt(item.get('threshold'))}</td>"
            f"<td>{html.escape(str(item.get('reason')))}</td>"
            f"<td>{_fmt(item.get('habituation'), '.2f')}</td><td>{like}</td></tr>"
        )
    return (
        head
        + '<table class="kv" id="suppressed"><tr><th>t</th><th>surprise</th><th>τ</th>'
        + "<th>reason</th><th>habituation h</th><th>resembled the event at</th></tr>"
        + "".join(rows)
        + "</table>"
    )


def render_html(
    store_path: str | os.PathLike[str], png: bytes, answers: Sequence[TextAnswer] = ()
) -> str:
    """The report page of a processed store, with the curve ``png`` embedded.

    ``answers``: sentences asked of the store, shown with the episode each ranked first.

    Raises:
        StoreError: The store or its run record cannot be read.

    """
    from surprise_memory.memory.store import EpisodeStore

    root = Path(store_path)
    run = load_run_record(root)
    summary = run.get("summary") or {}
    with EpisodeStore(root, read_only=True) as store:
        known = time_origin_ns(store)
    origin = 0 if known is None else known  # an origin of 0 (a video's start) is kept
    models = run.get("models", {})
    untrained = bool(run.get("untrained"))
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>surprise_memory report: {html.escape(root.name)}</title>",
        f"<style>{_CSS}</style></head><body>",
        "<h1>Surprise-gated episodic memory: run report</h1>",
        f'<div class="muted">store <code>{html.escape(str(root.resolve()))}</code>, '
        f"input <code>{html.escape(str(run.get('input', {}).get('description', '?')))}</code>"
        f", report written {html.escape(time.strftime('%Y-%m-%d %H:%M:%S'))}</div>",
    ]
    if untrained:
        names = [f"{role} {m.get('name')}" for role, m in models.items() if not m.get("pretrained")]
        parts.append(
            '<div class="untrained" id="untrained">UNTRAINED: random weights ('
            + html.escape("; ".join(names))
            + "). Events, scores and retrieval are not meaningful; this run only shows "
            "that the pipeline works.</div>"
        )
    synthetic = [
        f"{role} {m.get('name')}"
        for role, m in models.items()
        if "synthetic-trained-tiny" in str(m.get("name"))
    ]
    if synthetic:
        parts.append(
            '<div class="untrained" id="synthetic">synthetic-trained-tiny ('
            + html.escape("; ".join(synthetic))
            + "): small models trained on synthetic scenes, not the paper's models. "
            "Figures from this run are not V-JEPA-2 or PE-Core results.</div>"
        )
    if run.get("status") != "complete":
        parts.append(
            '<div class="untrained">This run did not finish (status '
            f"{html.escape(str(run.get('status')))}); what is shown is partial.</div>"
        )
    parts.append("<h2>Summary</h2>")
    parts.append(
        _kv_table(
            [
                ("frames", summary.get("frames")),
                ("duration", f"{_fmt(summary.get('duration_s'), '.1f')} s"),
                ("events", summary.get("events")),
                ("episodes stored", summary.get("episodes")),
                ("episodes per minute", _fmt(summary.get("episodes_per_minute"), ".2f")),
                ("suppressed by habituation", summary.get("suppressed_habituation", 0)),
                ("dropped over budget", summary.get("suppressed_budget", 0)),
                (
                    "gate",
                    (run.get("settings") or {}).get("baseline", {}).get("gate_mode", "surprise"),
                ),
                (
                    "fraction of frames stored",
                    f"{_fmt(100 * (summary.get('stored_fraction') or 0.0), '.2f')} %",
                ),
                ("throughput", f"{_fmt(summary.get('throughput_fps'), '.1f')} frames/s"),
                ("poses", run.get("input", {}).get("pose_frames") or "none"),
            ]
        )
    )
    parts.append("<h2>Surprise over time</h2>")
    parts.append(
        f'<img id="surprise-plot" alt="surprise curve" src="data:image/png;base64,{_b64(png)}">'
    )
    parts.append("<h2>Episodes</h2>")
    with EpisodeStore(root, read_only=True) as store:
        ids = store.episode_ids()
        records = sorted((store.get(i) for i in ids), key=lambda r: r.stamp_ns)
    if not records:
        parts.append('<p class="muted">No episode was stored.</p>')
    for n, rec in enumerate(records, 1):
        pose = (
            "x {:.2f} y {:.2f} z {:.2f} m".format(*rec.pose.position)
            + f" in {html.escape(rec.pose.frame_id or '?')}"
            if rec.pose_valid
            else "no pose"
        )
        meta = (
            f"<b>#{n}</b> t = {(rec.stamp_ns - origin) / NS_PER_SECOND:.2f} s "
            f"(stamp {rec.stamp_ns} ns) &nbsp; surprise {rec.surprise:.3f} &nbsp; "
            f"τ {_fmt(rec.threshold)} &nbsp; pose: {pose} &nbsp; "
            f'<span class="muted">{html.escape(rec.id)}</span>'
        )
        figures = []
        trigger = trigger_frame_index(rec.frame_stamps_ns, rec.stamp_ns)
        for i, (path, stamp) in enumerate(zip(rec.frame_files(), rec.frame_stamps_ns, strict=True)):
            data = _thumbnail(path)
            img = (
                f'<img class="thumb" alt="frame" src="data:image/jpeg;base64,{data}">'
                if data
                else '<span class="muted">(missing)</span>'
            )
            caption = f"{ns_to_seconds(stamp - origin):.2f} s"
            if i == trigger:  # the episode's picture, as in every view
                caption = f"<b>{caption}, trigger</b>"
                figures.append(
                    f'<figure class="trigger">{img}<figcaption>{caption}</figcaption></figure>'
                )
            else:
                figures.append(f"<figure>{img}<figcaption>{caption}</figcaption></figure>")
        parts.append(
            f'<div class="episode" id="episode-{n}"><div class="meta">{meta}</div>'
            f'<div class="frames">{"".join(figures)}</div></div>'
        )
    parts.append(_answers_table(answers, records, origin))
    parts.append(_suppressed_table(run.get("suppressed") or [], origin))
    parts.append("<h2>Models</h2>")
    parts.append(
        _kv_table(
            [
                (
                    role,
                    f"{m.get('name')} ({'trained' if m.get('pretrained') else 'UNTRAINED'}), "
                    f"dim {m.get('dim')}, {m.get('device')} {m.get('dtype')}",
                )
                for role, m in models.items()
            ]
        )
    )
    parts.append("<h2>Settings</h2>")
    rows: list[tuple[str, Any]] = []
    for component, values in (run.get("settings") or {}).items():
        rows += [(f"{component}.{k}", v) for k, v in values.items()]
    parts.append(_kv_table(rows))
    versions = run.get("versions") or {}
    parts.append(
        '<p class="muted">'
        + html.escape(", ".join(f"{k} {v}" for k, v in versions.items()))
        + "</p></body></html>"
    )
    return "\n".join(parts)


def write_report(
    store_path: str | os.PathLike[str],
    out: str | os.PathLike[str] | None = None,
    answers: Sequence[TextAnswer] = (),
) -> tuple[Path, Path]:
    """Write the HTML report and the PNG curve of a processed store.

    Args:
        store_path: The store folder written by ``surprise-memory process``.
        out: The HTML file; default ``STORE/report.html``. The PNG goes beside it
            (same name, ``.png``).
        answers: Sentences asked of the store, shown with the episode each ranked first.

    Returns:
        (html path, png path).

    Raises:
        StoreError: The store, its run record or its scores cannot be read, or the
            report cannot be written.

    """
    root = Path(store_path)
    if not root.is_dir():
        raise StoreError(f"store {str(root)!r} does not exist")
    run = load_run_record(root)
    html_path = Path(out) if out is not None else root / "report.html"
    png_path = html_path.with_suffix(".png")
    scores = read_scores(root / run.get("scores_csv", SCORES_CSV))
    from surprise_memory.memory.store import EpisodeStore

    with EpisodeStore(root, read_only=True) as store:
        origin = time_origin_ns(store)
    if origin is None:
        origin = int(scores["stamp_ns"][0]) if scores["stamp_ns"].size else 0
    events = [int(e["stamp_ns"]) for e in run.get("events", [])]
    suppressed = [(int(e["stamp_ns"]), str(e["reason"])) for e in run.get("suppressed", [])]
    name = Path(str(run.get("input", {}).get("path", root))).name
    png = plot_surprise(
        scores,
        events,
        origin,
        title=f"{name}: {len(events)} events"
        + (f", {len(suppressed)} suppressed" if suppressed else ""),
        untrained=bool(run.get("untrained")),
        suppressed=suppressed,
    )
    page = render_html(root, png, answers)
    try:
        html_path.parent.mkdir(parents=True, exist_ok=True)
        png_path.write_bytes(png)
        html_path.write_text(page, encoding="utf-8")
    except OSError as exc:
        raise StoreError(f"cannot write the report {html_path}: {exc}") from exc
    return html_path, png_path
