"""Compare two models: any two the session can use (shipped, trained, uploaded, kept snapshots of a run) on
the same input: outputs right or wrong, the top-k of one step, the same kind / layer / head of attention on
the shared 0..1 scale with their difference where the shapes match, held-out exact match on the same fresh
inputs, size and training, and their settings diffed. The view lives in ui/tables/compare.py (the URL)."""

from __future__ import annotations

import json

import pandas as pd
import streamlit as st
from streamlit.delta_generator import DeltaGenerator

from ui import decodes, display
from ui import model_registry as registry
from ui.code_links import code_link
from ui.failure import callback, fragment
from ui.markdown import code, literal
from ui.runs_table import shape_text
from ui.state import View
from ui.tables.attention import KIND_NAMES, KINDS
from ui.tables.compare import COMPARE
from ui.widgets import finish, header, input_picker, layer_or_head, no_model, verdict
from transformer import charts
from transformer.analysis.attention_maps import AttentionMap
from transformer.network.budget import BudgetError, evaluation_estimate
from transformer.bundle import ModelBundle
from transformer.charts.compare import difference_heatmap, pair_heatmaps, score_bars
from transformer.network.decoding import DecodeError, DecodeResult
from transformer.analysis.evaluation import evaluate_pairs
from transformer.charts.export import chart_filename
from transformer.network.tokenizers import TokenizerError
from transformer.i18n import t

SIDES = ("A", "B")


class Side:
    """One of the two models: its letter, registry key, version and bundle, and its decode of the input
    (`result`, `maps`) or why it could not decode it (`error`)."""

    def __init__(self, letter: str, key: str):
        self.letter, self.key = letter, key
        self.version = registry.version(key)
        self.bundle: ModelBundle = registry.bundle_for(key)
        self.label = registry.entries()[key].label
        self.result: DecodeResult | None = None
        self.maps: dict[str, AttentionMap] | None = None
        self.error: str | None = None

    def decode(self, text: str) -> None:
        try:
            self.result = decodes.greedy(self.key, self.version, text)
            self.maps = decodes.maps(self.key, self.version, text)
        except (TokenizerError, DecodeError) as exc:
            self.error = str(exc)

    @property
    def name(self) -> str:
        return f"{self.letter}: {registry.display_name(self.key)}"


def intro() -> DeltaGenerator:
    notes = header(t("app.page.compare"))
    st.markdown(t("compare.intro"))
    return notes


# ------------------------------------------------------------------------------------------------ models


def default_b(a: str, entries: dict[str, registry.ModelEntry]) -> str:
    """Model B until one is picked: the newest session model other than A, else the next model in the list."""
    keys = list(entries)
    session = [k for k in keys if entries[k].origin != "shipped" and k != a]
    if session:
        return session[-1]
    others = keys[keys.index(a) + 1:] + keys[:keys.index(a)] if a in keys else keys
    return others[0] if others else a


def swap(view: View) -> None:
    a, b, text = view.get("a"), view.get("b"), view.get("input")
    view.set("a", b)
    view.set("b", a)
    view.set("input", text)


def pick_models(view: View, entries: dict[str, registry.ModelEntry]) -> tuple[str, str]:
    a = view.get("a") or registry.active_key()
    b = view.get("b") or default_b(a, entries)
    keys = list(entries)
    left, right, button = st.columns([4, 4, 1.7], vertical_alignment="bottom")
    with left:
        view.widget("a", st.selectbox, t("compare.model_a"), keys, format_func=lambda k: entries[k].label,
                    to_widget=lambda _: a)
    with right:
        view.widget("b", st.selectbox, t("compare.model_b"), keys, format_func=lambda k: entries[k].label,
                    to_widget=lambda _: b)
    button.button(t("compare.swap"), key="compare_swap", icon=":material/swap_horiz:", on_click=callback(swap),
                  args=(view,), width="stretch", help=t("compare.swap_help"))
    return a, b


# ----------------------------------------------------------------------------------------------- outputs


def outputs(sides: list[Side], text: str) -> None:
    for side, col in zip(sides, st.columns(2, gap="large"), strict=True):
        with col:
            if side.error is not None:
                st.error(literal(t("compare.cannot_decode", name=side.name, error=side.error)), icon=":material/block:")
                continue
            answer = side.bundle.task.answer(text)
            line = t("compare.wrote", name=literal(side.name), output=display.output(side.result.output_text))
            if not side.result.finished:
                line += t("compare.stopped")
            if answer is not None:
                line += f" {verdict(side.result.output_text, answer)}"
                line += "" if side.result.output_text == answer else t("attention.expected", answer=code(answer))
            st.markdown(line)


def shown_step(view: View, sides: list[Side]) -> int:
    """The decoding step (0-based) whose top-k is shown; one past both decodes is refused."""
    longest = max(len(s.result.steps) for s in sides if s.result is not None)
    step = view.get("step")
    if step > longest:
        view.refuse("step", t("compare.only_steps", n=longest))
        step = 1
    return step - 1


def topk_figure(side: Side, index: int):
    step = side.result.steps[index]
    return charts.topk_bar([c.piece for c in step.topk], [c.prob for c in step.topk], chosen=step.piece,
                           title=t("compare.topk_title", side=side.letter, step=index + 1, k=len(step.topk)))


@fragment
def topk(view: View, sides: list[Side]) -> None:
    """Each model's top-k next tokens at the same decoding step."""
    decoded = [s for s in sides if s.result is not None]
    longest = max(len(s.result.steps) for s in decoded)
    index = shown_step(view, sides)
    if longest > 1:
        view.widget("step", st.slider, t("compare.step"), min_value=1, max_value=longest,
                    to_widget=lambda _: index + 1, help=t("compare.step_help"))
    for side, col in zip(sides, st.columns(2, gap="large"), strict=True):
        with col:
            if side.result is None:
                continue
            if index >= len(side.result.steps):
                st.info(t("compare.ended", name=side.name, n=len(side.result.steps)), icon=":material/info:")
                continue
            fig = decodes.figure((side.key, side.version, view.get("input"), "compare_topk", side.letter, index),
                                 lambda side=side: topk_figure(side, index))
            display.show_figure(fig, f"{side.bundle.task.name}_{side.letter}_topk_step{index + 1:02d}",
                                key=f"compare_topk_{side.letter}")
    view.sync_url()


# --------------------------------------------------------------------------------------------- attention


def shown_head(view: View, maps: list[AttentionMap]) -> tuple[int, int]:
    """(layer, head), 0-based: the ones picked, else model A's best-aligned head (else layer 1, head 1); a layer
    or head neither model has is refused."""
    best_layer, best_head, _ = maps[0].best_aligned() or (0, 0, None)
    picked = {}
    for prop, count, default, why in (("layer", max(m.layers for m in maps), best_layer, "compare.only_layers"),
                                      ("head", max(m.heads for m in maps), best_head, "compare.only_heads")):
        value = view.get(prop)
        if value is not None and value > count:
            view.refuse(prop, t(why, n=count, kind=KIND_NAMES[maps[0].kind].lower()))
            value = None
        picked[prop] = default if value is None else value - 1
    return picked["layer"], picked["head"]


def head_of(amap: AttentionMap, layer: int, head: int) -> tuple | None:
    """(weights, row labels, column labels) of one head, or None when the model lacks it."""
    if layer >= amap.layers or head >= amap.heads:
        return None
    return (amap.weights[layer, head], charts.token_labels(amap.query_pieces), charts.token_labels(amap.key_pieces))


def mismatch(sides: list[Side], heads: list[tuple | None], layer: int, head: int) -> str | None:
    """Why there is no difference map (None when there is one)."""
    for side, shown in zip(sides, heads, strict=True):
        if shown is None:
            return t("compare.no_head", name=side.name, layer=layer + 1, head=head + 1)
    (wa, *_), (wb, *_) = heads
    if wa.shape != wb.shape:
        return t("compare.shapes", a=f"{wa.shape[0]}×{wa.shape[1]}", b=f"{wb.shape[0]}×{wb.shape[1]}")
    return None


def show(fig, matrix, rows: list[str], cols: list[str], filename: str, key: str) -> None:
    """A heatmap at its own size with its toolbar export and its numbers as CSV."""
    display.show_figure(fig, filename, key=f"fig-{key}", width="content")
    display.csv_download(matrix, rows, cols, filename, key=f"csv-{key}")


@fragment
def attention(view: View, sides: list[Side], task_name: str) -> None:
    """Kind, layer and head pickers; both models' heads side by side, then A − B where the shapes match."""
    kind = view.widget("kind", st.segmented_control, t("attention.kind_label"), KINDS, format_func=KIND_NAMES.get,
                       required=True)
    maps = [s.maps[kind] for s in sides]
    layer, head = shown_head(view, maps)
    pick_layer, pick_head, _ = st.columns([1, 1, 3])
    for prop, count, value, col in (("layer", max(m.layers for m in maps), layer, pick_layer),
                                    ("head", max(m.heads for m in maps), head, pick_head)):
        layer_or_head(view, prop, count, value, col)
    heads = [head_of(m, layer, head) for m in maps]
    stem = chart_filename(task_name, kind, layer, head)
    versions = tuple((s.key, s.version) for s in sides)
    for side, shown in zip(sides, heads, strict=True):
        if shown is None:
            amap = side.maps[kind]
            st.info(t("compare.has", name=side.name, layers=amap.layers, heads=amap.heads, layer=layer + 1,
                      head=head + 1), icon=":material/info:")
    fig = decodes.figure((*versions, view.get("input"), "compare_pair", kind, layer, head), lambda: pair_heatmaps(
        [None if h is None else (*h, s.maps[kind].mask) for s, h in zip(sides, heads, strict=True)],
        [s.name for s in sides], charts.attention_title(kind, layer, head, extra=t("compare.a_and_b"))))
    display.show_figure(fig, f"{stem}_A-and-B", key="compare_pair")
    with st.container(horizontal=True):
        for side, shown in zip(sides, heads, strict=True):
            if shown is not None:
                display.csv_download(shown[0], shown[1], shown[2], f"{stem}_{side.letter}",
                                     key=f"csv-compare_{side.letter}", label=t("compare.csv", side=side.letter))
    st.caption(t("compare.scale") + ("" if kind == "encoder_self" else " " + display.decoder_rows()))
    st.markdown(t("compare.differ"))
    why = mismatch(sides, heads, layer, head)
    if why is not None:
        st.info(t("compare.no_difference", why=why), icon=":material/info:")
    else:
        (wa, rows, cols), (wb, rows_b, cols_b) = heads
        if rows != rows_b or cols != cols_b:
            st.warning(t("compare.other_tokens"), icon=":material/warning:")
        diff = wa - wb
        title = charts.attention_title(kind, layer, head, extra="A − B")
        mask = sides[0].maps[kind].mask
        fig = decodes.figure((*versions, view.get("input"), "compare_diff", kind, layer, head), lambda: display.fit(
            difference_heatmap(wa, wb, rows, cols, title, mask=mask), 2 * display.HALF_WIDTH))
        show(fig, diff, rows, cols, f"{stem}_A-minus-B", "compare_diff")
        st.caption(t("compare.difference", largest=abs(diff).max()))
    code_link("attention", kind=kind, layer=layer, head=head)
    view.sync_url()


# ------------------------------------------------------------------------------------------------ scores


def task_signature(bundle: ModelBundle) -> str:
    return json.dumps([bundle.task.name, bundle.task.params], sort_keys=True, default=str)


def _score(key: str, version: int, signature: str, samples: int, seed: int) -> dict:
    bundle = registry.bundle_for(key)
    return evaluate_pairs(bundle.model, bundle.tokenizer, bundle.task.pairs(samples, seed, "heldout"))


def held_out(side: Side, samples: int, seed: int) -> dict | str:
    """Greedy exact match, token accuracy and loss on `samples` held-out pairs of the model's own task drawn
    with `seed` (the same pairs for two models of one task), or why not."""
    task = side.bundle.task
    try:
        evaluation_estimate(side.bundle.config, samples, task.max_source_chars + 1, task.max_target_chars + 1).check()
        return decodes.memo("compare_score", _score, side.key, side.version, task_signature(side.bundle),
                            samples, seed)
    except (BudgetError, ValueError) as exc:
        return t("compare.cannot_evaluate", error=exc)


def facts(side: Side, score: dict | str) -> dict:
    cfg, card = side.bundle.config, side.bundle.card
    fresh = isinstance(score, dict)
    return {
        t("compare.facts.model"): registry.display_name(side.key),
        t("compare.facts.origin"): registry.ORIGINS_SAID[registry.entries()[side.key].origin],
        t("compare.facts.task"): side.bundle.task.title,
        t("compare.facts.shape"): shape_text(cfg.to_dict()),
        t("compare.facts.parameters"): f"{side.bundle.model.num_parameters():,}",
        t("compare.facts.steps"): f"{card['steps']:,}" if card.get("steps") is not None else "–",
        t("compare.facts.time"): t("compare.facts.seconds", s=card["seconds"]) if card.get("seconds") is not None
        else "–",
        t("compare.facts.exact_match"): f"{score['exact_match']:.1%}" if fresh else score,
        t("compare.facts.token_accuracy"): f"{score['token_accuracy']:.1%}" if fresh else "–",
        t("compare.facts.loss"): f"{score['loss']:.4f}" if fresh else "–",
        t("compare.facts.card"): f"{card['exact_match']:.1%}" if card.get("exact_match") is not None else "–",
    }


@fragment
def scores(view: View, sides: list[Side]) -> None:
    """Held-out exact match of both on the same fresh inputs, with size and training."""
    with st.container(horizontal=True, vertical_alignment="bottom"):
        samples = view.widget("samples", st.number_input, t("attention.importance.samples"), min_value=20,
                              max_value=2000, step=100, width=170)
        seed = view.widget("seed", st.number_input, t("errors.seed"), min_value=0, max_value=2**31 - 1, step=1,
                           width=170, help=t("compare.seed_help"))
    same = task_signature(sides[0].bundle) == task_signature(sides[1].bundle)
    results = [held_out(s, int(samples), int(seed)) for s in sides]
    st.caption(t("compare.same_inputs" if same else "compare.own_inputs", n=samples, seed=seed))
    table = pd.DataFrame({s.name: facts(s, r) for s, r in zip(sides, results, strict=True)})
    st.dataframe(table, key="compare_facts", height=35 * (len(table) + 1) + 3, column_config={
        s.name: st.column_config.TextColumn(s.name, width="medium") for s in sides})
    values = [r["exact_match"] if isinstance(r, dict) else None for r in results]
    fig = decodes.figure((*(s.key for s in sides), *(s.version for s in sides), "compare_scores", samples, seed),
                         lambda: score_bars([s.name for s in sides], values,
                                            t("compare.scores_title", n=samples, seed=seed)))
    display.show_figure(fig, f"compare_exact-match_{samples}_seed{seed}", key="compare_scores", width=560)
    display.table_download(table, "compare_models", key="compare_facts_csv", index=True)
    view.sync_url()


# ---------------------------------------------------------------------------------------------- settings


def settings_of(bundle: ModelBundle) -> dict:
    """Every setting that made the model, flat: task, model configuration, training settings (when recorded)."""
    flat = {"task": bundle.task.name, **{f"task.{k}": v for k, v in bundle.task.card_params().items()}}
    flat |= {f"model.{k}": v for k, v in bundle.config.to_dict().items()}
    flat |= {f"train.{k}": v for k, v in (bundle.card.get("train") or {}).items() if k not in ("task", "task_params")}
    return flat


def settings_diff(a: ModelBundle, b: ModelBundle) -> pd.DataFrame:
    """One row per setting of either model, those that differ first."""
    sa, sb = settings_of(a), settings_of(b)

    def value(settings: dict, name: str) -> str:  # "–" where the model has no such setting
        return json.dumps(settings[name], default=str, ensure_ascii=False) if name in settings else "–"

    rows = [{"Setting": name, "A": value(sa, name), "B": value(sb, name),
             "Differs": sa.get(name, "–") != sb.get(name, "–")} for name in dict.fromkeys([*sa, *sb])]
    return pd.DataFrame(rows).sort_values("Differs", ascending=False, kind="stable").reset_index(drop=True)


def settings(sides: list[Side]) -> None:
    diff = settings_diff(sides[0].bundle, sides[1].bundle)
    count = int(diff["Differs"].sum())
    st.markdown(t("compare.settings.count", n=count, total=len(diff)) if count
                else t("compare.settings.same", total=len(diff)))
    st.dataframe(diff, hide_index=True, key="compare_settings", column_config={
        "Setting": st.column_config.TextColumn(t("compare.settings.setting")),
        "Differs": st.column_config.CheckboxColumn(t("compare.settings.differs"), width="small")})
    st.caption(t("compare.settings.names"))
    display.table_download(diff, "compare_settings", key="compare_settings_csv", label=t("compare.settings.csv"))


# ------------------------------------------------------------------------------------------------ page


def main() -> None:
    view = COMPARE.view()
    notes = intro()
    entries = registry.entries()
    if not entries:
        st.warning(no_model(), icon=":material/info:")
        finish(view, notes)
        return
    a, b = pick_models(view, entries)
    sides = [Side("A", a), Side("B", b)]
    if a == b:
        st.caption(t("compare.same_model"))
    text = view.get("input")
    if text is not None and view.from_link("input"):
        sides[0].decode(text)
        if sides[0].error is not None:
            view.refuse("input", t("attention.cannot_decode_link", name=registry.display_name(sides[0].key),
                                   error=sides[0].error))
            sides[0].error = None
    text = input_picker(view, sides[0].bundle, help_text=t("compare.input_help"))
    for side in sides:
        side.decode(text)
    outputs(sides, text)
    decoded = [s for s in sides if s.result is not None]
    if decoded:
        st.subheader(t("charts.topk.title"), divider="gray")
        topk(view, sides)
    if len(decoded) == 2:
        st.subheader(t("masks.attention"), divider="gray")
        attention(view, sides, sides[0].bundle.task.name)
    st.subheader(t("compare.scores_header"), divider="gray")
    scores(view, sides)
    st.subheader(t("compare.settings.header"), divider="gray")
    settings(sides)
    finish(view, notes)


main()
