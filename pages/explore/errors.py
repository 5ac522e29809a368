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
from ui.failure import callback, fragment
from ui.markdown import literal
from ui.state import View
from ui.tables.decode import DECODE
from ui.tables.errors import ERRORS, MAX_LENGTH, PER_LENGTH, SAMPLES
from ui.tables.shared import LANG, PRESENTER
from ui.widgets import finish, header, require_model
from transformer.charts.errors import SCHEMES, confusion_bars, length_metrics, position_accuracy, scheme_lengths
from transformer.i18n import t
from transformer.analysis.errors import ErrorAnalysis, Failure
from transformer.charts.export import chart_filename
from transformer.analysis.lengths import LengthError, evaluate_lengths, trained_lengths

DECODE_PAGE = "pages/explore/decode.py"
SHOWN_FAILURES = 200  # rows of the failing-inputs table (all are counted in the charts)
PAST_TRAINED = 8  # the by-length view's default reaches this far past the trained lengths
HOLDS = 0.9  # a scheme "holds" at a length while its exact match is at least this


def intro() -> DeltaGenerator:
    notes = header(t("app.page.errors"))
    st.markdown(t("errors.intro"))
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
    tokens, knocked-out heads, sampling) at its default; the presenter switch and the language stay as they are."""
    values = {prop.name: prop.default for prop in DECODE.props if prop not in (PRESENTER, LANG)}
    values |= {"model": key, "input": failure.source, "step": failure.step + 1}
    return DECODE.view().params(values)


def decode_link(key: str, failure: Failure) -> str:
    """A link (relative to this page) to the decoding page at the failure's first wrong step."""
    return "decode?" + urlencode(decode_params(key, failure))


def settings(view: View) -> None:
    left, right, _ = st.columns([2, 2, 3])
    with left:
        view.widget("samples", st.number_input, t("attention.importance.samples"), min_value=SAMPLES[0],
                    max_value=SAMPLES[1], step=100, help=t("errors.samples_help"))
    with right:
        view.widget("seed", st.number_input, t("errors.seed"), min_value=0, max_value=2**31 - 1, step=1,
                    help=t("errors.seed_help"))


def summary(analysis: ErrorAnalysis) -> None:
    wrong = len(analysis.failures)
    exact, failing, most = st.columns(3)
    exact.metric(t("errors.exact_match"), f"{analysis.exact_match:.1%}", border=True)
    failing.metric(t("errors.failing_of", n=analysis.samples), f"{wrong:,}", border=True)
    top = analysis.confusions[0] if analysis.confusions else None
    most.metric(t("errors.top_of", n=top[2], wrong=wrong) if top else t("errors.top"),
                f"{top[0]} → {top[1]}" if top else t("errors.none"), border=True, help=t("errors.wrong_help"))


def charts(task: str, analysis: ErrorAnalysis, trained: tuple[int, int] | None) -> None:
    by_length, by_position = st.columns(2)
    with by_length:
        exact = analysis.length_exact / np.maximum(analysis.length_counts, 1)
        fig = length_metrics(analysis.lengths, {"exact_match": exact}, trained, t("errors.by_length_title"),
                             counts=analysis.length_counts)
        show_figure(fig, chart_filename(task, "errors-by-length"), key="errors_chart_length")
    with by_position:
        fig = position_accuracy(analysis.position_counts, analysis.position_hits, analysis.first_errors,
                                t("errors.by_position_title"))
        show_figure(fig, chart_filename(task, "errors-by-position"), key="errors_chart_position")
    st.caption(t("errors.position_caption"))
    if analysis.confusions:
        fig = confusion_bars(analysis.confusions, t("errors.confusion_title"))
        show_figure(fig, chart_filename(task, "errors-tokens"), key="errors_chart_tokens")


def failure_table(key: str, task: str, analysis: ErrorAnalysis) -> None:
    st.subheader(t("errors.failures.header"))
    if not analysis.failures:
        st.success(t("errors.failures.none", n=analysis.samples), icon=":material/check:")
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
        "input": st.column_config.TextColumn(t("errors.failures.input")),
        "decode": st.column_config.LinkColumn(t("errors.failures.decode"), display_text=t("errors.failures.open"),
                                              width="small", help=t("errors.failures.decode_help")),
        "first wrong step": st.column_config.NumberColumn(t("errors.failures.step"),
                                                          help=t("errors.failures.step_help"), width=56),
        "there": st.column_config.TextColumn(t("errors.failures.wrong"), help=t("errors.wrong_help")),
        "expected": st.column_config.TextColumn(t("errors.failures.expected")),
        "produced": st.column_config.TextColumn(t("errors.failures.produced")),
    })
    wrong = len(analysis.failures)
    failures = analysis.failures
    table_download(pd.DataFrame({t("errors.failures.input"): [f.source for f in failures],
                                 t("errors.failures.first_step"): [f.step + 1 for f in failures],
                                 t("errors.failures.expected_token"): [f.expected_piece for f in failures],
                                 t("errors.failures.produced_token"): [f.produced_piece for f in failures],
                                 t("errors.failures.expected"): [f.expected for f in failures],
                                 t("errors.failures.produced"): [f.produced for f in failures]}),
                   chart_filename(task, "failing-inputs"), key="errors_failures_csv",
                   label=t("errors.failures.csv", n=wrong))
    more = t("errors.failures.first", shown=SHOWN_FAILURES, n=wrong) if wrong > SHOWN_FAILURES else ""
    st.caption(t("errors.failures.caption", more=more))
    pick, go = st.columns([3, 2], vertical_alignment="bottom")
    index = pick.selectbox(t("errors.failures.pick"), range(len(shown)), key="errors_pick",
                           format_func=lambda i: t("errors.failures.option", input=shown[i].source,
                                                   step=shown[i].step + 1, expected=shown[i].expected_piece,
                                                   produced=shown[i].produced_piece))
    if go.button(t("errors.failures.go"), key="errors_open", icon=":material/play_arrow:", width="stretch"):
        st.switch_page(DECODE_PAGE, query_params=decode_params(key, shown[index]))


@fragment
def by_length(view: View, key: str, version: int, bundle) -> None:
    """Exact match and token accuracy by input length, past the trained lengths when the model has positions."""
    st.subheader(t("errors.lengths.header"))
    try:
        trained = trained_lengths(bundle.task)
    except LengthError as exc:
        st.info(t("errors.lengths.not_here", error=literal(str(exc))), icon=":material/info:")
        return
    longest = min(MAX_LENGTH, bundle.config.max_len - 1)
    st.markdown(t("errors.lengths.text", lo=trained[0], hi=trained[1], max_len=bundle.config.max_len,
                  longest=longest))
    lo = view.get("len_from") or trained[0]
    hi = view.get("len_to") or min(trained[1] + PAST_TRAINED, longest)
    first, last, per, _ = st.columns([2, 2, 2, 3])
    with first:
        view.widget("len_from", st.number_input, t("errors.lengths.from"), min_value=1, max_value=MAX_LENGTH,
                    to_widget=lambda _: lo)
    with last:
        view.widget("len_to", st.number_input, t("errors.lengths.to"), min_value=1, max_value=MAX_LENGTH,
                    to_widget=lambda _: hi)
    with per:
        view.widget("per_length", st.number_input, t("errors.lengths.per_length"), min_value=PER_LENGTH[0],
                    max_value=PER_LENGTH[1], step=50)
    seed = view.get("seed")
    try:
        with st.spinner(t("errors.lengths.running")):
            report = decodes.memo("lengths", _lengths, key, version, lo, hi, view.get("per_length"), seed)
    except ValueError as exc:  # LengthError, BudgetError
        st.error(t("errors.lengths.cannot", error=literal(str(exc))), icon=":material/error:")
        view.sync_url()
        return
    rows = report["lengths"]
    fig = length_metrics([r["length"] for r in rows], {
        "exact_match": [r["exact_match"] for r in rows], "token_accuracy": [r["token_accuracy"] for r in rows]},
        trained, t("errors.lengths.title", task=bundle.task.name), counts=[r["samples"] for r in rows])
    show_figure(fig, chart_filename(bundle.task.name, "by-length"), key="errors_chart_lengths")
    outside = [r for r in rows if not r["trained"]]
    if outside:
        worst = min(outside, key=lambda r: r["exact_match"])
        st.caption(t("errors.lengths.caption" if len(outside) > 1 else "errors.lengths.caption_one",
                     share=worst["exact_match"], length=worst["length"], n=report["samples_per_length"]))
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
        parts.append(t("errors.schemes.holds", scheme=SCHEMES.get(scheme, scheme), inside=inside, holds=HOLDS,
                       reach=reach))
    return t("app.list_separator").join(parts)


@fragment
def position_schemes(view: View) -> None:
    """The shipped models that differ only in their position scheme, by input length past their training."""
    st.subheader(t("errors.schemes.header"))
    files = registry.position_models()
    if not files:
        st.info(t("errors.schemes.missing"), icon=":material/info:")
        return
    first = registry.load_file(next(iter(files.values())))
    trained, positions = trained_lengths(first.task), first.config.max_len
    names = t("app.list_items").join(SCHEMES.get(scheme, scheme) for scheme in files)
    st.markdown(t("errors.schemes.text", n=len(files), schemes=names, lo=trained[0], hi=trained[1],
                  longest=positions - 1))
    if not view.widget("schemes", st.toggle, t("errors.schemes.toggle"), help=t("errors.schemes.toggle_help",
                                                                                n=len(files))):
        view.sync_url()
        return
    per_length, seed = view.get("per_length"), view.get("seed")
    try:
        with st.spinner(t("errors.schemes.running")):
            reports = {scheme: decodes.memo("scheme_lengths", scheme_report, str(path), path.stat().st_mtime_ns,
                                            per_length, seed) for scheme, path in files.items()}
    except ValueError as exc:  # BudgetError
        st.error(t("errors.schemes.cannot", error=literal(str(exc))), icon=":material/error:")
        view.sync_url()
        return
    lengths = [r["length"] for r in next(iter(reports.values()))["lengths"]]
    curves = {scheme: {"exact_match": [r["exact_match"] for r in report["lengths"]],
                       "token_accuracy": [r["token_accuracy"] for r in report["lengths"]]}
              for scheme, report in reports.items()}
    fig = scheme_lengths(lengths, curves, trained, t("errors.schemes.title"))
    show_figure(fig, chart_filename("reverse", "position-schemes"), key="errors_chart_schemes")
    st.caption(t("errors.schemes.caption", n=per_length, seed=seed, holds=scheme_caption(reports)))
    table = pd.DataFrame([{"scheme": scheme, **row} for scheme, report in reports.items() for row in report["lengths"]])
    cells = st.columns(len(files) + 1)
    with cells[0]:
        table_download(table, chart_filename("reverse", "position-schemes"), key="errors_schemes_csv")
    for cell, scheme in zip(cells[1:], files):
        if cell.button(t("errors.schemes.activate", scheme=SCHEMES.get(scheme, scheme)), key=f"errors_open_{scheme}",
                       on_click=callback(registry.open_position_model), args=(scheme,),
                       help=t("errors.schemes.activate_help")):
            st.rerun()  # the whole page: the sidebar and the sections above show the new active model
    view.sync_url()


def main() -> None:
    view = ERRORS.view()
    notes = intro()
    key, bundle = require_model()
    settings(view)
    version = registry.version(key)
    try:
        with st.spinner(t("errors.running")):
            analysis = decodes.errors(key, version, view.get("samples"), view.get("seed"))
    except ValueError as exc:  # BudgetError, or inputs longer than the model's positions
        st.error(t("errors.cannot", error=literal(str(exc))), icon=":material/error:")
        finish(view, notes)
        return
    try:
        trained = trained_lengths(bundle.task)
    except LengthError:
        trained = None
    if analysis.samples < view.get("samples"):
        st.caption(t("errors.only", n=analysis.samples))
    summary(analysis)
    charts(bundle.task.name, analysis, trained)
    failure_table(key, bundle.task.name, analysis)
    st.divider()
    by_length(view, key, version, bundle)
    st.divider()
    position_schemes(view)
    finish(view, notes)


main()
