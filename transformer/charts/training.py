"""The Train page's live curves and texts, built from a training job's snapshot and its probe results: the
held-out curves, the probe's labels and export names, and the progress line. Pure functions (no streamlit);
benchmarks/app_train.py builds the same figures to measure what a live view costs. (The probe's cross-attention
is drawn by ui/display.py's cross_figure, the one every page uses for a decode's cross-attention.)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import plotly.graph_objects as go

from transformer.i18n import t

from .export import chart_filename
from .common import read_labels, token_labels
from .stats import training_curves

if TYPE_CHECKING:  # only for the annotations: these modules load torch, the figures never need it
    from transformer.runs.job import JobSnapshot
    from transformer.runs.probe import ProbeResult

CURVE_POINTS = 200  # most history rows a live curve sends per refresh
LONG_RUN = 1_000  # steps: a longer run's step axis grows with its curves instead of spanning the whole run
STEP_MARK = "#009E73"  # the line marking the probe's step on the curves (none of the curves' colours)


def curves_figure(snapshot: JobSnapshot, task_name: str) -> go.Figure:
    """Held-out loss, token accuracy and exact match against the step, beside the training batch's loss and token
    accuracy (at most CURVE_POINTS points), on a step axis to `step_reach`."""
    fig = training_curves(snapshot.history, title=t("charts.training_title", task=task_name),
                          max_points=CURVE_POINTS, steps=step_reach(snapshot))
    return fig.update_layout(margin_t=96)  # room for the legend between the title and the plot


def step_reach(snapshot: JobSnapshot) -> int:
    """Where the curves' step axis ends: at the run's length, from its first point on, the curves growing into it;
    for a run of more than LONG_RUN steps, at twice the step reached, rounded up to 1, 2 or 5 times a power of ten
    (on the whole length, the first minutes of curves were a sliver at the left edge); and once the run has ended,
    at its last step (one that stopped early, far short of its length, kept that sliver for good)."""
    if snapshot.ended and snapshot.step:
        return snapshot.step
    if snapshot.max_steps <= LONG_RUN or not snapshot.step:
        return snapshot.max_steps
    return min(snapshot.max_steps, round_up(2 * snapshot.step))


def round_up(n: int) -> int:
    """The least of 1, 2, 5, 10, 20, 50, ... that is at least `n` (n >= 1)."""
    power = 10 ** (len(str(n)) - 1)
    return next(m * power for m in (1, 2, 5, 10) if m * power >= n)


def mark_step(fig: go.Figure, step: int) -> go.Figure:
    """A copy of the training curves `fig` with a vertical dotted line at `step` across both panels, labelled
    at the top (the step whose probe attention is shown beside them)."""
    marked = go.Figure(fig)
    for x, y in (("x", "y"), ("x2", "y2")):  # one line per panel
        marked.add_shape(type="line", xref=x, yref=f"{y} domain", x0=step, x1=step, y0=0, y1=1,
                         line=dict(color=STEP_MARK, width=2, dash="dot"))
    span = fig.layout.xaxis2.range  # the run's length, when the axis has it: past its middle the label goes left
    right = span is not None and step > span[1] / 2
    marked.add_annotation(x=step, xref="x", y=1, yref="y domain", yanchor="top", xanchor="right" if right else "left",
                          xshift=-3 if right else 3,
                          showarrow=False, text=t("charts.probe_step", step=step), font=dict(color=STEP_MARK, size=13),
                          bgcolor="rgba(255,255,255,0.85)")
    return marked


def probe_labels(result: ProbeResult) -> tuple[list[str], list[str]]:
    """(query labels: the tokens read, key labels: the source tokens) for the probe's cross-attention."""
    return read_labels(list(result.output_pieces)), token_labels(result.source_pieces)


def probe_filename(task_name: str, step: int, layer: int, head: int | None) -> str:
    """e.g. reverse_cross_L1H3_train0250, or reverse_cross_L1_train0250 for all heads."""
    return f"{chart_filename(task_name, 'cross', layer, head)}_train{step:04d}"


def format_seconds(seconds: float) -> str:
    """"42 s", or "3 min 05 s" from 90 seconds on."""
    seconds = round(seconds)
    return t("charts.seconds", s=seconds) if seconds < 90 else t("charts.minutes", m=seconds // 60, s=seconds % 60)


def progress(snapshot: JobSnapshot, target: float | None) -> tuple[float, str]:
    """Progress bar fraction and its text: steps, steps/s and the time left at the current rate (or, once the
    job is not running, how long it trained)."""
    done = min(snapshot.step / snapshot.max_steps, 1.0)
    text = t("charts.progress.step", step=snapshot.step, steps=snapshot.max_steps)
    if (left := snapshot.seconds_left()) is not None:
        text += t("charts.progress.rate", rate=snapshot.steps_per_s, left=format_seconds(left))
        if target is not None:
            text += t("charts.progress.target", target=target)
    else:
        text += t("charts.progress.trained", time=format_seconds(snapshot.elapsed))
    return done, text
