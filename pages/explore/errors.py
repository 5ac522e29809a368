"""Where it fails: the active model's greedy decodes of N held-out inputs counted by input length and output
position, the most frequent wrong tokens, every failing input (opened on the decoding page at its first wrong
step), exact match and token accuracy by input length past the trained lengths, and the same for shipped models
that differ only in their position scheme."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlencode

import numpy as np
import pandas as pd
import streamlit as st
from streamlit.delta_generator import DeltaGenerator

from ui import decodes
from ui import model_registry as registry
from ui.display import show_figure, table_download
from ui.markdown import literal
from ui.state import View
from ui.tables.decode import DECODE
from ui.tables.errors import ERRORS, MAX_LENGTH, PER_LENGTH, SAMPLES
from ui.tables.shared import PRESENTER
from ui.widgets import finish, header, require_model
from transformer.charts.errors import confusion_bars, length_metrics, position_accuracy, scheme_lengths
from transformer.analysis.errors import ErrorAnalysis, Failure
from transformer.charts.export import chart_filename
from transformer.analysis.lengths import LengthError, evaluate_lengths, trained_lengths

DECODE_PAGE = "pages/explore/decode.py"
SHOWN_FAILURES = 200  # rows of the failing-inputs table (all are counted in the charts)
PAST_TRAINED = 8  # the by-length view's default reaches this far past the trained lengths
HOLDS = 0.9  # a scheme "holds" at a length while its exact match is at least this


def intro() -> DeltaGenerator:
    notes = header("Where it fails")
    st.markdown(
        "A model at 99% still gets some inputs wrong. Here the active model decodes many **held-out** inputs "
        "(never seen in training) greedily, all at once, and the page counts which ones it gets wrong: by input "
        "length, by output position, and which token it wrote instead of the right one. Open any failing input "
        "on the decoding page at the step where it first goes wrong.")
    return notes


def _lengths(key: str, version: int, lo: int, hi: int, per_length: int, seed: int) -> dict:
    return evaluate_lengths(registry.bundle_for(key), lo, hi, per_length, seed)


def scheme_report(path: str, version: int, per_length: int, seed: int) -> dict:
    """`evaluate_lengths` of a position-scheme model from its shortest trained length to the longest input its
    positions hold."""
    bundle = registry.load_file(Path(path))
    return evaluate_lengths(bundle, trained_lengths(bundle.task)[0], bundle.config.max_len - 1, per_length, seed)


def decode_params(key: str, failure: Failure) -> dict[str, str]:
    """The decoding page's query parameters showing `failure` at its first wrong step, every other setting (forced
    tokens, knocked-out heads, sampling) at its default; the presenter switch stays as it is."""
    values = {prop.name: prop.default for prop in DECODE.props if prop is not PRESENTER}
    values |= {"model": key, "input": failure.source, "step": failure.step + 1}
    return DECODE.view().params(values)


def decode_link(key: str, failure: Failure) -> str:
    """A link (relative to this page) to the decoding page at the failure's first wrong step."""
    return "decode?" + urlencode(decode_params(key, failure))


def settings(view: View) -> None:
    left, right, _ = st.columns([2, 2, 3])
    with left:
        view.widget("samples", st.number_input, "Held-out inputs", min_value=SAMPLES[0], max_value=SAMPLES[1],
                    step=100, help="How many held-out inputs to decode (1,000 take about a second).")
    with right:
        view.widget("seed", st.number_input, "Seed", min_value=0, max_value=2**31 - 1, step=1,
                    help="Which held-out inputs are drawn (the same seed draws the same ones).")


def summary(analysis: ErrorAnalysis) -> None:
    wrong = len(analysis.failures)
    exact, failing, most = st.columns(3)
    exact.metric("Exact match", f"{analysis.exact_match:.1%}", border=True)
    failing.metric(f"Failing inputs (of {analysis.samples:,})", f"{wrong:,}", border=True)
    top = analysis.confusions[0] if analysis.confusions else None
    most.metric(f"Top mistake ({top[2]} of {wrong:,})" if top else "Top mistake",
                f"{top[0]} → {top[1]}" if top else "none", border=True,
                help="Expected → produced, at each failing output's first wrong step")


def charts(task: str, analysis: ErrorAnalysis, trained: tuple[int, int] | None) -> None:
    by_length, by_position = st.columns(2)
    with by_length:
        exact = analysis.length_exact / np.maximum(analysis.length_counts, 1)
        fig = length_metrics(analysis.lengths, {"exact match": exact}, trained, "Exact match by input length",
                             counts=analysis.length_counts)
        show_figure(fig, chart_filename(task, "errors-by-length"), key="errors_chart_length")
    with by_position:
        fig = position_accuracy(analysis.position_counts, analysis.position_hits, analysis.first_errors,
                                "Token accuracy by output position")
        show_figure(fig, chart_filename(task, "errors-by-position"), key="errors_chart_position")
    st.caption("Output position p is decode step p (the answer's tokens, then `</s>`); its bar counts only the "
               "inputs whose answer is that long. Once an output goes wrong it is conditioned on its own mistake, so "
               "the red line, where outputs *first* go wrong, says more than the bars after it.")
    if analysis.confusions:
        fig = confusion_bars(analysis.confusions, "Most frequent wrong tokens (expected → produced)")
        show_figure(fig, chart_filename(task, "errors-tokens"), key="errors_chart_tokens")


def failure_table(key: str, task: str, analysis: ErrorAnalysis) -> None:
    st.subheader("Failing inputs")
    if not analysis.failures:
        st.success(f"The model got all {analysis.samples:,} held-out inputs right.", icon=":material/check:")
        return
    shown = analysis.failures[:SHOWN_FAILURES]
    table = pd.DataFrame({
        "input": [f.source for f in shown],
        "decode": [decode_link(key, f) for f in shown],
        "first wrong step": [f.step + 1 for f in shown],
        "there": [f"{f.expected_piece} → {f.produced_piece}" for f in shown],
        "expected": [f.expected for f in shown],
        "produced": [f.produced for f in shown],
    })  # short headers and no length column (the chart below has it): it fits a 1024-pixel window
    st.dataframe(table, hide_index=True, key="errors_failures", column_config={
        "decode": st.column_config.LinkColumn("Decode", display_text="open ↗", width="small",
                                              help="Open it on the decoding page at its first wrong step (new tab)"),
        "first wrong step": st.column_config.NumberColumn("Step", help="The first wrong decoding step", width=56),
        "there": st.column_config.TextColumn("Wrong", help="Expected → produced, at the first wrong step"),
    })
    wrong = len(analysis.failures)
    table_download(pd.DataFrame({"input": [f.source for f in analysis.failures],
                                 "first wrong step": [f.step + 1 for f in analysis.failures],
                                 "expected token": [f.expected_piece for f in analysis.failures],
                                 "produced token": [f.produced_piece for f in analysis.failures],
                                 "expected": [f.expected for f in analysis.failures],
                                 "produced": [f.produced for f in analysis.failures]}),
                   chart_filename(task, "failing-inputs"), key="errors_failures_csv",
                   label=f"All {wrong:,} failing inputs (CSV)")
    more = f" (the first {SHOWN_FAILURES} of {wrong:,})" if wrong > SHOWN_FAILURES else ""
    st.caption(f"Failing inputs in the order they were drawn{more}. The Decode link opens a new tab; or open one here:")
    pick, go = st.columns([3, 2], vertical_alignment="bottom")
    index = pick.selectbox("Failing input", range(len(shown)), key="errors_pick",
                           format_func=lambda i: f"{shown[i].source} (step {shown[i].step + 1}: "
                                                 f"{shown[i].expected_piece} → {shown[i].produced_piece})")
    if go.button("Open on the decoding page", key="errors_open", icon=":material/play_arrow:", width="stretch"):
        st.switch_page(DECODE_PAGE, query_params=decode_params(key, shown[index]))


@st.fragment
def by_length(view: View, key: str, version: int, bundle) -> None:
    """Exact match and token accuracy by input length, past the trained lengths when the model has positions."""
    st.subheader("Length generalisation")
    try:
        trained = trained_lengths(bundle.task)
    except LengthError as exc:
        st.info(f"Not for this model: {literal(str(exc))}.", icon=":material/info:")
        return
    longest = min(MAX_LENGTH, bundle.config.max_len - 1)
    st.markdown(
        f"Trained on inputs of {trained[0]} to {trained[1]} letters, how does the model do on longer ones? "
        f"Its positions end at {bundle.config.max_len} (`max_len`), so it can read at most {longest} letters; "
        "longer lengths are refused. Exact match is greedy; token accuracy is teacher-forced (each step given the "
        "right prefix).")
    lo = view.get("len_from") or trained[0]
    hi = view.get("len_to") or min(trained[1] + PAST_TRAINED, longest)
    first, last, per, _ = st.columns([2, 2, 2, 3])
    with first:
        view.widget("len_from", st.number_input, "From length", min_value=1, max_value=MAX_LENGTH,
                    to_widget=lambda _: lo)
    with last:
        view.widget("len_to", st.number_input, "To length", min_value=1, max_value=MAX_LENGTH,
                    to_widget=lambda _: hi)
    with per:
        view.widget("per_length", st.number_input, "Inputs per length", min_value=PER_LENGTH[0],
                    max_value=PER_LENGTH[1], step=50)
    seed = view.get("seed")
    try:
        with st.spinner("Evaluating each length…"):
            report = decodes.memo("lengths", _lengths, key, version, lo, hi, view.get("per_length"), seed)
    except ValueError as exc:  # LengthError, BudgetError
        st.error(f"Cannot evaluate these lengths: {literal(str(exc))}.", icon=":material/error:")
        view.sync_url()
        return
    rows = report["lengths"]
    fig = length_metrics([r["length"] for r in rows], {
        "exact match": [r["exact_match"] for r in rows], "token accuracy": [r["token_accuracy"] for r in rows]},
        trained, f"Held-out exact match and token accuracy by input length · {bundle.task.name}",
        counts=[r["samples"] for r in rows])
    show_figure(fig, chart_filename(bundle.task.name, "by-length"), key="errors_chart_lengths")
    outside = [r for r in rows if not r["trained"]]
    if outside:
        worst = min(outside, key=lambda r: r["exact_match"])
        st.caption(f"Past the trained lengths: exact match {worst['exact_match']:.1%} at length {worst['length']} "
                   f"(the lowest outside the shaded band), on {report['samples_per_length']:,} inputs per length.")
    view.sync_url()


def scheme_caption(reports: dict[str, dict]) -> str:
    """How far past the trained lengths each scheme holds, read off the numbers shown."""
    parts = []
    for scheme, report in reports.items():
        rows = report["lengths"]
        inside = min(r["exact_match"] for r in rows if r["trained"])
        reach = report["trained"][1]
        for row in (r for r in rows if r["length"] > reach):
            if row["length"] != reach + 1 or row["exact_match"] < HOLDS:
                break
            reach += 1
        parts.append(f"**{scheme}** at least {inside:.1%} inside, holds ≥ {HOLDS:.0%} to length {reach}")
    return "; ".join(parts)


@st.fragment
def position_schemes(view: View) -> None:
    """The shipped models that differ only in their position scheme, by input length past their training."""
    st.subheader("Position schemes past the trained length")
    files = registry.position_models()
    if not files:
        st.info("The position-scheme models are not built here: `python assets/build_position_zoo.py`.",
                icon=":material/info:")
        return
    first = registry.load_file(next(iter(files.values())))
    trained, positions = trained_lengths(first.task), first.config.max_len
    st.markdown(
        f"{len(files)} small `reverse` models identical in everything but their position scheme "
        f"({', '.join(files)}): trained on inputs of {trained[0]} to {trained[1]} letters with the same recipe, "
        f"and given positions for up to {positions - 1} letters, so each can be asked about longer inputs than it "
        "ever saw. They are not in the model list; this section evaluates all of them on the same held-out inputs "
        "(the seed and inputs per length above).")
    if not view.widget("schemes", st.toggle, "Compare the position schemes",
                       help=f"Evaluates {len(files)} models on every length: a few seconds the first time"):
        view.sync_url()
        return
    per_length, seed = view.get("per_length"), view.get("seed")
    try:
        with st.spinner("Evaluating each scheme at each length…"):
            reports = {scheme: decodes.memo("scheme_lengths", scheme_report, str(path), path.stat().st_mtime_ns,
                                            per_length, seed) for scheme, path in files.items()}
    except ValueError as exc:  # BudgetError
        st.error(f"Cannot evaluate the position schemes: {literal(str(exc))}.", icon=":material/error:")
        view.sync_url()
        return
    lengths = [r["length"] for r in next(iter(reports.values()))["lengths"]]
    curves = {scheme: {"exact match": [r["exact_match"] for r in report["lengths"]],
                       "token accuracy": [r["token_accuracy"] for r in report["lengths"]]}
              for scheme, report in reports.items()}
    fig = scheme_lengths(lengths, curves, trained, "Held-out reverse by input length, one model per position scheme")
    show_figure(fig, chart_filename("reverse", "position-schemes"), key="errors_chart_schemes")
    st.caption(f"Greedy exact match and teacher-forced token accuracy on {per_length:,} held-out inputs per length "
               f"(seed {seed}), the trained lengths shaded. {scheme_caption(reports)}. One seed and one recipe per "
               "scheme: a measurement of these four models, not a ranking of the schemes in general.")
    table = pd.DataFrame([{"scheme": scheme, **row} for scheme, report in reports.items() for row in report["lengths"]])
    cells = st.columns(len(files) + 1)
    with cells[0]:
        table_download(table, chart_filename("reverse", "position-schemes"), key="errors_schemes_csv")
    for cell, scheme in zip(cells[1:], files):
        if cell.button(f"Make {scheme} active", key=f"errors_open_{scheme}", on_click=registry.open_position_model,
                       args=(scheme,), help="Add it to the model list and use it on every page"):
            st.rerun()  # the whole page: the sidebar and the sections above show the new active model
    view.sync_url()


def main() -> None:
    view = ERRORS.view()
    notes = intro()
    key, bundle = require_model()
    settings(view)
    version = registry.version(key)
    try:
        with st.spinner("Decoding the held-out inputs…"):
            analysis = decodes.errors(key, version, view.get("samples"), view.get("seed"))
    except ValueError as exc:  # BudgetError, or inputs longer than the model's positions
        st.error(f"Cannot analyse this model: {literal(str(exc))}.", icon=":material/error:")
        finish(view, notes)
        return
    try:
        trained = trained_lengths(bundle.task)
    except LengthError:
        trained = None
    if analysis.samples < view.get("samples"):
        st.caption(f"This model's task has only {analysis.samples:,} held-out inputs: all of them are analysed.")
    summary(analysis)
    charts(bundle.task.name, analysis, trained)
    failure_table(key, bundle.task.name, analysis)
    st.divider()
    by_length(view, key, version, bundle)
    st.divider()
    position_schemes(view)
    finish(view, notes)


main()
