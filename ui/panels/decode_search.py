"""The decoding page's other ways to decode: greedy against beam search, and sampling with temperature, top-k and
top-p (a few seeded samples beside greedy, and one step's distributions before and after the filters)."""

from __future__ import annotations

import math

import streamlit as st

from transformer.charts import sampling_bars
from transformer.charts.export import chart_filename
from transformer.network.decoding import DecodeError, DecodeResult
from transformer.network.sampling import SampleResult, SampleSettings, samples
from transformer.network.tokenizers import TokenizerError
from ui import decodes
from ui import model_registry as registry
from ui.display import show_figure
from ui.markdown import code, literal
from ui.state import View
from ui.tables.decode import BEAM_WIDTHS, DECODE, SAMPLES
from ui.widgets import expected, pct, token_text, verdict

SAMPLES_KEY = "decode_samples_drawn"  # session key: (what they were drawn for, the samples)


@st.fragment
def beam_panel(view: View, source: decodes.Source, bundle, greedy: DecodeResult) -> None:
    st.subheader("Greedy or beam search?")
    st.markdown("Greedy keeps only the single best token at each step. Beam search keeps the *k* best partial "
                "outputs and returns the finished one with the highest total log-probability "
                r"$\sum_t \log P(y_t \mid y_{<t}, x)$.")
    width = view.widget("beam", st.segmented_control, "Beam width", BEAM_WIDTHS, required=True)
    beam = source.beam(width)
    answer, _ = expected(bundle.task, source.text)
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
                        {"model": step.probs[ids].numpy(), "tempered": step.tempered[ids].numpy(),
                         "filtered": step.filtered[ids].numpy()},
                        drawn=step.piece, title=f"Sampling distributions · step {t + 1}")
    show_figure(fig, chart_filename(bundle.task.name, "sampling", step=t), key="decode_chart_sampling")
    st.markdown(f"**Step {t + 1}:** drew **{code(token_text(step.piece))}** (outlined) with probability "
                f"**{pct(step.prob)}**; the model alone gave it {pct(float(step.probs[step.token]))}. The filters "
                f"kept {step.kept} of {vocab} tokens.")
    st.caption(f"Bars show the {len(ids)} most likely tokens; each full distribution (all {vocab} tokens) "
               f"sums to 1, so these bars hold {pct(float(step.filtered[ids].sum()))} of the filtered mass.")


def drawn_samples(source: decodes.Source, bundle, settings: SampleSettings) -> list[SampleResult]:
    """The seeded samples, kept for this session's last model, input, knockout and settings (a step click
    reuses them)."""
    name = (source, settings)
    kept = st.session_state.get(SAMPLES_KEY)
    if kept is None or kept[0] != name:
        with source.model() as model:
            drawn = samples(model, bundle.tokenizer, source.text, settings, SAMPLES)
        kept = st.session_state[SAMPLES_KEY] = (name, drawn)
    return kept[1]


@st.fragment
def sampling_panel(view: View, source: decodes.Source, bundle, greedy: DecodeResult) -> None:
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
    answer, _ = expected(bundle.task, source.text)
    columns = st.columns(SAMPLES + 1)
    outputs = [("Greedy", greedy.output_text)] + [(f"Sample · seed {d.settings.seed}", d.output_text) for d in drawn]
    for column, (name, output) in zip(columns, outputs):
        with column.container(border=True):
            st.markdown(f"**{name}**")
            st.markdown(f"{code(output or '(empty)')} {verdict(output, answer)}")
    t = sample_step(view, drawn[0])
    sampling_chart(bundle, drawn[0], t)
    view.sync_url()
