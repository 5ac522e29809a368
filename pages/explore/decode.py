"""Step-by-step decoding: type an input, step through greedy decoding, see each step's choice and attention,
force a different token, compare greedy with beam search, and sample with temperature, top-k and top-p."""

from __future__ import annotations

import html
from typing import NamedTuple

import plotly.graph_objects as go
import streamlit as st
from streamlit.delta_generator import DeltaGenerator

from ui import decodes, knockout, step_player
from ui.animations import decode_animation
from ui import model_registry as registry
from ui.code_links import code_link
from ui.display import csv_download, export_format, fitted_row, label_width, presenter_sized
from ui.failure import callback, fragment
from ui.markdown import code, literal
from ui.state import View
from ui.sidebar import presenting
from ui.step_player import CHIP, CHIP_STYLES, FORCED_RING
from ui.tables.decode import DECODE
from ui.panels.decode_search import beam_panel, sampling_panel
from ui.widgets import (
    expected, finish, header, input_picker, require_model, token_text, verdict, warn_if_longer_than_trained,
)
from transformer.charts.animation import STEP_KINDS, decode_step_spec
from transformer.charts import TOPK_SCALES, token_labels, topk_spec
from transformer.charts.common import display_piece, probability_text
from transformer.network.decoding import DecodeError, DecodeResult
from transformer.charts.export import chart_filename
from transformer.network.special_tokens import BOS, EOS, PAD, UNK
from transformer.network.tokenizers import TokenizerError
from transformer.i18n import Texts, language, t

CHANNEL = "decode"  # the step player's channel: its charts follow it


class Chip(NamedTuple):
    piece: str
    style: str  # a key of CHIP_STYLES
    tip: str  # hover text
    forced: bool = False


def chips(items: list[Chip]) -> str:
    """HTML for a row of token chips; forced tokens get a ring and a ⚑."""
    out = []
    for chip in items:
        css = CHIP + CHIP_STYLES[chip.style] + (FORCED_RING if chip.forced else "")
        text = ("⚑ " if chip.forced else "") + display_piece(chip.piece)
        out.append(f'<span style="{css}" title="{html.escape(chip.tip)}">{text}</span>')
    return "".join(out)


def step_chip(step, style: str) -> Chip:
    return Chip(step.piece, style, t("decode.chip_forced" if step.forced else "decode.chip", n=step.index + 1),
                step.forced)


def html_code(piece: str) -> str:
    """A token in an HTML code span, escaped."""
    return f"<code>{html.escape(token_text(piece))}</code>"


def intro() -> DeltaGenerator:
    notes = header(t("app.page.decode"))
    st.markdown(t("decode.intro"))
    greedy, attention = st.columns(2)  # side by side on a wide screen; one line was cut off at 1024 pixels
    greedy.latex(r"y_t = \arg\max_{w}\; P\left(w \mid y_{<t},\, x\right)")
    attention.latex(r"\mathrm{Attention}(Q, K, V) = \mathrm{softmax}\!\left(\frac{QK^{\top}}{\sqrt{d_k}}\right) V")
    return notes


def step_sentence(result: DecodeResult, index: int) -> str:
    """Step `index`'s choice as HTML: the model's, or the token forced there against the model's own."""
    step = result.steps[index]
    if step.forced:
        own = step.topk[0]
        line = t("decode.sentence.forced", n=index + 1, token=html_code(step.piece), prob=probability_text(step.prob),
                 own=html_code(own.piece), own_prob=probability_text(own.prob))
        if not any(c.id == step.token for c in step.topk):
            line += t("decode.sentence.not_topk", k=len(step.topk))
        return line
    return t("decode.sentence.chosen", n=index + 1, token=html_code(step.piece), prob=probability_text(step.prob))


def player_steps(result: DecodeResult) -> list[dict]:
    """Per step: the decoder chip it writes, the caption under the strips and the choice sentence."""
    return [{"chip": step_player.chip(token_text(step.piece), step_chip(step, "plain").tip, step.forced),
             "caption": t("decode.caption", n=i + 1, bos=html_code("<s>")),
             "sentence": step_sentence(result, i)} for i, step in enumerate(result.steps)]


def step_controls(view: View, decode: str, result: DecodeResult, index: int) -> None:
    """The player: first / previous / slider / next / last (and the arrow keys), the source and decoder strips
    and the step's choice, drawn in the browser for every step; a move reaches the `step` prop (1-based)."""
    source = [step_player.chip(token_text(p), t("decode.source_position", n=i))
              for i, p in enumerate(result.source_pieces)]
    first = step_player.chip(token_text(result.prefix_pieces[0]), t("decode.start_position"))
    step_player.player("decode_player", CHANNEL, decode, index, (t("decode.source"), t("decode.decoder")), source,
                       first, player_steps(result), on_step=lambda step: view.set("step", step + 1))


def force(view: View, index: int, token: int, model_choice: int) -> None:
    """Emit `token` at step `index` (0-based) and decode on from it; later forcings no longer apply. Choosing the
    token the model itself would pick there removes the forcing at that step."""
    kept = {s: tok for s, tok in view.get("force") if s < index + 1}
    if token != model_choice:
        kept[index + 1] = token
    view.set("force", tuple(sorted(kept.items())))
    view.set("step", index + 1)


def force_panel(view: View, tokenizer, result: DecodeResult, index: int) -> None:
    """Pick any token (sorted by this step's probability) and decode on from it."""
    step = result.steps[index]
    probs = step.log_probs.exp()
    order = [i for i in probs.argsort(descending=True).tolist() if i not in (PAD, BOS, UNK)]
    model_choice = step.topk[0].id
    default = next(n for n, i in enumerate(order) if i != model_choice)
    labels = {i: f"{token_text(tokenizer.piece(i))}  ·  {probability_text(float(probs[i]))}" for i in order}
    with st.container(border=True):
        st.markdown(t("decode.force.title", n=index + 1))
        pick = st.selectbox(t("decode.force.token"), order, index=default, format_func=labels.get,
                            key=f"decode_force_pick_{index}")
        st.button(t("decode.force.button"), icon=":material/call_split:", key="decode_force_it", type="primary",
                  on_click=callback(force), args=(view, index, pick, model_choice))


def output_chips(result: DecodeResult, other: DecodeResult) -> str:
    """Chips of the output tokens, shading those that differ from `other`'s at the same step."""
    theirs = other.output_ids
    return chips([step_chip(step, "differs" if i >= len(theirs) or theirs[i] != step.token else "plain")
                  for i, step in enumerate(result.steps)])


def output_line(name: str, result: DecodeResult, answer: str | None) -> str:
    cut = "" if result.finished else t("decode.cut")
    return t("decode.output_line", name=name, output=code(result.output_text or t("decode.empty")),
             verdict=verdict(result.output_text, answer)) + cut


def recovery(result: DecodeResult, answer_ids: list[int]) -> str | None:
    """Whether the tokens after the last forced step are the answer's tokens there, as a sentence (None when the
    answer has no tokens after it)."""
    last = max(step.index for step in result.steps if step.forced)
    later, due = result.output_ids[last + 1:], answer_ids[last + 1:]
    if not due:
        return None
    wrong = sum(a != b for a, b in zip(later, due)) + abs(len(later) - len(due))
    if not wrong:
        return t("decode.recovered", n=last + 1)
    return t("decode.not_recovered", n=last + 1, wrong=wrong, due=len(due))


def outcome(view: View, tokenizer, result: DecodeResult, greedy: DecodeResult, answer: str | None, why: str) -> None:
    """The finished output against the expected answer; with forcing, greedy and forced one above the other,
    the tokens where they differ shaded, and whether the model recovered after the forced token."""
    if not any(step.forced for step in result.steps):
        st.markdown(output_line(t("decode.output"), greedy, answer))
    else:
        for name, mine, other in ((t("decode.greedy"), greedy, result), (t("decode.with_forcing"), result, greedy)):
            st.markdown(output_line(name, mine, answer))
            st.markdown(output_chips(mine, other), unsafe_allow_html=True)
        forced_at = ", ".join(str(s.index + 1) for s in result.steps if s.forced)
        st.caption(t("decode.forced_at", steps=forced_at))
        if answer is not None and (said := recovery(result, tokenizer.encode(answer) + [EOS])) is not None:
            st.markdown(said)
        st.button(t("decode.reset"), icon=":material/restart_alt:", key="decode_reset",
                  on_click=callback(view.set), args=("force", ()))
    if answer is not None:
        st.markdown(t("decode.expected", answer=code(answer)))
    else:
        st.caption(t("decode.no_expected", why=why))


SCALE_TITLES = Texts({"probability": "decode.scale.probability", "log-probability": "decode.scale.log_probability",
                      "logit": "decode.scale.logit"})  # a chart's title, "Next-token probabilities · step 3"
SCALE_NOTES = {"log-probability": "decode.scale.log_probability_note", "logit": "decode.scale.logit_note"}


def topk_values(source: decodes.Source, result: DecodeResult, scale: str) -> list[list[float]]:
    """Every step's top-k candidates' values on `scale`, as the model computed them."""
    if scale == "probability":
        return [[c.prob for c in step.topk] for step in result.steps]
    if scale == "log-probability":
        return [step.log_probs[[c.id for c in step.topk]].tolist() for step in result.steps]
    logits = source.logits(tuple(result.output_ids))
    return [logits[i, [c.id for c in step.topk]].tolist() for i, step in enumerate(result.steps)]


def step_figures(decode: str, source: decodes.Source, result: DecodeResult, kind: str, scale: str, presenter: bool
                 ) -> list[dict]:
    """Every step's chart of `kind` ("topk" on `scale`, "cross", "decoder_self") as the player's charts take
    them, enlarged for presenter mode; built once per decode (named by `decode`) and settings (decodes cache)."""
    def build() -> list[dict]:
        if kind == "topk":
            specs = [topk_spec([c.piece for c in step.topk], values, chosen=step.piece,
                               title=t("decode.topk_title", scale=SCALE_TITLES[scale], n=i + 1), scale=scale)
                     for i, (step, values) in enumerate(zip(result.steps, topk_values(source, result, scale)))]
        else:
            specs = [decode_step_spec(result, i, kind) for i in range(len(result.steps))]
        return [step_player.figure_json(presenter_sized(go.Figure(s)) if presenter else s) for s in specs]

    return decodes.memo("step_figures", lambda *_: build(), language(), decode, kind, scale, presenter)


def step_chart(decode: str, source: decodes.Source, bundle, result: DecodeResult, kind: str, scale: str = "probability"
               ) -> None:
    """The player's chart of `kind`: every step's figure, the one shown following the player."""
    task, steps = bundle.task.name, range(len(result.steps))
    step_player.chart(f"decode_chart_{kind}", CHANNEL, decode, kind,
                      step_figures(decode, source, result, kind, scale, presenting()),
                      [chart_filename(task, kind, step=i) for i in steps],
                      export_format(), look=(scale, presenting()))


def topk_chart(view: View, decode: str, source: decodes.Source, bundle, result: DecodeResult) -> None:
    """The top-k next-token bars of the step shown, on the chosen scale, the chosen token highlighted."""
    scale = view.widget("scale", st.segmented_control, t("decode.show"), tuple(TOPK_SCALES), required=True,
                        format_func=lambda name: t(TOPK_SCALES[name][1]))
    step_chart(decode, source, bundle, result, "topk", scale)
    if scale in SCALE_NOTES:
        st.caption(t(SCALE_NOTES[scale]))
    code_link("generator", text=source.text)


def attention_charts(decode: str, source: decodes.Source, bundle, result: DecodeResult, index: int) -> None:
    """Cross- and decoder self-attention of the step shown, every layer and head as a row, and the numbers of
    step `index` (the server's step: they follow a move once the server has heard of it). Side by side where both
    fit with every token labelled, else one above the other (a 1024-pixel projector with the sidebar open)."""
    step, task = result.steps[index], bundle.task.name
    keys = {"cross": result.source_pieces, "decoder_self": result.prefix_pieces[: index + 1]}
    rows = {"cross": step.cross_attention, "decoder_self": step.self_attention}
    widths = [max(map(label_width, step_figures(decode, source, result, kind, "probability", presenting())))
              for kind in STEP_KINDS]  # the widest step's
    for box, kind in zip(fitted_row("decode_attention", widths), STEP_KINDS):
        with box:
            step_chart(decode, source, bundle, result, kind)
            weights = rows[kind].numpy()
            layers, heads, _ = weights.shape
            csv_download(weights.reshape(layers * heads, -1),
                         [f"L{i + 1} H{h + 1}" for i in range(layers) for h in range(heads)],
                         token_labels(keys[kind]), chart_filename(task, kind, step=index), key=f"decode_csv_{kind}",
                         label=t("decode.csv", n=index + 1))
            code_link("attention", text=source.text, kind=kind)


def checked_forcing(view: View, tokenizer) -> dict[int, int]:
    """The forced tokens as {0-based step: token id}; a token the decoder cannot emit drops the forcing."""
    pairs = dict(view.get("force"))
    bad = [tok for tok in pairs.values() if tok in (PAD, BOS, UNK) or not 0 <= tok < tokenizer.vocab_size]
    if bad:
        view.refuse("force", t("decode.link.token", id=bad[0]))
        return {}
    return {s - 1: tok for s, tok in pairs.items() if s >= 1}


def current_step(view: View, n_steps: int) -> int:
    """The 0-based step to show: the one chosen, or the first of a fresh decode."""
    step = view.get("step")
    if step is not None and step > n_steps:
        view.refuse("step", t("decode.link.steps", n=n_steps))
        step = None
    return 0 if step is None else step - 1


@fragment
def stepper(view: View, source: decodes.Source, bundle, greedy: DecodeResult) -> None:
    """Everything that changes with the step or a forced token; a click reruns only this part."""
    forced = checked_forcing(view, bundle.tokenizer)
    result = source.greedy(tuple(sorted(forced.items()))) if forced else greedy
    if any(s >= len(result.steps) for s in forced):
        view.refuse("force", t("decode.link.steps", n=len(result.steps)))
        result = greedy
    index = current_step(view, len(result.steps))
    decode = step_player.version(source, tuple(result.output_ids), tuple(s.index for s in result.steps if s.forced))
    step_controls(view, decode, result, index)
    left, right = st.columns(2, gap="large")  # at 1024x768 a narrower left column cut the scale switch
    with left:
        topk_chart(view, decode, source, bundle, result)
    with right:
        force_panel(view, bundle.tokenizer, result, index)
        outcome(view, bundle.tokenizer, result, greedy, *expected(bundle.task, source.text))
    st.subheader(t("decode.attention"))
    st.caption(t("decode.attention_caption"))
    attention_charts(decode, source, bundle, result, index)
    decode_animation(bundle, result)
    view.sync_url()


def main() -> None:
    view = DECODE.view()
    notes = intro()
    key, bundle = require_model()
    text = input_picker(view, bundle, help_text=t("decode.input_help", description=bundle.task.description,
                                                 n=bundle.config.max_len - 1))
    knocked, mode = knockout.picked(view, bundle.model)
    source = decodes.Source(key, registry.version(key), text, knocked, mode)
    try:
        greedy = source.greedy()
    except (TokenizerError, DecodeError) as exc:
        if view.from_link("input"):  # a link's input the model cannot read: its first example instead
            view.refuse("input", str(exc))
            st.rerun()
        st.error(t("decode.cannot_decode", error=literal(str(exc))), icon=":material/error:")
        st.caption(t("decode.pick_example"))
        finish(view, notes)
        return
    warn_if_longer_than_trained(bundle.task, text)
    if knocked:
        intact = source.intact().greedy().output_text
        knockout.compare(intact, greedy.output_text, expected(bundle.task, text)[0], len(knocked))
    stepper(view, source, bundle, greedy)
    st.divider()
    beam_panel(view, source, bundle, greedy)
    st.divider()
    sampling_panel(view, source, bundle, greedy)
    finish(view, notes)


main()
