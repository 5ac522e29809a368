"""The distributions of one sampling step side by side: the model's own, after temperature, after top-k/top-p."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from transformer.i18n import Texts, t

from .common import CATEGORY_AXIS, EXTRA, HIGHLIGHT, check_labels, display_piece, figure, probability_text

# stage -> bar colour (Okabe-Ito): the model's own distribution, after temperature, after the filters
STAGE_COLORS = {"model": "#9a9a9a", "tempered": "#56B4E9", "filtered": "#0072B2"}
STAGES = Texts({"model": "charts.sampling.model", "tempered": "charts.sampling.tempered",
                "filtered": "charts.sampling.filtered"})  # each stage's name in the legend


def sampling_bars(pieces: list[str], stages: dict[str, np.ndarray], drawn: str | None = None,
                  title: str | None = None) -> go.Figure:
    """Grouped horizontal bars, one group per token (in the given order from the top) and one bar per stage
    (`stages`: stage -> probabilities of `pieces`, in STAGE_COLORS order when named so; a stage of another name
    is shown by that name). The drawn token's bars are outlined; each reads its share (`probability_text`: a token the
    filters dropped "0")."""
    if not stages:
        raise ValueError("at least one stage of probabilities is needed")
    traces = []
    for name, values in stages.items():
        p = np.asarray(values, dtype=np.float64)
        if p.ndim != 1:
            raise ValueError(f"{name} must be one probability per token, got shape {p.shape}")
        check_labels(pieces, len(p), "pieces")
        outline = [3 if piece == drawn else 0 for piece in pieces]
        label = STAGES.get(name, name)
        traces.append(go.Bar(
            x=p, y=[display_piece(piece) for piece in pieces], orientation="h", name=label,
            marker=dict(color=STAGE_COLORS.get(name, HIGHLIGHT), line=dict(color="#222", width=outline)),
            text=[probability_text(v) for v in p], textposition="outside",
            cliponaxis=False, textfont=dict(size=11),
            hovertemplate=t("charts.hover.token_share", name=label) + EXTRA,
        ))
    return figure(traces, title or t("charts.sampling.title"), height=17 * len(pieces) * len(stages) + 170, top=92,
                  barmode="group",
                  legend=dict(orientation="h", y=1.0, yanchor="bottom", x=0),
                  xaxis=dict(range=[0, 1.18], tickformat=".0%", title=dict(text=t("charts.topk.probability")),
                             gridcolor="#eee"),
                  yaxis=dict(CATEGORY_AXIS, autorange="reversed", tickfont=dict(size=15)))


def tokens_that_matter(stages: dict[str, np.ndarray], drawn: int, most: int = 6, least: float = 0.01) -> list[int]:
    """The ids worth a bar: the tokens holding at least `least` of the probability in some stage, the likeliest
    first (at most `most`; the likeliest one if none does), and the `drawn` one. The rest are summed in one bar."""
    share = np.max(np.stack([np.asarray(p, dtype=np.float64) for p in stages.values()]), axis=0)
    order = np.argsort(-share, kind="stable")
    ids = [int(i) for i in order[:most] if share[i] >= least] or [int(order[0])]
    return ids if drawn in ids else [*ids, drawn]
