"""Step-by-step decoding: type an input, step through greedy decoding, see each step's choice and attention,
force a different token, compare greedy with beam search, and sample with temperature, top-k and top-p."""

from __future__ import annotations

import html
import math
from typing import NamedTuple

import plotly.graph_objects as go
import streamlit as st
from streamlit.delta_generator import DeltaGenerator

from ui import decodes, knockout, step_player
from ui.animations import decode_animation
from ui import model_registry as registry
from ui.display import csv_download, fitted_row, label_width, presenter_sized, show_figure
from ui.markdown import code, literal
from ui.state import View
from ui.sidebar import EXPORT_FORMAT, presenting
from ui.step_player import CHIP, CHIP_STYLES, FORCED_RING
from ui.tables.decode import BEAM_WIDTHS, DECODE, SAMPLES
from ui.widgets import finish, header, input_picker, require_model, verdict, warn_if_longer_than_trained
from transformer.animation import STEP_KINDS, decode_step_spec
from transformer.charts import TOPK_SCALES, sampling_bars, token_labels, topk_spec
from transformer.charts.common import display_piece
from transformer.decoding import DecodeError, DecodeResult
from transformer.export import chart_filename
from transformer.sampling import SampleResult, SampleSettings, samples
from transformer.special_tokens import BOS, PAD, UNK
from transformer.tasks import TaskError
from transformer.tokenizers import TokenizerError

SAMPLES_KEY = "decode_samples_drawn"  # session key: (what they were drawn for, the samples)
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


def step_chip(step, style: str, tip: str) -> Chip:
    return Chip(step.piece, style, f"step {step.index + 1}" + (" (forced)" if step.forced else "") + tip,
                step.forced)


def plain(piece: str) -> str:
    """A token for markdown code spans and widget labels (not HTML): a space shown as ␣."""
    return html.unescape(display_piece(piece))


def html_code(piece: str) -> str:
    """A token in an HTML code span, escaped."""
    return f"<code>{html.escape(plain(piece))}</code>"


def pct(p: float) -> str:
    """A probability as a percentage, small ones in scientific notation so they do not all read 0.0%."""
    return f"{p:.1%}" if p >= 0.001 else f"{p:.1e}"


def intro() -> DeltaGenerator:
    notes = header("Step-by-step decoding")
    st.markdown(
        "The decoder writes its answer one token at a time. At each step it looks back at the source through "
        "**cross-attention** and at the tokens it has already written through masked **self-attention**, "
        "then greedy decoding keeps the most likely next token. Step through a decode below, or force a "
        "different token and watch everything after it change.")
    greedy, attention = st.columns(2)  # side by side on a wide screen; one line was cut off at 1024 pixels
    greedy.latex(r"y_t = \arg\max_{w}\; P\left(w \mid y_{<t},\, x\right)")
    attention.latex(r"\mathrm{Attention}(Q, K, V) = \mathrm{softmax}\!\left(\frac{QK^{\top}}{\sqrt{d_k}}\right) V")
    return notes


def step_sentence(result: DecodeResult, t: int) -> str:
    """Step t's choice as HTML: the model's, or the token forced there against the model's own."""
    step = result.steps[t]
    if step.forced:
        own = step.topk[0]
        line = (f"<b>Step {t + 1}:</b> you forced <b>{html_code(step.piece)}</b> (the model gave it {pct(step.prob)}); "
                f"the model's own choice was {html_code(own.piece)} at {pct(own.prob)}.")
        if not any(c.id == step.token for c in step.topk):
            line += f" It is not among the model's top {len(step.topk)}."
        return line
    return (f"<b>Step {t + 1}:</b> the model chooses <b>{html_code(step.piece)}</b> with probability "
            f"<b>{pct(step.prob)}</b>.")


def player_steps(result: DecodeResult) -> list[dict]:
    """Per step: the decoder chip it writes, the caption under the strips and the choice sentence."""
    return [{"chip": step_player.chip(plain(step.piece), step_chip(step, "plain", "").tip, step.forced),
             "caption": f"At step {t + 1} the decoder reads {html_code('<s>')} and the {t} token(s) before the "
                        "highlighted one; the dashed ones come later. ⚑ marks a token you forced.",
             "sentence": step_sentence(result, t)} for t, step in enumerate(result.steps)]


def step_controls(view: View, decode: str, result: DecodeResult, t: int) -> None:
    """The player: first / previous / slider / next / last (and the arrow keys), the source and decoder strips
    and the step's choice, drawn in the browser for every step; a move reaches the `step` prop (1-based)."""
    source = [step_player.chip(plain(p), f"source position {i}") for i, p in enumerate(result.source_pieces)]
    first = step_player.chip(plain(result.prefix_pieces[0]), "position 0: start of the output")
    step_player.player("decode_player", CHANNEL, decode, t, ("Source (encoder)", "Decoder"), source, first,
                       player_steps(result), on_step=lambda step: view.set("step", step + 1))


def force(view: View, t: int, token: int, model_choice: int) -> None:
    """Emit `token` at step t (0-based) and decode on from it; later forcings no longer apply. Choosing the
    token the model itself would pick there removes the forcing at that step."""
    kept = {s: tok for s, tok in view.get("force") if s < t + 1}
    if token != model_choice:
        kept[t + 1] = token
    view.set("force", tuple(sorted(kept.items())))
    view.set("step", t + 1)


def force_panel(view: View, tokenizer, result: DecodeResult, t: int) -> None:
    """Pick any token (sorted by this step's probability) and decode on from it."""
    step = result.steps[t]
    probs = step.log_probs.exp()
    order = [i for i in probs.argsort(descending=True).tolist() if i not in (PAD, BOS, UNK)]
    model_choice = step.topk[0].id
    default = next(n for n, i in enumerate(order) if i != model_choice)
    labels = {i: f"{plain(tokenizer.piece(i))}  ·  {pct(float(probs[i]))}" for i in order}
    with st.container(border=True):
        st.markdown(f"**Force a different token at step {t + 1}**")
        pick = st.selectbox("Token (most likely first, then the rest of the vocabulary)", order, index=default,
                            format_func=labels.get, key=f"decode_force_pick_{t}")
        st.button("Force it and decode on", icon=":material/call_split:", key="decode_force_it", type="primary",
                  on_click=force, args=(view, t, pick, model_choice))


def output_chips(result: DecodeResult, other: DecodeResult) -> str:
    """Chips of the output tokens, shading those that differ from `other`'s at the same step."""
    theirs = other.output_ids
    return chips([step_chip(step, "differs" if i >= len(theirs) or theirs[i] != step.token else "plain", "")
                  for i, step in enumerate(result.steps)])


def output_line(name: str, result: DecodeResult, answer: str | None) -> str:
    cut = "" if result.finished else " · cut at the length limit (no `</s>`)"
    return f"**{name}:** {code(result.output_text or '(empty)')} {verdict(result.output_text, answer)}{cut}"


def outcome(view: View, result: DecodeResult, greedy: DecodeResult, answer: str | None, why: str) -> None:
    """The finished output against the expected answer; with forcing, greedy and forced one above the other,
    the tokens where they differ shaded."""
    if not any(step.forced for step in result.steps):
        st.markdown(output_line("Output", greedy, answer))
    else:
        for name, mine, other in (("Greedy", greedy, result), ("With forcing", result, greedy)):
            st.markdown(output_line(name, mine, answer))
            st.markdown(output_chips(mine, other), unsafe_allow_html=True)
        forced_at = ", ".join(str(s.index + 1) for s in result.steps if s.forced)
        st.caption(f"You forced step {forced_at}; shaded tokens differ between the two outputs.")
        st.button("Reset to greedy", icon=":material/restart_alt:", key="decode_reset",
                  on_click=view.set, args=("force", ()))
    if answer is not None:
        st.markdown(f"**Expected** (the task's rule): {code(answer)}")
    else:
        st.caption(f"No expected answer for this input: {why}")


SCALE_TITLES = {"probability": "probabilities", "log-probability": "log-probabilities", "logit": "logits"}
SCALE_NOTES = {
    "probability": "",
    "log-probability": "Natural log of each probability: 0 is certain, and each step of 2.3 to the left is ten "
                       "times less likely, so the runners-up that read 0.000 as probabilities are told apart.",
    "logit": "The raw scores before softmax (from one causal pass over this output); softmax turns them into the "
             "probabilities, so only their differences matter.",
}


def topk_values(source: tuple, result: DecodeResult, scale: str) -> list[list[float]]:
    """Every step's top-k candidates' values on `scale`, as the model computed them (`source`: model key,
    version, input, heads knocked out and how)."""
    if scale == "probability":
        return [[c.prob for c in step.topk] for step in result.steps]
    if scale == "log-probability":
        return [step.log_probs[[c.id for c in step.topk]].tolist() for step in result.steps]
    key, version, text, knocked, mode = source
    logits = decodes.logits(key, version, text, tuple(result.output_ids), knocked, mode)
    return [logits[t, [c.id for c in step.topk]].tolist() for t, step in enumerate(result.steps)]


def step_figures(decode: str, source: tuple, result: DecodeResult, kind: str, scale: str, presenter: bool
                 ) -> list[dict]:
    """Every step's chart of `kind` ("topk" on `scale`, "cross", "decoder_self") as the player's charts take
    them, enlarged for presenter mode; built once per decode (named by `decode`) and settings (decodes cache)."""
    def build() -> list[dict]:
        if kind == "topk":
            specs = [topk_spec([c.piece for c in step.topk], values, chosen=step.piece,
                               title=f"Next-token {SCALE_TITLES[scale]} · step {t + 1}", scale=scale)
                     for t, (step, values) in enumerate(zip(result.steps, topk_values(source, result, scale)))]
        else:
            specs = [decode_step_spec(result, t, kind) for t in range(len(result.steps))]
        return [step_player.figure_json(presenter_sized(go.Figure(s)) if presenter else s) for s in specs]

    return decodes.memo("step_figures", lambda *_: build(), decode, kind, scale, presenter)


def step_chart(decode: str, source: tuple, bundle, result: DecodeResult, kind: str, scale: str = "probability"
               ) -> None:
    """The player's chart of `kind`: every step's figure, the one shown following the player."""
    task, steps = bundle.task.name, range(len(result.steps))
    step_player.chart(f"decode_chart_{kind}", CHANNEL, decode, kind,
                      step_figures(decode, source, result, kind, scale, presenting()),
                      [chart_filename(task, kind, step=t) for t in steps],
                      st.session_state.get(EXPORT_FORMAT, "png"), look=(scale, presenting()))


def topk_chart(view: View, decode: str, source: tuple, bundle, result: DecodeResult) -> None:
    """The top-k next-token bars of the step shown, on the chosen scale, the chosen token highlighted."""
    scale = view.widget("scale", st.segmented_control, "Show", tuple(TOPK_SCALES), required=True)
    step_chart(decode, source, bundle, result, "topk", scale)
    if SCALE_NOTES[scale]:
        st.caption(SCALE_NOTES[scale])


def attention_charts(decode: str, source: tuple, bundle, result: DecodeResult, t: int) -> None:
    """Cross- and decoder self-attention of the step shown, every layer and head as a row, and the numbers of
    step t (the server's step: they follow a move once the server has heard of it). Side by side where both fit
    with every token labelled, else one above the other (a 1024-pixel projector with the sidebar open)."""
    step, task = result.steps[t], bundle.task.name
    keys = {"cross": result.source_pieces, "decoder_self": result.prefix_pieces[: t + 1]}
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
                         token_labels(keys[kind]), chart_filename(task, kind, step=t), key=f"decode_csv_{kind}",
                         label=f"Numbers of step {t + 1} (CSV)")


def expected(task, text: str) -> tuple[str | None, str]:
    """(the task's right answer, "") or (None, why there is none)."""
    try:
        return task.target(text), ""
    except TaskError as exc:
        return None, str(exc)


def checked_forcing(view: View, tokenizer) -> dict[int, int]:
    """The forced tokens as {0-based step: token id}; a token the decoder cannot emit drops the forcing."""
    pairs = dict(view.get("force"))
    bad = [tok for tok in pairs.values() if tok in (PAD, BOS, UNK) or not 0 <= tok < tokenizer.vocab_size]
    if bad:
        view.refuse("force", f"token id {bad[0]} is not one this model can write")
        return {}
    return {s - 1: tok for s, tok in pairs.items() if s >= 1}


def current_step(view: View, n_steps: int) -> int:
    """The 0-based step to show: the one chosen, or the middle of a fresh decode."""
    step = view.get("step")
    if step is not None and step > n_steps:
        view.refuse("step", f"this decode has only {n_steps} step(s)")
        step = None
    return n_steps // 2 if step is None else step - 1


@st.fragment
def stepper(view: View, source: tuple, bundle, greedy: DecodeResult) -> None:
    """Everything that changes with the step or a forced token; a click reruns only this part. `source`:
    model key, version, input, heads knocked out and how."""
    key, version, text, knocked, mode = source
    forced = checked_forcing(view, bundle.tokenizer)
    result = decodes.greedy(key, version, text, tuple(sorted(forced.items())), knocked=knocked, mode=mode) \
        if forced else greedy
    if any(s >= len(result.steps) for s in forced):
        view.refuse("force", f"this decode has only {len(result.steps)} step(s)")
        result = greedy
    t = current_step(view, len(result.steps))
    decode = step_player.version(key, version, text, tuple(result.output_ids),
                                 tuple(s.index for s in result.steps if s.forced), knocked, mode)
    step_controls(view, decode, result, t)
    left, right = st.columns(2, gap="large")  # at 1024x768 a narrower left column cut the scale switch
    with left:
        topk_chart(view, decode, source, bundle, result)
    with right:
        force_panel(view, bundle.tokenizer, result, t)
        outcome(view, result, greedy, *expected(bundle.task, text))
    st.subheader("Attention at this step")
    st.caption("Each row is one head (L = decoder layer, H = head); each row sums to 1 over its columns. "
               "Bright cells show where that head looked while choosing this step's token. ← and → step "
               "through the decode too.")
    attention_charts(decode, source, bundle, result, t)
    decode_animation(bundle, result)
    view.sync_url()


@st.fragment
def beam_panel(view: View, source: tuple, bundle, greedy: DecodeResult) -> None:
    key, version, text, knocked, mode = source
    st.subheader("Greedy or beam search?")
    st.markdown("Greedy keeps only the single best token at each step. Beam search keeps the *k* best partial "
                "outputs and returns the finished one with the highest total log-probability "
                r"$\sum_t \log P(y_t \mid y_{<t}, x)$.")
    width = view.widget("beam", st.segmented_control, "Beam width", BEAM_WIDTHS, required=True)
    beam = decodes.beam(key, version, text, width, knocked, mode)
    answer, _ = expected(bundle.task, text)
    left, right = st.columns(2)
    for column, name, output, score in ((left, "Greedy", greedy.output_text, greedy.score),
                                        (right, f"Beam search, width {width}", beam.text, beam.score)):
        with column.container(border=True):
            st.markdown(f"**{name}**")
            st.markdown(f"{code(output or '(empty)')} {verdict(output, answer)}")
            st.markdown(f"total log-probability **{score:.4g}** (probability {pct(math.exp(score))})")
    if beam.text == greedy.output_text:
        st.caption(":material/check: Both find the same output.")
        if not bundle.card.get("under_trained") and BEAM_DEMO in registry.entries():
            st.caption("A well-trained model is so sure of each token that greedy and beam search almost always "
                       "agree. Beam search earns its keep on a model that is still unsure: try the under-trained "
                       "reverse model, whose example inputs include some where only beam search is right.")
            if st.button("Open the under-trained reverse model", icon=":material/swap_horiz:", key="decode_beam_demo"):
                registry.set_active(BEAM_DEMO)
                st.rerun()  # the whole page: this panel is a fragment, and the sidebar shows the model too
    else:
        st.markdown(":orange-badge[:material/compare_arrows: different outputs] beam search found a sequence "
                    f"whose total log-probability differs by {beam.score - greedy.score:+.4g}.")
    view.sync_url()


BEAM_DEMO = "shipped:reverse-early"  # assets/build_beam_demo.py: stopped early, so beam search matters


def sampling_controls(view: View) -> None:
    """Temperature, top-k (empty: off), top-p and seed, each bound to its prop and offering its range."""
    bounds = {name: DECODE.by_name[name].bounds() for name in ("temperature", "top_k", "top_p", "seed")}
    temperature, top_k, top_p, seed = st.columns(4)
    with temperature:
        view.widget("temperature", st.number_input, "Temperature", **bounds["temperature"], step=0.1,
                    format="%.2f", help="Divides the logits before softmax: below 1 sharper, above 1 flatter.")
    with top_k:
        box = view.widget_key("top_k")
        view.widget("top_k", st.number_input, "Top-k", **bounds["top_k"], value=None, step=1,
                    placeholder="off",  # value=None: the box may be emptied (off)
                    on_change=lambda: view.reset("top_k") if st.session_state[box] is None else None,
                    help="Draw only from the k most likely tokens; empty: off.")
    with top_p:
        view.widget("top_p", st.number_input, "Top-p", **bounds["top_p"], step=0.05, format="%.2f",
                    help="Draw only from the smallest set of most likely tokens whose probabilities add up to at "
                         "least p (nucleus sampling); 1: off.")
    with seed:
        view.widget("seed", st.number_input, "Seed", **bounds["seed"], step=1,
                    help=f"The same seed always draws the same tokens; the {SAMPLES} samples use this seed and "
                         "the next ones.")


def sample_step(view: View, drawn: SampleResult) -> int:
    """The 0-based step of the first sample to show (its first by default), with a slider when there are more."""
    n_steps, chosen = len(drawn.steps), view.get("sample_step")
    if chosen is not None and chosen > n_steps:
        view.refuse("sample_step", f"this sample has only {n_steps} step(s)")
        chosen = None
    if n_steps > 1:
        view.widget("sample_step", st.slider, f"Step of the sample with seed {drawn.settings.seed} (of {n_steps})",
                    1, n_steps, to_widget=lambda value: value or 1)
    return (chosen or 1) - 1


def sampling_chart(bundle, drawn: SampleResult, t: int, shown: int = 8) -> None:
    """Step t of a sample: the model's, the tempered and the filtered distribution over its most likely tokens
    (and the drawn one), and what was drawn."""
    step, vocab = drawn.steps[t], len(drawn.steps[t].probs)
    ids = step.probs.argsort(descending=True, stable=True)[:shown].tolist()
    ids += [] if step.token in ids else [step.token]
    fig = sampling_bars([bundle.tokenizer.piece(i) for i in ids],
                        {"model": step.probs[ids].numpy(), "after temperature": step.tempered[ids].numpy(),
                         "after top-k / top-p": step.filtered[ids].numpy()},
                        drawn=step.piece, title=f"Sampling distributions · step {t + 1}")
    show_figure(fig, chart_filename(bundle.task.name, "sampling", step=t), key="decode_chart_sampling")
    st.markdown(f"**Step {t + 1}:** drew **{code(plain(step.piece))}** (outlined) with probability "
                f"**{pct(step.prob)}**; the model alone gave it {pct(float(step.probs[step.token]))}. The filters "
                f"kept {step.kept} of {vocab} tokens.")
    st.caption(f"Bars show the {len(ids)} most likely tokens; each full distribution (all {vocab} tokens) "
               f"sums to 1, so these bars hold {pct(float(step.filtered[ids].sum()))} of the filtered mass.")


def drawn_samples(source: tuple, bundle, settings: SampleSettings) -> list[SampleResult]:
    """The seeded samples, kept for this session's last model, input, knockout and settings (a step click
    reuses them)."""
    name = (*source, settings)
    kept = st.session_state.get(SAMPLES_KEY)
    if kept is None or kept[0] != name:
        with decodes.model_for(*source[:2], *source[3:]) as model:
            drawn = samples(model, bundle.tokenizer, source[2], settings, SAMPLES)
        kept = st.session_state[SAMPLES_KEY] = (name, drawn)
    return kept[1]


@st.fragment
def sampling_panel(view: View, source: tuple, bundle, greedy: DecodeResult) -> None:
    """Temperature / top-k / top-p sampling: a few seeded samples beside greedy, and one step's distributions."""
    st.subheader("Sampling instead of greedy")
    st.markdown("Chatbots rarely take the single most likely token: they **sample** it. The logits are divided "
                "by a **temperature**, turned into probabilities, cut to the **top-k** most likely tokens and to "
                "the smallest set whose probabilities add up to **top-p**, and one token is drawn from what is "
                "left. Temperature near 0, or top-k = 1, is greedy decoding again.")
    sampling_controls(view)
    values = view.values()
    try:
        settings = SampleSettings(values["temperature"], values["top_k"], values["top_p"], values["seed"])
        drawn = drawn_samples(source, bundle, settings)
    except (DecodeError, TokenizerError) as exc:
        st.error(f"Cannot sample with these settings: {literal(str(exc))}.", icon=":material/error:")
        view.sync_url()
        return
    answer, _ = expected(bundle.task, source[2])
    columns = st.columns(SAMPLES + 1)
    outputs = [("Greedy", greedy.output_text)] + [(f"Sample · seed {d.settings.seed}", d.output_text) for d in drawn]
    for column, (name, output) in zip(columns, outputs):
        with column.container(border=True):
            st.markdown(f"**{name}**")
            st.markdown(f"{code(output or '(empty)')} {verdict(output, answer)}")
    t = sample_step(view, drawn[0])
    sampling_chart(bundle, drawn[0], t)
    view.sync_url()


def main() -> None:
    view = DECODE.view()
    notes = intro()
    key, bundle = require_model()
    text = input_picker(view, bundle, help_text=f"{bundle.task.description} The model reads at most "
                                           f"{bundle.config.max_len - 1} tokens.")
    version = registry.version(key)
    knocked, mode = knockout.picked(view, bundle.model)
    try:
        greedy = decodes.greedy(key, version, text, knocked=knocked, mode=mode)
    except (TokenizerError, DecodeError) as exc:
        if view.from_link("input"):  # a link's input the model cannot read: its first example instead
            view.refuse("input", str(exc))
            st.rerun()
        st.error(f"This input cannot be decoded: {literal(str(exc))}.", icon=":material/error:")
        st.caption("Pick an example above, or type an input in the model's alphabet.")
        finish(view, notes)
        return
    warn_if_longer_than_trained(bundle.task, text)
    if knocked:
        intact = decodes.greedy(key, version, text).output_text
        knockout.compare(intact, greedy.output_text, expected(bundle.task, text)[0], len(knocked))
    source = (key, version, text, knocked, mode)
    stepper(view, source, bundle, greedy)
    st.divider()
    beam_panel(view, source, bundle, greedy)
    st.divider()
    sampling_panel(view, source, bundle, greedy)
    finish(view, notes)


main()
