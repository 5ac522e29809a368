"""Step-by-step decoding: type an input, step through greedy decoding, see each step's choice and attention,
force a different token, and compare greedy with beam search."""

from __future__ import annotations

import html
import math
from typing import NamedTuple

import streamlit as st

from ui import decode_state as state
from ui import model_registry as registry
from ui.display import csv_download, show_figure
from transformer.charts import attention_title, step_attention_rows, token_labels, topk_bar
from transformer.charts.common import display_piece
from transformer.decoding import DecodeError, DecodeResult
from transformer.export import chart_filename
from transformer.special_tokens import BOS, PAD, UNK
from transformer.tokenizers import TokenizerError

CHIP = ("display:inline-block;margin:2px 3px 4px 0;padding:1px 9px;border-radius:7px;"
        "font-family:ui-monospace,Menlo,Consolas,monospace;font-size:1.05rem;line-height:1.7;")
CHIP_STYLES = {
    "plain": "background:#eef1f6;border:1px solid #c9d1e0;color:#222;",
    "chosen": "background:#E69F00;border:2px solid #8a5a00;color:#000;font-weight:700;",
    "future": "background:#fff;border:1px dashed #c4c4c4;color:#9a9a9a;",
    "differs": "background:#fde8dc;border:1px solid #D55E00;color:#222;",
}
FORCED_RING = "box-shadow:0 0 0 2px #D55E00;"  # added to any chip whose token was forced


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


def chip_row(label: str, items: list[Chip]) -> None:
    st.markdown(f'<div style="margin:0 0 2px 0"><span style="color:#555;font-size:0.9rem;display:inline-block;'
                f'width:8.5rem">{label}</span>{chips(items)}</div>', unsafe_allow_html=True)


def plain(piece: str) -> str:
    """A token for markdown code spans and widget labels (not HTML): a space shown as ␣."""
    return html.unescape(display_piece(piece))


def pct(p: float) -> str:
    """A probability as a percentage, small ones in scientific notation so they do not all read 0.0%."""
    return f"{p:.1%}" if p >= 0.001 else f"{p:.1e}"


def verdict(output: str, answer: str | None) -> str:
    if answer is None:
        return ""
    return ":green-badge[:material/check: right]" if output == answer else ":red-badge[:material/close: wrong]"


def intro() -> None:
    st.title("Step-by-step decoding")
    st.markdown(
        "The decoder writes its answer one token at a time. At each step it looks back at the source through "
        "**cross-attention** and at the tokens it has already written through masked **self-attention**, "
        "then greedy decoding keeps the most likely next token. Step through a decode below, or force a "
        "different token and watch everything after it change.")
    st.latex(r"y_t = \arg\max_{w}\; P\left(w \mid y_{<t},\, x\right), \qquad "
             r"\mathrm{Attention}(Q, K, V) = \mathrm{softmax}\!\left(\frac{QK^{\top}}{\sqrt{d_k}}\right) V")


def input_section(key: str, bundle) -> str:
    """The input box and the task's examples; returns the input to decode."""
    task = bundle.task
    examples = task.examples()
    state.adopt_model(key, examples)
    text_col, example_col = st.columns([2, 3], vertical_alignment="bottom")
    text_col.text_input(
        "Input", key=state.INPUT_BOX, on_change=state.text_from_box,
        help=f"{task.description} The model reads at most {bundle.config.max_len - 1} tokens.")
    text = st.session_state[state.TEXT]
    st.session_state[state.EXAMPLES] = text if text in examples else None  # highlight the example in use
    example_col.pills("Examples (held out from training)", examples, key=state.EXAMPLES,
                      on_change=state.text_from_example)
    return text


def step_controls(n_steps: int, t: int) -> None:
    """First / previous / slider / next / last, all writing the one step state."""
    first, prev, slider, nxt, last = st.columns([1, 1, 6, 1, 1], vertical_alignment="bottom")
    first.button("First", icon=":material/first_page:", key="decode_first", disabled=t == 0,
                 on_click=state.go_to, args=(0,), width="stretch")
    prev.button("Prev", icon=":material/chevron_left:", key="decode_prev", disabled=t == 0,
                on_click=state.go_to, args=(t - 1,), width="stretch")
    if n_steps > 1:
        slider.slider(f"Step (of {n_steps})", 1, n_steps, key=state.STEP_SLIDER, on_change=state.step_from_slider)
    else:
        slider.caption("The model wrote a single token: there is only one step.")
    nxt.button("Next", icon=":material/chevron_right:", key="decode_next", disabled=t == n_steps - 1,
               on_click=state.go_to, args=(t + 1,), width="stretch")
    last.button("Last", icon=":material/last_page:", key="decode_last", disabled=t == n_steps - 1,
                on_click=state.go_to, args=(n_steps - 1,), width="stretch")


def token_strips(result: DecodeResult, t: int) -> None:
    """The source, and the decoder's tokens: what it has read (prefix), chosen now, and will write later."""
    chip_row("Source (encoder)", [Chip(p, "plain", f"source position {i}") for i, p in enumerate(result.source_pieces)])
    items = [Chip(result.prefix_pieces[0], "plain", "position 0: start of the output")]
    for i, step in enumerate(result.steps):
        style = "plain" if i < t else "chosen" if i == t else "future"
        items.append(step_chip(step, style, ": chosen now" if i == t else ""))
    chip_row("Decoder", items)
    st.caption(f"At step {t + 1} the decoder reads `<s>` and the {t} token(s) before the highlighted one; the "
               "dashed ones come later. ⚑ marks a token you forced.")


def choice_line(result: DecodeResult, t: int) -> None:
    step = result.steps[t]
    shown = plain(step.piece)
    if step.forced:
        own = step.topk[0]
        st.markdown(f"**Step {t + 1}:** you forced **`{shown}`** (the model gave it {pct(step.prob)}); "
                    f"the model's own choice was `{plain(own.piece)}` at {pct(own.prob)}.")
    else:
        st.markdown(f"**Step {t + 1}:** the model chooses **`{shown}`** with probability **{pct(step.prob)}**.")


def force_panel(tokenizer, result: DecodeResult, t: int) -> None:
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
        st.button("Force it and decode on", icon=":material/call_split:", key="decode_force", type="primary",
                  on_click=state.force, args=(t, pick, model_choice))


def output_chips(result: DecodeResult, other: DecodeResult) -> str:
    """Chips of the output tokens, shading those that differ from `other`'s at the same step."""
    theirs = other.output_ids
    return chips([step_chip(step, "differs" if i >= len(theirs) or theirs[i] != step.token else "plain", "")
                  for i, step in enumerate(result.steps)])


def output_line(name: str, result: DecodeResult, answer: str | None) -> str:
    cut = "" if result.finished else " · cut at the length limit (no `</s>`)"
    return f"**{name}:** `{result.output_text or '(empty)'}` {verdict(result.output_text, answer)}{cut}"


def outcome(result: DecodeResult, greedy: DecodeResult, answer: str | None, why: str) -> None:
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
        st.button("Reset to greedy", icon=":material/restart_alt:", key="decode_reset", on_click=state.reset_forcing)
    if answer is not None:
        st.markdown(f"**Expected** (the task's rule): `{answer}`")
    else:
        st.caption(f"No expected answer for this input: {why}")


def step_charts(bundle, result: DecodeResult, t: int) -> None:
    """This step's top-k next-token bar, the chosen token highlighted."""
    step, task = result.steps[t], bundle.task.name
    fig = topk_bar([c.piece for c in step.topk], [c.prob for c in step.topk], chosen=step.piece,
                   title=f"Next-token probabilities · step {t + 1}")
    show_figure(fig, chart_filename(task, "topk", step=t), key="decode_chart_topk")
    if not any(c.id == step.token for c in step.topk):
        st.caption(f"The forced token `{plain(step.piece)}` is not among the model's top {len(step.topk)}.")


def attention_charts(bundle, result: DecodeResult, t: int) -> None:
    """This step's cross- and decoder self-attention, every layer and head as a row, with their numbers."""
    step, task = result.steps[t], bundle.task.name
    keys = {"cross": result.source_pieces, "decoder_self": result.prefix_pieces[: t + 1]}
    rows = {"cross": step.cross_attention, "decoder_self": step.self_attention}
    for column, kind in zip(st.columns(2), ("cross", "decoder_self")):
        with column:
            labels = token_labels(keys[kind])
            weights = rows[kind].numpy()
            fig = step_attention_rows(weights, labels, attention_title(kind, step=t))
            name = chart_filename(task, kind, step=t)
            show_figure(fig, name, key=f"decode_chart_{kind}")
            layers, heads, _ = weights.shape
            csv_download(weights.reshape(layers * heads, -1),
                         [f"L{i + 1} H{h + 1}" for i in range(layers) for h in range(heads)],
                         labels, name, key=f"decode_csv_{kind}")


@st.fragment
def stepper(key: str, version: int, text: str, bundle, greedy: DecodeResult) -> None:
    """Everything that changes with the step or a forced token; a click reruns only this part."""
    state.own(key, text)
    forced = state.forced()
    result = state.decode(key, version, text, tuple(sorted(forced.items())), bundle) if forced else greedy
    t = state.current_step(len(result.steps))
    step_controls(len(result.steps), t)
    token_strips(result, t)
    choice_line(result, t)
    left, right = st.columns([2, 3], gap="large")
    with left:
        step_charts(bundle, result, t)
    with right:
        force_panel(bundle.tokenizer, result, t)
        outcome(result, greedy, *state.expected(bundle, text))
    st.subheader("Attention at this step")
    st.caption("Each row is one head (L = decoder layer, H = head); each row sums to 1 over its columns. "
               "Bright cells show where that head looked while choosing this step's token.")
    attention_charts(bundle, result, t)


@st.fragment
def beam_panel(key: str, version: int, text: str, bundle, greedy: DecodeResult) -> None:
    st.subheader("Greedy or beam search?")
    st.markdown("Greedy keeps only the single best token at each step. Beam search keeps the *k* best partial "
                "outputs and returns the finished one with the highest total log-probability "
                r"$\sum_t \log P(y_t \mid y_{<t}, x)$.")
    width = st.segmented_control("Beam width", [2, 3, 4, 6, 8], default=4, required=True, key="decode_beam_width")
    beam = state.beam(key, version, text, width, bundle)
    answer, _ = state.expected(bundle, text)
    left, right = st.columns(2)
    for column, name, output, score in ((left, "Greedy", greedy.output_text, greedy.score),
                                        (right, f"Beam search, width {width}", beam.text, beam.score)):
        with column.container(border=True):
            st.markdown(f"**{name}**")
            st.markdown(f"`{output or '(empty)'}` {verdict(output, answer)}")
            st.markdown(f"total log-probability **{score:.4g}** (probability {pct(math.exp(score))})")
    if beam.text == greedy.output_text:
        st.caption(":material/check: Both find the same output.")
    else:
        st.markdown(":orange-badge[:material/compare_arrows: different outputs] beam search found a sequence "
                    f"whose total log-probability differs by {beam.score - greedy.score:+.4g}.")


def main() -> None:
    intro()
    key, bundle = registry.active_key(), registry.active_bundle()
    if bundle is None:
        st.warning("No model is available yet: train one on the Train live page or upload a checkpoint.")
        return
    text = input_section(key, bundle)
    version = registry.version(key)
    try:
        greedy = state.decode(key, version, text, (), bundle)
    except (TokenizerError, DecodeError) as exc:
        st.error(f"This input cannot be decoded: {exc}.", icon=":material/error:")
        st.caption("Pick an example above, or type an input in the model's alphabet.")
        return
    if len(text) > bundle.task.max_source_chars:
        st.warning(f"The model was trained on inputs of at most {bundle.task.max_source_chars} characters; "
                   "expect mistakes on longer ones.", icon=":material/warning:")
    stepper(key, version, text, bundle, greedy)
    st.divider()
    beam_panel(key, version, text, bundle, greedy)


main()
