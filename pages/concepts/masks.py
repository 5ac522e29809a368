"""Masks: a padded batch as the active model sees it, the padding and causal masks taken from the trace of a
real forward pass, what masking does to the scores, and what the decoder does without its causal mask."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from ui import concept_ui, display
from ui import model_registry as registry
from transformer import charts
from transformer.export import chart_filename
from transformer.masked_batch import (
    MAX_BATCH, MIN_BATCH, MaskedBatch, check_sources, greedy_targets, masked_batch, weight_above_diagonal,
)
from transformer.masks import subsequent_mask
from transformer.special_tokens import PAD

CORRECT, GREEDY = "correct", "greedy"
TARGET_CHOICES = {CORRECT: "the task's correct answer (as in training)", GREEDY: "the model's own greedy output"}
KINDS = ("decoder_self", "encoder_self", "cross")
SHORT_KIND = {"encoder_self": "Encoder self", "decoder_self": "Decoder self", "cross": "Cross"}
HALF = concept_ui.HALF_WIDTH


@st.cache_resource(max_entries=32, show_spinner="Running the model over the batch…")
def traced(key: str, version: int, sources: tuple[str, ...], targets_from: str, causal: bool) -> MaskedBatch:
    """The batch through one traced pass of model `key` (at `registry.version` `version`), cached per model,
    inputs and options. A resource cache (never pickled, so immune to module reloads): the result is frozen
    and only ever read."""
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


def head_title(kind: str, layer: int, head: int, what: str) -> str:
    """A title short enough for half the page: "Decoder self · layer 1 · head 2 · scores, seq 3"."""
    return f"{SHORT_KIND[kind]} · layer {layer + 1} · head {head + 1} · {what}"


def by_length(batch: MaskedBatch) -> list[int]:
    """Batch rows from the shortest input to the longest."""
    return sorted(range(len(batch.sources)), key=lambda b: len(batch.sources[b]))


st.title("Masks")
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

key, bundle = concept_ui.active_model()
task, cfg = bundle.task, bundle.config

left, right = st.columns([3, 2])
with left:
    text = st.text_area(
        f"Inputs for the {task.title.lower()} model, one per line ({MIN_BATCH} to {MAX_BATCH})",
        "\n".join(concept_ui.varied_lengths(task.examples())), key=f"masks_inputs:{task.name}", height=130,
        help="They are padded into one batch exactly as in training. Different lengths make the padding visible.",
    )
with right:
    targets_from = st.radio(
        "Teacher-forced decoder input", list(TARGET_CHOICES), format_func=TARGET_CHOICES.get, key="masks_targets",
        help="In training the decoder reads the right answer shifted by one (teacher forcing). You can feed it "
        "the model's own greedy answer instead.",
    )
sources = tuple(line.strip() for line in text.splitlines() if line.strip())
try:
    batch = traced(key, registry.version(key), sources, targets_from, True)
except ValueError as exc:  # BatchError, TokenizerError, TaskError: the library's own message
    st.error(f"These inputs cannot form a batch: {exc}", icon=":material/error:")
    st.stop()

B, S = batch.src.shape
T = batch.tgt_in.shape[1]
H = cfg.n_heads
filename_stem = f"{task.name}_masks"

# ----------------------------------------------------------------------------------------------- 1 batch
st.header("1 · The padded batch", divider="gray")
st.markdown(
    f"The encoder reads each input followed by `</s>`; the decoder reads `<s>` followed by "
    f"{TARGET_CHOICES[targets_from]} and is trained to predict the same row shifted one to the left. The "
    f"longest row sets the width ({S} encoder positions, {T} decoder positions); shorter rows are padded "
    f"with `<pad>` (id 0)."
)
for name, ids, pieces, part in (("Encoder input (source)", batch.src, batch.src_pieces, "src"),
                                ("Decoder input (target shifted right)", batch.tgt_in, batch.tgt_pieces, "tgt")):
    fig = charts.padded_batch_heatmap(ids.numpy(), pieces, f"{name} · {B} sequences × {ids.shape[1]} positions")
    display.show_figure(fig, f"{filename_stem}_batch-{part}", key=f"masks-batch-{part}", width="content")

# ----------------------------------------------------------------------------------------------- 2 masks
st.header("2 · The masks, as the model applied them", divider="gray")
enc_record = batch.trace.attention["encoder_self"][0]
dec_record = batch.trace.attention["decoder_self"][0]
cross_record = batch.trace.attention["cross"][0]
st.markdown(
    f"""Every mask below is read back from the trace of this forward pass (layer 1; all layers use the same one).
True (blue) means *may attend*.

- **Source padding mask**: built with shape `(batch, 1, 1, keys)` = `{tuple(batch.src_mask.shape)}`: one row of
  {S} keys per sequence. The two 1s broadcast: the same row serves all {H} heads and every query, so the
  encoder's self-attention applied it as `{tuple(enc_record.mask.shape)}`, and the cross-attention, whose
  {T} queries come from the decoder, as `{tuple(cross_record.mask.shape)}`.
- **Target mask**: built with shape `(batch, 1, queries, keys)` = `{tuple(batch.tgt_mask.shape)}`: each of
  the {T} decoder queries gets its own row of keys (padding AND causal), broadcast over the {H} heads only:
  `{tuple(dec_record.mask.shape)}` in the decoder's self-attention."""
)
pad_rows = enc_record.mask[:, 0, 0, :].numpy()
positions = [f"{t:02d}" for t in range(S)]
rows = [f"seq {b + 1}" for b in range(B)]
fig = charts.mask_heatmap(pad_rows, rows, positions, f"Source padding mask · {B} sequences × {S} keys")
concept_ui.heatmap(fig, pad_rows, rows, positions, f"{filename_stem}_source-padding", "masks-src-pad")

row = st.selectbox("Batch row for the decoder masks", range(B), format_func=lambda b: row_name(batch, b),
                   key="masks_row", index=by_length(batch)[0])
src_labels, tgt_labels = labels(batch, row)
tgt_padding = batch.tgt_in[row] != PAD
causal = subsequent_mask(T)[0, 0].numpy()
combined = dec_record.mask[row, 0].numpy()
cross_mask = cross_record.mask[row, 0].numpy()
c1, c2 = st.columns(2)
with c1:
    pad_part = tgt_padding[None, :].expand(T, T).numpy()
    fig = charts.mask_heatmap(pad_part, tgt_labels, tgt_labels, f"Target padding · seq {row + 1}")
    concept_ui.heatmap(fig, pad_part, tgt_labels, tgt_labels, f"{filename_stem}_target-padding-row{row + 1}",
                       "masks-tgt-pad", HALF)
with c2:
    fig = charts.mask_heatmap(causal, tgt_labels, tgt_labels, "AND causal (subsequent) mask")
    concept_ui.heatmap(fig, causal, tgt_labels, tgt_labels, f"{filename_stem}_causal", "masks-causal", HALF)
c3, c4 = st.columns(2)
with c3:
    fig = charts.mask_heatmap(combined, tgt_labels, tgt_labels, f"= target mask in the trace · seq {row + 1}")
    concept_ui.heatmap(fig, combined, tgt_labels, tgt_labels, f"{filename_stem}_target-row{row + 1}",
                       "masks-combined", HALF)
    same = bool((combined == (pad_part & causal)).all())
    st.caption(("✓ equals" if same else "✗ differs from") + " padding AND causal, cell by cell.")
with c4:
    fig = charts.mask_heatmap(cross_mask, tgt_labels, src_labels, f"Cross-attention mask in the trace · seq {row + 1}")
    concept_ui.heatmap(fig, cross_mask, tgt_labels, src_labels, f"{filename_stem}_cross-row{row + 1}",
                       "masks-cross", HALF)
    st.caption("The source padding row, repeated for every decoder query: no decoder position reads a source pad.")


# ----------------------------------------------------------------------------------------------- 3 scores
@st.fragment
def scores_and_weights(batch: MaskedBatch) -> None:
    st.header("3 · Scores before the softmax, weights after", divider="gray")
    st.markdown("Pick one head. On the left, the raw scores q·k/√d; masked cells are drawn grey with ×, "
                "because their score is replaced by −∞. On the right, the softmax of each row over the cells "
                "that remain: every row sums to 1 and masked cells get exactly 0.")
    p1, p2, p3, p4 = st.columns(4)
    kind = p1.selectbox("Attention", KINDS, format_func=charts.KIND_TITLES.get, key="masks_kind")
    layers = cfg.n_enc_layers if kind == "encoder_self" else cfg.n_dec_layers
    layer = p2.selectbox("Layer", range(layers), format_func=lambda i: f"layer {i + 1}", key="masks_layer")
    head = p3.selectbox("Head", range(H), format_func=lambda i: f"head {i + 1}", key="masks_head")
    b = p4.selectbox("Batch row", range(B), format_func=lambda i: row_name(batch, i), key="masks_score_row",
                     index=by_length(batch)[B // 2])
    record = batch.trace.attention[kind][layer]
    enc, dec = labels(batch, b)
    q_labels, k_labels = {"encoder_self": (enc, enc), "decoder_self": (dec, dec), "cross": (dec, enc)}[kind]
    scores, mask, weights = (getattr(record, f)[b, head].numpy() for f in ("scores", "mask", "weights"))
    c1, c2 = st.columns(2)
    with c1:
        fig = charts.scores_heatmap(scores, mask, q_labels, k_labels,
                                    head_title(kind, layer, head, f"scores, seq {b + 1}"))
        concept_ui.heatmap(fig, scores, q_labels, k_labels,
                           chart_filename(task.name, f"{kind}-scores-row{b + 1}", layer, head), "masks-scores", HALF)
    with c2:
        fig = charts.attention_heatmap(weights, q_labels, k_labels,
                                       head_title(kind, layer, head, f"weights, seq {b + 1}"), mask=mask)
        concept_ui.heatmap(fig, weights, q_labels, k_labels,
                           chart_filename(task.name, f"{kind}-weights-row{b + 1}", layer, head), "masks-weights", HALF)


scores_and_weights(batch)


# ----------------------------------------------------------------------------------------------- 4 no causal
def predictions_table(causal: MaskedBatch, open_: MaskedBatch, b: int) -> pd.DataFrame:
    """Scored positions of row b: what the decoder read, should predict, and predicted with / without."""
    tok = bundle.tokenizer
    scored = causal.scored[b].nonzero()[:, 0].tolist()
    with_mask, without = causal.predictions[b], open_.predictions[b]
    return pd.DataFrame({
        "position": scored,
        "decoder reads": [causal.tgt_pieces[b][t] for t in scored],
        "should predict": [tok.piece(int(causal.tgt_out[b, t])) for t in scored],
        "with causal mask": [tok.piece(int(with_mask[t])) for t in scored],
        "without it": [tok.piece(int(without[t])) for t in scored],
        "changed": ["✱ changed" if with_mask[t] != without[t] else "" for t in scored],
    })


@st.fragment
def without_causal(batch: MaskedBatch) -> None:
    st.header("4 · Remove the causal mask", divider="gray")
    st.markdown("Switch it off and the same model runs again over the same batch with the padding part of "
                "the target mask only. Now each decoder position also sees the tokens after it, including the "
                "one it should predict. The model was never trained like that, so its predictions change.")
    off = st.toggle("Remove the causal mask", key="masks_no_causal")
    if not off:
        st.info("Turn the switch on to re-run the model without the causal mask.", icon=":material/visibility:")
        return
    open_ = traced(key, registry.version(key), sources, targets_from, False)
    p1, p2, p3 = st.columns(3)
    layer = p1.selectbox("Layer", range(cfg.n_dec_layers), format_func=lambda i: f"layer {i + 1}",
                         key="masks_open_layer")
    head = p2.selectbox("Head", range(H), format_func=lambda i: f"head {i + 1}", key="masks_open_head")
    b = p3.selectbox("Batch row", range(B), format_func=lambda i: row_name(batch, i), key="masks_open_row",
                     index=by_length(batch)[-1])
    _, dec = labels(batch, b)
    c1, c2 = st.columns(2)
    for col, run, name in ((c1, batch, f"causal, seq {b + 1}"), (c2, open_, f"no causal mask, seq {b + 1}")):
        record = run.trace.attention["decoder_self"][layer]
        weights, mask = record.weights[b, head].numpy(), record.mask[b, head].numpy()
        real_rows = run.tgt_in[b] != PAD
        later = float(weight_above_diagonal(record.weights[b, head])[real_rows].mean())
        with col:
            fig = charts.attention_heatmap(weights, dec, dec, head_title("decoder_self", layer, head, name), mask=mask)
            stem = chart_filename(task.name, f"decoder_self-{'causal' if run.causal else 'no-causal'}-row{b + 1}",
                                  layer, head)
            concept_ui.heatmap(fig, weights, dec, dec, stem, f"masks-open-{run.causal}", HALF)
            st.caption(f"Weight above the diagonal: each real (non-pad) query puts on average **{later:.0%}** of "
                       "its attention on later tokens.")
    changed = (batch.predictions != open_.predictions) & batch.scored
    st.markdown(f"**Predictions of seq {b + 1}** ({int(changed[b].sum())} of {int(batch.scored[b].sum())} "
                f"positions changed; {int(changed.sum())} of {int(batch.scored.sum())} in the whole batch)")
    table = predictions_table(batch, open_, b)
    st.dataframe(table.style.apply(lambda r: ["background-color: #FBE3C5" if r["changed"] else ""] * len(r), axis=1),
                 hide_index=True, width="content", height=36 * (len(table) + 1) + 4)


without_causal(batch)
