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
from ui.markdown import literal
from ui.state import View
from ui.tables.masks import GREEDY, KINDS, MASKS, TARGETS
from ui.widgets import finish, header, require_model
from transformer import charts
from transformer.charts.export import chart_filename, without_masked
from transformer.analysis.masked_batch import (
    MAX_BATCH, MIN_BATCH, MaskedBatch, check_sources, greedy_targets, masked_batch, varied_lengths,
    weight_above_diagonal,
)
from transformer.network.masks import subsequent_mask
from transformer.network.special_tokens import PAD

TARGET_CHOICES = {"correct": "the task's correct answer (as in training)", GREEDY: "the model's own greedy output"}
SHORT_KIND = {"encoder_self": "Encoder self", "decoder_self": "Decoder self", "cross": "Cross"}


def traced(key: str, version: int, sources: tuple[str, ...], targets_from: str, causal: bool) -> MaskedBatch:
    """The batch through one traced pass of model `key` (at `registry.version` `version`), kept per model,
    inputs and options in the decodes' byte-bounded cache: the result is frozen and only ever read."""
    with st.spinner("Running the model over the batch…"):
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
    return f"seq {row + 1}: {batch.sources[row]}"


def head_title(kind: str, layer: int, head: int) -> str:
    """A title short enough for half the page: "Decoder self · layer 1 · head 2"; charts.with_title_line adds
    what the chart shows on a second line."""
    return f"{SHORT_KIND[kind]} · layer {layer + 1} · head {head + 1}"


def by_length(batch: MaskedBatch) -> list[int]:
    """Batch rows from the shortest input to the longest."""
    return sorted(range(len(batch.sources)), key=lambda b: len(batch.sources[b]))


# ------------------------------------------------------------------------------------- the view's numbers
def index(view: View, name: str, count: int, what: str) -> int:
    """The 0-based layer or head of 1-based prop `name`; one the model lacks goes back to the default."""
    value = view.get(name)
    if value > count:
        view.refuse(name, f"this model has only {count} {what}")
        value = view.get(name)
    return value - 1


def row(view: View, name: str, batch: MaskedBatch, default: int) -> int:
    """The 0-based batch row of 1-based prop `name` (None: `default`); one past the batch goes back to it."""
    value = view.get(name)
    if value is not None and value > len(batch.sources):
        view.refuse(name, f"the batch has only {len(batch.sources)} rows")
        value = None
    return default if value is None else value - 1


def pick_index(view: View, name: str, column, label: str, count: int, value: int) -> int:
    """A selectbox over `count` layers or heads, shown 1-based, bound to prop `name`."""
    return view.widget(name, column.selectbox, label, range(count), format_func=lambda i: f"{label.lower()} {i + 1}",
                       to_widget=lambda _: value, from_widget=lambda i: i + 1)


def pick_row(view: View, name: str, column, label: str, batch: MaskedBatch, value: int) -> int:
    """A selectbox over the batch's rows, named by their inputs, bound to prop `name` (1-based)."""
    return view.widget(name, column.selectbox, label, range(len(batch.sources)),
                       format_func=lambda b: row_name(batch, b), to_widget=lambda _: value,
                       from_widget=lambda b: b + 1)


# ------------------------------------------------------------------------------------------------ sections
def intro() -> DeltaGenerator:
    notes = header("Masks")
    st.markdown(
        "Sequences in a batch have different lengths, so the short ones are filled up with `<pad>` tokens. "
        "The **padding mask** stops every query from looking at those pads. In the decoder a second, **causal "
        "mask** stops position *t* from looking at later positions: in training the whole answer is fed in at "
        "once, and without it the decoder could simply read the token it is asked to predict. A masked score "
        "becomes −∞ before the softmax, so its weight is exactly 0."
    )
    st.latex(r"\operatorname{Attention}(Q,K,V)=\operatorname{softmax}\!\Big(\frac{QK^{\top}}{\sqrt{d_k}}+M\Big)V,"
             r"\qquad M_{ij}=\begin{cases}0 & \text{query } i \text{ may attend to key } j\\"
             r"-\infty & \text{masked}\end{cases}")
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
        view.refuse("inputs", f"they cannot form a batch for this model ({exc})")
        return batch_of(view, key, bundle)


def inputs_panel(view: View, bundle, text: str) -> None:
    left, right = st.columns([3, 2])
    with left:
        view.widget("inputs", st.text_area,
                    f"Inputs for the {bundle.task.title.lower()} model, one per line ({MIN_BATCH} to {MAX_BATCH})",
                    to_widget=lambda _: text, height=130, max_chars=400,
                    help="They are padded into one batch exactly as in training. Different lengths make the "
                    "padding visible.")
    with right:
        view.widget("targets", st.radio, "Teacher-forced decoder input", TARGETS, format_func=TARGET_CHOICES.get,
                    help="In training the decoder reads the right answer shifted by one (teacher forcing). You "
                    "can feed it the model's own greedy answer instead.")


def padded_batch(batch: MaskedBatch, targets_from: str, stem: str) -> None:
    B, S = batch.src.shape
    st.header("1 · The padded batch", divider="gray")
    st.markdown(
        f"The encoder reads each input followed by `</s>`; the decoder reads `<s>` followed by "
        f"{TARGET_CHOICES[targets_from]} and is trained to predict the same row shifted one to the left. The "
        f"longest row sets the width ({S} encoder positions, {batch.tgt_in.shape[1]} decoder positions); shorter "
        "rows are padded with `<pad>` (id 0)."
    )
    for name, ids, pieces, part in (("Encoder input (source)", batch.src, batch.src_pieces, "src"),
                                    ("Decoder input (target shifted right)", batch.tgt_in, batch.tgt_pieces, "tgt")):
        fig = charts.padded_batch_heatmap(ids.numpy(), pieces, f"{name} · {B} sequences × {ids.shape[1]} positions")
        display.show_figure(fig, f"{stem}_batch-{part}", key=f"masks-batch-{part}", width="content")


@st.fragment
def the_masks(view: View, batch: MaskedBatch, n_heads: int, stem: str) -> None:
    """The masks read back from the trace: the source padding rows, and one row's decoder masks."""
    B, S = batch.src.shape
    T = batch.tgt_in.shape[1]
    st.header("2 · The masks, as the model applied them", divider="gray")
    enc_record = batch.trace.attention["encoder_self"][0]
    dec_record = batch.trace.attention["decoder_self"][0]
    cross_record = batch.trace.attention["cross"][0]
    st.markdown(
        f"""Every mask below is read back from the trace of this forward pass (layer 1; all layers use the same one).
True (blue) means *may attend*.

- **Source padding mask**: built with shape `(batch, 1, 1, keys)` = `{tuple(batch.src_mask.shape)}`: one row of
  {S} keys per sequence. The two 1s broadcast: the same row serves all {n_heads} heads and every query, so the
  encoder's self-attention applied it as `{tuple(enc_record.mask.shape)}`, and the cross-attention, whose
  {T} queries come from the decoder, as `{tuple(cross_record.mask.shape)}`.
- **Target mask**: built with shape `(batch, 1, queries, keys)` = `{tuple(batch.tgt_mask.shape)}`: each of
  the {T} decoder queries gets its own row of keys (padding AND causal), broadcast over the {n_heads} heads only:
  `{tuple(dec_record.mask.shape)}` in the decoder's self-attention."""
    )
    pad_rows = enc_record.mask[:, 0, 0, :].numpy()
    positions = [f"{t:02d}" for t in range(S)]
    rows = [f"seq {b + 1}" for b in range(B)]
    fig = charts.mask_heatmap(pad_rows, rows, positions, f"Source padding mask · {B} sequences × {S} keys")
    display.heatmap(fig, pad_rows, rows, positions, f"{stem}_source-padding", "masks-src-pad")
    code_link("masks", text=batch.sources[0])

    b = pick_row(view, "row", st.columns(2)[0], "Batch row for the decoder masks", batch,
                 row(view, "row", batch, by_length(batch)[0]))
    src_labels, tgt_labels = labels(batch, b)
    tgt_padding = batch.tgt_in[b] != PAD
    causal = subsequent_mask(T)[0, 0].numpy()
    combined = dec_record.mask[b, 0].numpy()
    cross_mask = cross_record.mask[b, 0].numpy()
    pad_part = tgt_padding[None, :].expand(T, T).numpy()
    pad_fig = charts.mask_heatmap(pad_part, tgt_labels, tgt_labels, f"Target padding · seq {b + 1}")
    causal_fig = charts.mask_heatmap(causal, tgt_labels, tgt_labels, "AND causal (subsequent) mask")
    c1, c2 = display.fitted_row("masks_parts", [display.label_width(f) for f in (pad_fig, causal_fig)])
    with c1:
        display.heatmap(pad_fig, pad_part, tgt_labels, tgt_labels, f"{stem}_target-padding-row{b + 1}",
                        "masks-tgt-pad", HALF)
    with c2:
        display.heatmap(causal_fig, causal, tgt_labels, tgt_labels, f"{stem}_causal", "masks-causal", HALF)
    combined_fig = charts.mask_heatmap(combined, tgt_labels, tgt_labels, f"= target mask in the trace · seq {b + 1}")
    cross_fig = charts.mask_heatmap(cross_mask, tgt_labels, src_labels,
                                    f"Cross-attention mask in the trace · seq {b + 1}")
    c3, c4 = display.fitted_row("masks_traced", [display.label_width(f) for f in (combined_fig, cross_fig)])
    with c3:
        display.heatmap(combined_fig, combined, tgt_labels, tgt_labels, f"{stem}_target-row{b + 1}", "masks-combined",
                        HALF)
        same = bool((combined == (pad_part & causal)).all())
        st.caption(("✓ equals" if same else "✗ differs from") + " padding AND causal, cell by cell.")
    with c4:
        display.heatmap(cross_fig, cross_mask, tgt_labels, src_labels, f"{stem}_cross-row{b + 1}", "masks-cross", HALF)
        st.caption("The source padding row, repeated for every decoder query: no decoder position reads a source "
                   "pad.")
    code_link("masks", text=batch.sources[b])
    view.sync_url()


# what the recorded self-attention scores hold for models whose positions act inside attention
SCORE_NOTES = {"rope": "This model uses RoPE: these are the scores of its rotated queries and keys "
                       "(the positional-encoding page shows the rotation).",
               "alibi": "This model uses ALiBi: these scores include the head's bias −slope·|i − j| "
                        "(the positional-encoding page shows each head's)."}


@st.fragment
def scores_and_weights(view: View, batch: MaskedBatch, cfg, task_name: str) -> None:
    st.header("3 · Scores before the softmax, weights after", divider="gray")
    st.markdown("Pick one head. On the left, the raw scores q·k/√d; masked cells are drawn grey with ×, "
                "because their score is replaced by −∞. On the right, the softmax of each row over the cells "
                "that remain: every row sums to 1 and masked cells get exactly 0.")
    p1, p2, p3, p4 = st.columns(4)
    kind = view.widget("kind", p1.selectbox, "Attention", KINDS, format_func=charts.KIND_TITLES.get)
    layers = cfg.n_enc_layers if kind == "encoder_self" else cfg.n_dec_layers
    what = {"encoder_self": "encoder layer(s)"}.get(kind, "decoder layer(s)")
    layer = pick_index(view, "layer", p2, "Layer", layers, index(view, "layer", layers, what))
    head = pick_index(view, "head", p3, "Head", cfg.n_heads, index(view, "head", cfg.n_heads, "heads"))
    b = pick_row(view, "score_row", p4, "Batch row", batch,
                 row(view, "score_row", batch, by_length(batch)[len(batch.sources) // 2]))
    record = batch.trace.attention[kind][layer]
    enc, dec = labels(batch, b)
    q_labels, k_labels = {"encoder_self": (enc, enc), "decoder_self": (dec, dec), "cross": (dec, enc)}[kind]
    scores, mask, weights = (getattr(record, f)[b, head].numpy() for f in ("scores", "mask", "weights"))
    if kind != "cross" and cfg.positional in SCORE_NOTES:
        st.caption(SCORE_NOTES[cfg.positional])
    scores_fig = charts.with_title_line(charts.scores_heatmap(scores, mask, q_labels, k_labels,
                                                              head_title(kind, layer, head)), f"scores, seq {b + 1}")
    weights_fig = charts.with_title_line(charts.attention_heatmap(weights, q_labels, k_labels,
                                                                  head_title(kind, layer, head), mask=mask),
                                         f"weights, seq {b + 1}")
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
        "position": scored,
        "decoder reads": [causal.tgt_pieces[b][t] for t in scored],
        "should predict": [tokenizer.piece(int(causal.tgt_out[b, t])) for t in scored],
        "with causal mask": [tokenizer.piece(int(with_mask[t])) for t in scored],
        "without it": [tokenizer.piece(int(without[t])) for t in scored],
        "changed": ["✱ changed" if with_mask[t] != without[t] else "" for t in scored],
    })


@st.fragment
def without_causal(view: View, key: str, bundle, batch: MaskedBatch, targets_from: str) -> None:
    cfg, task_name = bundle.config, bundle.task.name
    st.header("4 · Remove the causal mask", divider="gray")
    st.markdown("Switch it off and the same model runs again over the same batch with the padding part of "
                "the target mask only. Now each decoder position also sees the tokens after it, including the "
                "one it should predict. The model was never trained like that, so its predictions change.")
    if not view.widget("no_causal", st.toggle, "Remove the causal mask"):
        st.info("Turn the switch on to re-run the model without the causal mask.", icon=":material/visibility:")
        view.sync_url()
        return
    open_ = traced(key, registry.version(key), tuple(batch.sources), targets_from, False)
    p1, p2, p3 = st.columns(3)
    layer = pick_index(view, "open_layer", p1, "Layer", cfg.n_dec_layers,
                       index(view, "open_layer", cfg.n_dec_layers, "decoder layer(s)"))
    head = pick_index(view, "open_head", p2, "Head", cfg.n_heads, index(view, "open_head", cfg.n_heads, "heads"))
    b = pick_row(view, "open_row", p3, "Batch row", batch, row(view, "open_row", batch, by_length(batch)[-1]))
    _, dec = labels(batch, b)
    records = [(run, name, run.trace.attention["decoder_self"][layer])
               for run, name in ((batch, f"causal, seq {b + 1}"), (open_, f"no causal mask, seq {b + 1}"))]
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
            st.caption(f"Weight above the diagonal: each real (non-pad) query puts on average **{later:.0%}** of "
                       "its attention on later tokens.")
    code_link("masks", text=batch.sources[b], kind="decoder_self", layer=layer, head=head)
    changed = (batch.predictions != open_.predictions) & batch.scored
    st.markdown(f"**Predictions of seq {b + 1}** ({int(changed[b].sum())} of {int(batch.scored[b].sum())} "
                f"positions changed; {int(changed.sum())} of {int(batch.scored.sum())} in the whole batch)")
    table = predictions_table(bundle.tokenizer, batch, open_, b)
    st.dataframe(table.style.apply(lambda r: ["background-color: #FBE3C5" if r["changed"] else ""] * len(r), axis=1),
                 hide_index=True, width="content", row_height=35, height=35 * (len(table) + 1) + 3,
                 column_config={"changed": st.column_config.TextColumn(width=96)})
    view.sync_url()


def main() -> None:
    view = MASKS.view()
    notes = intro()
    key, bundle = require_model()
    text, targets_from, batch, error = batch_of(view, key, bundle)
    inputs_panel(view, bundle, text)
    if batch is None:
        st.error(f"These inputs cannot form a batch: {literal(str(error))}", icon=":material/error:")
        finish(view, notes)
        return
    stem = f"{bundle.task.name}_masks"
    padded_batch(batch, targets_from, stem)
    the_masks(view, batch, bundle.config.n_heads, stem)
    scores_and_weights(view, batch, bundle.config, bundle.task.name)
    without_causal(view, key, bundle, batch, targets_from)
    finish(view, notes)


main()
