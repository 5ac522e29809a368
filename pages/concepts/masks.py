"""Masks: a padded batch as the active model sees it, the padding and causal masks taken from the trace of a
real forward pass, what masking does to the scores, and what the decoder does without its causal mask."""

from __future__ import annotations

import pandas as pd
import streamlit as st
from streamlit.delta_generator import DeltaGenerator

from ui import decodes, display
from ui import model_registry as registry
from ui.code_links import code_link
from ui.display import HALF_WIDTH as HALF
from ui.failure import fragment
from ui.markdown import literal
from ui.state import View
from ui.tables.masks import GREEDY, KINDS, MASKS, TARGETS
from ui.widgets import finish, header, layer_or_head, require_model
from transformer import charts
from transformer.charts.export import chart_filename, without_masked
from transformer.analysis.batch_size import MAX_BATCH, MIN_BATCH
from transformer.analysis.masked_batch import (
    MaskedBatch, check_sources, greedy_targets, masked_batch, varied_lengths, weight_above_diagonal,
)
from transformer.network.masks import subsequent_mask
from transformer.network.special_tokens import PAD
from transformer.i18n import Texts, t

TARGET_CHOICES = Texts({"correct": "masks.target.correct", GREEDY: "masks.target.greedy"})


def traced(key: str, version: int, sources: tuple[str, ...], targets_from: str, causal: bool) -> MaskedBatch:
    """The batch through one traced pass of model `key` (at `registry.version` `version`), kept per model,
    inputs and options in the decodes' byte-bounded cache: the result is frozen and only ever read."""
    with st.spinner(t("masks.running")):
        return decodes.memo("masked_batch", _traced, key, version, sources, targets_from, causal)


def _traced(key: str, version: int, sources: tuple[str, ...], targets_from: str, causal: bool) -> MaskedBatch:
    bundle = registry.bundle_for(key)
    if targets_from == GREEDY:
        targets = greedy_targets(bundle.model, bundle.tokenizer, list(sources))
    else:
        check_sources(bundle.model, bundle.tokenizer, list(sources))  # its messages before the task's
        targets = [bundle.task.target(s) for s in sources]
    return masked_batch(bundle.model, bundle.tokenizer, list(zip(sources, targets)), causal)


def labels(batch: MaskedBatch, row: int) -> tuple[list[str], list[str]]:
    """(encoder labels, decoder labels) of one batch row, padding included."""
    return charts.token_labels(batch.src_pieces[row]), charts.token_labels(batch.tgt_pieces[row])


def row_name(batch: MaskedBatch, row: int) -> str:
    return f"{t('charts.seq', n=row + 1)}: {batch.sources[row]}"


def head_title(kind: str, layer: int, head: int) -> str:
    """A title short enough for half the page: "Decoder self · layer 1 · head 2"; charts.with_title_line adds
    what the chart shows on a second line."""
    return f"{charts.KIND_SHORT[kind]} · {t('charts.layer', n=layer + 1)} · {t('charts.head', n=head + 1)}"


def by_length(batch: MaskedBatch) -> list[int]:
    """Batch rows from the shortest input to the longest."""
    return sorted(range(len(batch.sources)), key=lambda b: len(batch.sources[b]))


# ------------------------------------------------------------------------------------- the view's numbers
def index(view: View, name: str, count: int, what: str) -> int:
    """The 0-based layer or head of 1-based prop `name` (`what`: the catalog key of what the model has only `n` of);
    one the model lacks goes back to the default."""
    value = view.get(name)
    if value > count:
        view.refuse(name, t(what, n=count))
        value = view.get(name)
    return value - 1


def row(view: View, name: str, batch: MaskedBatch, default: int) -> int:
    """The 0-based batch row of 1-based prop `name` (None: `default`); one past the batch goes back to it."""
    value = view.get(name)
    if value is not None and value > len(batch.sources):
        view.refuse(name, t("masks.only_rows", n=len(batch.sources)))
        value = None
    return default if value is None else value - 1


def pick_row(view: View, name: str, column, label: str, batch: MaskedBatch, value: int) -> int:
    """A selectbox over the batch's rows, named by their inputs, bound to prop `name` (1-based)."""
    return view.widget(name, column.selectbox, label, range(len(batch.sources)),
                       format_func=lambda b: row_name(batch, b), to_widget=lambda _: value,
                       from_widget=lambda b: b + 1)


# ------------------------------------------------------------------------------------------------ sections
def intro() -> DeltaGenerator:
    notes = header(t("app.page.masks"))
    st.markdown(t("masks.intro"))
    st.latex(r"\operatorname{Attention}(Q,K,V)=\operatorname{softmax}\!\Big(\frac{QK^{\top}}{\sqrt{d_k}}+M\Big)V,"
             r"\qquad M_{ij}=\begin{cases}0 & " + t("masks.formula_may") + r"\\"
             r"-\infty & " + t("masks.formula_masked") + r"\end{cases}")
    return notes


def batch_of(view: View, key: str, bundle) -> tuple[str, str, MaskedBatch | None, str]:
    """(inputs text, targets choice, the traced batch, "") or (..., None, the library's message). Inputs from
    a link that cannot form a batch give way to the default inputs, with a note."""
    text = view.get("inputs")
    text = "\n".join(varied_lengths(bundle.task.examples())) if text is None else text
    sources = tuple(line.strip() for line in text.splitlines() if line.strip())
    targets_from = view.get("targets")
    try:
        return text, targets_from, traced(key, registry.version(key), sources, targets_from, True), ""
    except ValueError as exc:  # BatchError, TokenizerError, TaskError: the library's own message
        if not view.from_link("inputs"):
            return text, targets_from, None, str(exc)
        view.refuse("inputs", t("masks.no_batch_link", error=exc))
        return batch_of(view, key, bundle)


def inputs_panel(view: View, bundle, text: str) -> None:
    left, right = st.columns([3, 2])
    with left:
        view.widget("inputs", st.text_area,
                    t("masks.inputs", task=bundle.task.title, lo=MIN_BATCH, hi=MAX_BATCH),
                    to_widget=lambda _: text, height=130, max_chars=400, help=t("masks.inputs_help"))
    with right:
        view.widget("targets", st.radio, t("masks.targets"), TARGETS, format_func=TARGET_CHOICES.get,
                    help=t("masks.targets_help"))


def padded_batch(batch: MaskedBatch, targets_from: str, stem: str) -> None:
    B, S = batch.src.shape
    st.header(t("masks.batch.header"), divider="gray")
    st.markdown(t("masks.batch.text", targets=TARGET_CHOICES[targets_from], src=S, tgt=batch.tgt_in.shape[1]))
    for name, ids, pieces, part in ((t("masks.batch.source"), batch.src, batch.src_pieces, "src"),
                                    (t("masks.batch.target"), batch.tgt_in, batch.tgt_pieces, "tgt")):
        fig = charts.padded_batch_heatmap(ids.numpy(), pieces,
                                          t("masks.batch.title", name=name, rows=B, positions=ids.shape[1]))
        display.show_figure(fig, f"{stem}_batch-{part}", key=f"masks-batch-{part}", width="content")


@fragment
def the_masks(view: View, batch: MaskedBatch, n_heads: int, stem: str) -> None:
    """The masks read back from the trace: the source padding rows, and one row's decoder masks."""
    B, S = batch.src.shape
    T = batch.tgt_in.shape[1]
    st.header(t("masks.masks.header"), divider="gray")
    enc_record = batch.trace.attention["encoder_self"][0]
    dec_record = batch.trace.attention["decoder_self"][0]
    cross_record = batch.trace.attention["cross"][0]
    st.markdown(t("masks.masks.text", src_mask=tuple(batch.src_mask.shape), S=S, heads=n_heads,
                  enc=tuple(enc_record.mask.shape), T=T, cross=tuple(cross_record.mask.shape),
                  tgt_mask=tuple(batch.tgt_mask.shape), dec=tuple(dec_record.mask.shape)))
    pad_rows = enc_record.mask[:, 0, 0, :].numpy()
    positions = [f"{i:02d}" for i in range(S)]
    rows = [t("charts.seq", n=b + 1) for b in range(B)]
    fig = charts.mask_heatmap(pad_rows, rows, positions, t("masks.masks.source_title", rows=B, keys=S))
    display.heatmap(fig, pad_rows, rows, positions, f"{stem}_source-padding", "masks-src-pad")
    code_link("masks", text=batch.sources[0])

    b = pick_row(view, "row", st.columns(2)[0], t("masks.masks.row"), batch,
                 row(view, "row", batch, by_length(batch)[0]))
    src_labels, tgt_labels = labels(batch, b)
    tgt_padding = batch.tgt_in[b] != PAD
    causal = subsequent_mask(T)[0, 0].numpy()
    combined = dec_record.mask[b, 0].numpy()
    cross_mask = cross_record.mask[b, 0].numpy()
    pad_part = tgt_padding[None, :].expand(T, T).numpy()
    pad_fig = charts.mask_heatmap(pad_part, tgt_labels, tgt_labels, t("masks.masks.target_padding", n=b + 1))
    causal_fig = charts.mask_heatmap(causal, tgt_labels, tgt_labels, t("masks.masks.causal"))
    c1, c2 = display.fitted_row("masks_parts", [display.label_width(f) for f in (pad_fig, causal_fig)])
    with c1:
        display.heatmap(pad_fig, pad_part, tgt_labels, tgt_labels, f"{stem}_target-padding-row{b + 1}",
                        "masks-tgt-pad", HALF)
    with c2:
        display.heatmap(causal_fig, causal, tgt_labels, tgt_labels, f"{stem}_causal", "masks-causal", HALF)
    combined_fig = charts.mask_heatmap(combined, tgt_labels, tgt_labels, t("masks.masks.combined", n=b + 1))
    cross_fig = charts.mask_heatmap(cross_mask, tgt_labels, src_labels, t("masks.masks.cross", n=b + 1))
    c3, c4 = display.fitted_row("masks_traced", [display.label_width(f) for f in (combined_fig, cross_fig)])
    with c3:
        display.heatmap(combined_fig, combined, tgt_labels, tgt_labels, f"{stem}_target-row{b + 1}", "masks-combined",
                        HALF)
        same = bool((combined == (pad_part & causal)).all())
        st.caption(t("masks.masks.same" if same else "masks.masks.differs"))
    with c4:
        display.heatmap(cross_fig, cross_mask, tgt_labels, src_labels, f"{stem}_cross-row{b + 1}", "masks-cross", HALF)
        st.caption(t("masks.masks.cross_caption"))
    code_link("masks", text=batch.sources[b])
    view.sync_url()


# what the recorded self-attention scores hold for models whose positions act inside attention
SCORE_NOTES = Texts({"rope": "masks.scores.rope", "alibi": "masks.scores.alibi"})


@fragment
def scores_and_weights(view: View, batch: MaskedBatch, cfg, task_name: str) -> None:
    st.header(t("masks.scores.header"), divider="gray")
    st.markdown(t("masks.scores.text"))
    p1, p2, p3, p4 = st.columns([6, 2, 2, 3])  # the kind's longest name, "Decoder self-attention (masked)"
    kind = view.widget("kind", p1.selectbox, t("masks.attention"), KINDS, format_func=charts.KIND_TITLES.get)
    layers = cfg.n_enc_layers if kind == "encoder_self" else cfg.n_dec_layers
    what = "masks.only_encoder_layers" if kind == "encoder_self" else "masks.only_decoder_layers"
    layer = layer_or_head(view, "layer", layers, index(view, "layer", layers, what), p2)
    head = layer_or_head(view, "head", cfg.n_heads, index(view, "head", cfg.n_heads, "masks.only_heads"), p3)
    b = pick_row(view, "score_row", p4, t("masks.row"), batch,
                 row(view, "score_row", batch, by_length(batch)[len(batch.sources) // 2]))
    record = batch.trace.attention[kind][layer]
    enc, dec = labels(batch, b)
    q_labels, k_labels = {"encoder_self": (enc, enc), "decoder_self": (dec, dec), "cross": (dec, enc)}[kind]
    scores, mask, weights = (getattr(record, f)[b, head].numpy() for f in ("scores", "mask", "weights"))
    if kind != "cross" and cfg.positional in SCORE_NOTES:
        st.caption(SCORE_NOTES[cfg.positional])
    scores_fig = charts.with_title_line(charts.scores_heatmap(scores, mask, q_labels, k_labels,
                                                              head_title(kind, layer, head)),
                                         t("masks.scores.scores_line", n=b + 1))
    weights_fig = charts.with_title_line(charts.attention_heatmap(weights, q_labels, k_labels,
                                                                  head_title(kind, layer, head), mask=mask),
                                         t("masks.scores.weights_line", n=b + 1))
    c1, c2 = display.fitted_row("masks_scores", [display.label_width(f) for f in (scores_fig, weights_fig)])
    with c1:
        display.heatmap(scores_fig, without_masked(scores, mask), q_labels, k_labels,
                        chart_filename(task_name, f"{kind}-scores-row{b + 1}", layer, head), "masks-scores", HALF)
    with c2:
        display.heatmap(weights_fig, weights, q_labels, k_labels,
                        chart_filename(task_name, f"{kind}-weights-row{b + 1}", layer, head), "masks-weights", HALF)
    code_link("attention", text=batch.sources[b], kind=kind, layer=layer, head=head)
    view.sync_url()


def predictions_table(tokenizer, causal: MaskedBatch, open_: MaskedBatch, b: int) -> pd.DataFrame:
    """Scored positions of row b: what the decoder read, should predict, and predicted with / without."""
    scored = causal.scored[b].nonzero()[:, 0].tolist()
    with_mask, without = causal.predictions[b], open_.predictions[b]
    return pd.DataFrame({
        t("masks.table.position"): scored,
        t("masks.table.reads"): [causal.tgt_pieces[b][i] for i in scored],
        t("masks.table.should"): [tokenizer.piece(int(causal.tgt_out[b, i])) for i in scored],
        t("masks.table.with"): [tokenizer.piece(int(with_mask[i])) for i in scored],
        t("masks.table.without"): [tokenizer.piece(int(without[i])) for i in scored],
        t("masks.table.changed"): [t("masks.table.changed_mark") if with_mask[i] != without[i] else ""
                                   for i in scored],
    })


@fragment
def without_causal(view: View, key: str, bundle, batch: MaskedBatch, targets_from: str) -> None:
    cfg, task_name = bundle.config, bundle.task.name
    st.header(t("masks.open.header"), divider="gray")
    st.markdown(t("masks.open.text"))
    if not view.widget("no_causal", st.toggle, t("masks.open.toggle")):
        st.info(t("masks.open.info"), icon=":material/visibility:")
        view.sync_url()
        return
    open_ = traced(key, registry.version(key), tuple(batch.sources), targets_from, False)
    p1, p2, p3 = st.columns(3)
    layer = layer_or_head(view, "open_layer", cfg.n_dec_layers,
                          index(view, "open_layer", cfg.n_dec_layers, "masks.only_decoder_layers"), p1, "layer")
    head = layer_or_head(view, "open_head", cfg.n_heads, index(view, "open_head", cfg.n_heads, "masks.only_heads"),
                         p2, "head")
    b = pick_row(view, "open_row", p3, t("masks.row"), batch, row(view, "open_row", batch, by_length(batch)[-1]))
    _, dec = labels(batch, b)
    records = [(run, name, run.trace.attention["decoder_self"][layer])
               for run, name in ((batch, t("masks.open.causal_line", n=b + 1)),
                                 (open_, t("masks.open.open_line", n=b + 1)))]
    figs = [charts.with_title_line(charts.attention_heatmap(record.weights[b, head].numpy(), dec, dec,
                                                            head_title("decoder_self", layer, head),
                                                            mask=record.mask[b, head].numpy()), name)
            for _, name, record in records]
    for col, fig, (run, _, record) in zip(display.fitted_row("masks_open", list(map(display.label_width, figs))),
                                          figs, records):
        real_rows = run.tgt_in[b] != PAD
        later = float(weight_above_diagonal(record.weights[b, head])[real_rows].mean())
        with col:
            stem = chart_filename(task_name, f"decoder_self-{'causal' if run.causal else 'no-causal'}-row{b + 1}",
                                  layer, head)
            display.heatmap(fig, record.weights[b, head].numpy(), dec, dec, stem, f"masks-open-{run.causal}", HALF)
            st.caption(t("masks.open.above", share=later))
    code_link("masks", text=batch.sources[b], kind="decoder_self", layer=layer, head=head)
    changed = (batch.predictions != open_.predictions) & batch.scored
    st.markdown(t("masks.open.predictions", n=b + 1, changed=int(changed[b].sum()), scored=int(batch.scored[b].sum()),
                  all_changed=int(changed.sum()), all_scored=int(batch.scored.sum())))
    table = predictions_table(bundle.tokenizer, batch, open_, b)
    mark = t("masks.table.changed")
    st.dataframe(table.style.apply(lambda r: ["background-color: #FBE3C5" if r[mark] else ""] * len(r), axis=1),
                 hide_index=True, width="content", row_height=35, height=35 * (len(table) + 1) + 3,
                 column_config={mark: st.column_config.TextColumn(width=96)})
    view.sync_url()


def main() -> None:
    view = MASKS.view()
    notes = intro()
    key, bundle = require_model()
    text, targets_from, batch, error = batch_of(view, key, bundle)
    inputs_panel(view, bundle, text)
    if batch is None:
        st.error(t("masks.no_batch", error=literal(str(error))), icon=":material/error:")
        finish(view, notes)
        return
    stem = f"{bundle.task.name}_masks"
    padded_batch(batch, targets_from, stem)
    the_masks(view, batch, bundle.config.n_heads, stem)
    scores_and_weights(view, batch, bundle.config, bundle.task.name)
    without_causal(view, key, bundle, batch, targets_from)
    finish(view, notes)


main()
