"""Pure plotly figure builders: arrays in, `plotly.graph_objects.Figure` out (a few also as `*_spec`: the same
figure as plain dicts, for pages that send many figures to the browser at once). No streamlit, no torch needed.

Conventions (docs/ARCHITECTURE.md, "Chart conventions"): queries on rows, keys on columns, labelled "03 e" by
`token_labels`; weights on a fixed 0..1 colour-blind-safe scale; hover shows query, key and value; every
figure carries a title; rows run top to bottom in token order.
"""

from .ablation import importance_heatmap, removal_curve
from .architecture import architecture_diagram
from .attention import (
    attention_heatmap, head_grid, mask_heatmap, padded_batch_heatmap, scores_heatmap, step_attention_rows,
    step_attention_spec,
)
from .common import KIND_COLORS, KIND_SHORT, KIND_TITLES, attention_title, read_labels, token_labels, with_title_line
from .encodings import embedding_sum, position_similarity, positional_curves, positional_matrix, token_vectors
from .sampling import sampling_bars, tokens_that_matter
from .stats import TOPK_SCALES, head_stats_heatmap, topk_bar, topk_spec, training_curves

__all__ = [
    "KIND_COLORS", "KIND_SHORT", "KIND_TITLES", "TOPK_SCALES", "architecture_diagram", "attention_heatmap",
    "attention_title", "embedding_sum", "head_grid", "head_stats_heatmap", "importance_heatmap", "mask_heatmap",
    "padded_batch_heatmap", "position_similarity", "positional_curves", "positional_matrix", "read_labels",
    "removal_curve", "sampling_bars", "scores_heatmap", "step_attention_rows", "step_attention_spec", "token_labels",
    "token_vectors", "tokens_that_matter", "topk_bar", "topk_spec", "training_curves", "with_title_line",
]
