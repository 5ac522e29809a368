"""The home page's picture of the active model: encoder and decoder stacks drawn from its config."""

from __future__ import annotations

import plotly.graph_objects as go

from transformer.i18n import Texts, t

from .common import KIND_COLORS, display_piece, figure

ENC_X, DEC_X, HALF = 25.0, 73.0, 19.5  # column centres and half-width, in a 0..100 drawing space
# px outside the drawing for the stacks' "×2 / encoder / layers" labels (~56 px of 15 px text), beyond the
# drawing's own room beside each stack: in a 1024x768 column (~676 px) the encoder's was cut, and wider
# margins squeeze the boxes' text
LABEL_MARGINS = dict(left=30, right=16)
FFN_COLOR, IO_COLOR, STACK_COLOR = "#6B6B6B", "#F2F2F2", "#FAFAFA"
NORM_TEXT = Texts({"pre": "charts.arch.pre_norm", "post": "charts.arch.post_norm"})
POSITIONS = Texts({"sinusoidal": "charts.arch.sinusoidal", "learned": "charts.arch.learned", "none": "charts.arch.none",
                   "rope": "charts.arch.rope", "alibi": "charts.arch.alibi"})  # what the embedding box adds


def _tint(hex_color: str, alpha: float) -> str:
    r, g, b = (int(hex_color[i:i + 2], 16) for i in (1, 3, 5))
    return f"rgba({r},{g},{b},{alpha})"


class _Drawing:
    """Shapes and annotations collected for one figure (built in one go: see common.figure)."""

    def __init__(self):
        self.shapes: list[dict] = []
        self.annotations: list[dict] = []

    def box(self, cx: float, y0: float, y1: float, text: str, color: str, fill: str | None = None,
            width: float = HALF - 2.5, dash: str | None = None) -> None:
        self.shapes.append(dict(type="rect", x0=cx - width, x1=cx + width, y0=y0, y1=y1, layer="below",
                                line=dict(color=color, width=2, dash=dash), fillcolor=fill or _tint(color, 0.16)))
        self.note(x=cx, y=(y0 + y1) / 2, text=text, font=dict(size=13, color="#111"))

    def arrow(self, x0: float, y0: float, x1: float, y1: float) -> None:
        self.annotations.append(dict(x=x1, y=y1, ax=x0, ay=y0, xref="x", yref="y", axref="x", ayref="y", text="",
                                     showarrow=True, arrowhead=2, arrowsize=1.2, arrowwidth=2, arrowcolor="#333"))

    def note(self, **annotation) -> None:
        self.annotations.append(dict(showarrow=False, **annotation))

    def stack(self, cx: float, y0: float, y1: float, layers: int, label: str, side: int) -> None:
        """The rounded block of one stack, with up to five offset outlines behind it hinting at its depth."""
        for i in range(min(layers, 6) - 1, 0, -1):
            off = 0.9 * i
            self.shapes.append(dict(type="rect", x0=cx - HALF + off, x1=cx + HALF + off, y0=y0 + off, y1=y1 + off,
                                    line=dict(color="#9a9a9a", width=1), fillcolor="white", layer="below"))
        self.shapes.append(dict(type="rect", x0=cx - HALF, x1=cx + HALF, y0=y0, y1=y1, layer="below",
                                line=dict(color="#444", width=2), fillcolor=STACK_COLOR))
        self.note(x=cx + side * (HALF + 2.0), y=(y0 + y1) / 2, text=label,
                  xanchor="left" if side > 0 else "right", font=dict(size=15, color="#222"))


def architecture_diagram(n_enc_layers: int, n_dec_layers: int, n_heads: int, d_model: int, d_ff: int,
                         norm: str = "pre", positional: str = "sinusoidal",
                         title: str | None = None) -> go.Figure:
    """Encoder and decoder stacks with their sublayers, coloured by attention kind as on every other page,
    and the encoder's output (memory) feeding each decoder layer's cross-attention."""
    draw = _Drawing()
    heads = t("charts.arch.heads", n=n_heads, dims=d_model // n_heads)
    ffn = t("charts.arch.ffn", d_model=d_model, d_ff=d_ff)

    sublayers = {
        ENC_X: [(27, 37, t("charts.arch.self", heads=heads), KIND_COLORS["encoder_self"]),
                (43, 53, ffn, FFN_COLOR)],
        DEC_X: [(27, 37, t("charts.arch.masked_self", heads=heads), KIND_COLORS["decoder_self"]),
                (45, 55, t("charts.arch.cross", heads=heads), KIND_COLORS["cross"]),
                (63, 73, ffn, FFN_COLOR)],
    }
    draw.stack(ENC_X, 22, 58, n_enc_layers, t("charts.arch.encoder_layers", n=n_enc_layers), -1)
    draw.stack(DEC_X, 22, 80, n_dec_layers, t("charts.arch.decoder_layers", n=n_dec_layers), 1)
    inputs = (t("charts.arch.source", eos=display_piece("</s>")), t("charts.arch.target", bos=display_piece("<s>")))
    for (cx, boxes), name in zip(sublayers.items(), inputs):
        draw.box(cx, 1, 6, name, "#888", IO_COLOR, dash="dot")
        draw.box(cx, 10.5, 17.5, t("charts.arch.embedding", d_model=d_model, positions=POSITIONS[positional]), "#888",
                 IO_COLOR)
        draw.arrow(cx, 6, cx, 10.5)
        draw.arrow(cx, 17.5, cx, boxes[0][0])
        for y0, y1, text, color in boxes:
            draw.box(cx, y0, y1, text, color)
        for below, above in zip(boxes, boxes[1:]):
            draw.arrow(cx, below[1], cx, above[0])
    draw.box(DEC_X, 88, 96, t("charts.arch.generator"), "#888", IO_COLOR)
    draw.arrow(DEC_X, 73, DEC_X, 88)

    # memory: from the top of the encoder, over and down into every decoder layer's cross-attention
    draw.shapes.append(dict(type="path", path=f"M {ENC_X},53 L {ENC_X},66 L {(ENC_X + DEC_X) / 2},66 "
                                              f"L {(ENC_X + DEC_X) / 2},50",
                            line=dict(color=KIND_COLORS["cross"], width=3)))
    draw.arrow((ENC_X + DEC_X) / 2, 50, DEC_X - HALF + 2.5, 50)
    draw.note(x=(ENC_X + DEC_X) / 2 - 1, y=67, text=t("charts.arch.memory"), xanchor="right", yanchor="bottom",
              font=dict(size=14, color=KIND_COLORS["cross"]))  # clear of the decoder's stack in a narrow column
    draw.note(x=ENC_X - HALF, y=92, font=dict(size=13, color="#555"), align="left", xanchor="left",
              text=f"d_model = {d_model}<br>{NORM_TEXT[norm]}")  # two lines: one reached the output box
    return figure([], title or t("charts.arch.title"), height=640, width=900, **LABEL_MARGINS, showlegend=False,
                  shapes=draw.shapes, annotations=draw.annotations,
                  xaxis=dict(visible=False, range=[-2, 102], fixedrange=True),
                  yaxis=dict(visible=False, range=[-1, 98], fixedrange=True))
