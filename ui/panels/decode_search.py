"""The decoding page's other ways to decode: greedy against beam search, and sampling with temperature, top-k and
top-p (a few seeded samples beside greedy, and one step's distributions before and after the filters)."""

from __future__ import annotations

import math

import numpy as np
import streamlit as st

from transformer.charts import sampling_bars, tokens_that_matter
from transformer.charts.common import probability_text
from transformer.charts.export import chart_filename
from transformer.network.decoding import DecodeError, DecodeResult
from transformer.network.sampling import SampleResult, SampleSettings, samples
from transformer.network.tokenizers import TokenizerError
from ui import decodes
from ui import model_registry as registry
from ui.display import show_figure
from ui.failure import fragment
from ui.markdown import code, literal
from ui.state import View
from ui.tables.decode import BEAM_WIDTHS, DECODE, SAMPLES
from ui.widgets import expected, token_text, verdict
from transformer.i18n import t

SAMPLES_KEY = "decode_samples_drawn"  # session key: (what they were drawn for, the samples)


@fragment
def beam_panel(view: View, source: decodes.Source, bundle, greedy: DecodeResult) -> None:
    st.subheader(t("decode.beam.header"))
    st.markdown(t("decode.beam.text", formula=r"$\sum_t \log P(y_t \mid y_{<t}, x)$"))
    width = view.widget("beam", st.segmented_control, t("decode.beam.width"), BEAM_WIDTHS, required=True)
    beam = source.beam(width)
    answer, _ = expected(bundle.task, source.text)
    left, right = st.columns(2)
    for column, name, output, score in ((left, t("decode.greedy"), greedy.output_text, greedy.score),
                                        (right, t("decode.beam.name", width=width), beam.text, beam.score)):
        with column.container(border=True):
            st.markdown(f"**{name}**")
            st.markdown(f"{code(output or t('decode.empty'))} {verdict(output, answer)}")
            st.markdown(t("decode.beam.score", score=score, prob=probability_text(math.exp(score))))
    if beam.text == greedy.output_text:
        st.caption(":material/check: " + t("decode.beam.same"))
        if not bundle.card.get("under_trained") and BEAM_DEMO in registry.entries():
            st.caption(t("decode.beam.demo"))
            if st.button(t("decode.beam.demo_button"), icon=":material/swap_horiz:", key="decode_beam_demo"):
                registry.set_active(BEAM_DEMO)
                st.rerun()  # the whole page: this panel is a fragment, and the sidebar shows the model too
    else:
        st.markdown(t("decode.beam.different", diff=beam.score - greedy.score))
    view.sync_url()


BEAM_DEMO = "shipped:reverse-early"  # assets/build_beam_demo.py: stopped early, so beam search matters


def sampling_controls(view: View) -> None:
    """Temperature, top-k (empty: off), top-p and seed, each bound to its prop and offering its range."""
    bounds = {name: DECODE.by_name[name].bounds() for name in ("temperature", "top_k", "top_p", "seed")}
    temperature, top_k, top_p, seed = st.columns(4)
    with temperature:
        view.widget("temperature", st.number_input, t("decode.sampling.temperature"), **bounds["temperature"],
                    step=0.1, format="%.2f", help=t("decode.sampling.temperature_help"))
    with top_k:
        box = view.widget_key("top_k")
        view.widget("top_k", st.number_input, "Top-k", **bounds["top_k"], value=None, step=1,
                    placeholder=t("decode.sampling.off"),  # value=None: the box may be emptied (off)
                    on_change=lambda: view.reset("top_k") if st.session_state[box] is None else None,
                    help=t("decode.sampling.top_k_help"))
    with top_p:
        view.widget("top_p", st.number_input, "Top-p", **bounds["top_p"], step=0.05, format="%.2f",
                    help=t("decode.sampling.top_p_help"))
    with seed:
        view.widget("seed", st.number_input, t("errors.seed"), **bounds["seed"], step=1,
                    help=t("decode.sampling.seed_help", n=SAMPLES))


def sample_step(view: View, drawn: SampleResult) -> int:
    """The 0-based step of the first sample to show (its first by default), with a slider when there are more."""
    n_steps, chosen = len(drawn.steps), view.get("sample_step")
    if chosen is not None and chosen > n_steps:
        view.refuse("sample_step", t("decode.link.sample_steps", n=n_steps))
        chosen = None
    if n_steps > 1:
        view.widget("sample_step", st.slider, t("decode.sampling.step", seed=drawn.settings.seed, n=n_steps),
                    1, n_steps, to_widget=lambda value: value or 1)
    return (chosen or 1) - 1


def sampling_chart(bundle, drawn: SampleResult, index: int) -> None:
    """Step `index` of a sample: the model's, the tempered and the filtered distribution over the tokens that hold a
    share worth seeing (and the drawn one), the rest summed in one bar, and what was drawn."""
    step, vocab = drawn.steps[index], len(drawn.steps[index].probs)
    stages = {"model": step.probs.numpy(), "tempered": step.tempered.numpy(), "filtered": step.filtered.numpy()}
    ids = tokens_that_matter(stages, step.token)
    rest = np.setdiff1d(np.arange(vocab), ids)
    others = [t("decode.sampling.others", n=len(rest))] if len(rest) else []
    pieces = [bundle.tokenizer.piece(i) for i in ids] + others
    shown = {name: np.append(p[ids], p[rest].sum()) if len(rest) else p[ids] for name, p in stages.items()}
    fig = sampling_bars(pieces, shown, drawn=step.piece, title=t("decode.sampling.title", n=index + 1))
    show_figure(fig, chart_filename(bundle.task.name, "sampling", step=index), key="decode_chart_sampling")
    st.markdown(t("decode.sampling.drew", n=index + 1, token=code(token_text(step.piece)),
                  prob=probability_text(step.prob), alone=probability_text(float(step.probs[step.token])),
                  kept=step.kept, vocab=vocab))
    st.caption(t("decode.sampling.bars", n=len(rest)))


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


@fragment
def sampling_panel(view: View, source: decodes.Source, bundle, greedy: DecodeResult) -> None:
    """Temperature / top-k / top-p sampling: a few seeded samples beside greedy, and one step's distributions."""
    st.subheader(t("decode.sampling.header"))
    st.markdown(t("decode.sampling.text"))
    sampling_controls(view)
    values = view.values()
    try:
        settings = SampleSettings(values["temperature"], values["top_k"], values["top_p"], values["seed"])
        drawn = drawn_samples(source, bundle, settings)
    except (DecodeError, TokenizerError) as exc:
        st.error(t("decode.sampling.cannot", error=literal(str(exc))), icon=":material/error:")
        view.sync_url()
        return
    answer, _ = expected(bundle.task, source.text)
    columns = st.columns(SAMPLES + 1)
    outputs = [(t("decode.greedy"), greedy.output_text)] + [
        (t("decode.sampling.sample", seed=d.settings.seed), d.output_text) for d in drawn]
    for column, (name, output) in zip(columns, outputs):
        with column.container(border=True):
            st.markdown(f"**{name}**")
            st.markdown(f"{code(output or t('decode.empty'))} {verdict(output, answer)}")
    sampling_chart(bundle, drawn[0], sample_step(view, drawn[0]))
    view.sync_url()
