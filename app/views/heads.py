"""Heads across the corpus: every head of one kind measured over a whole set of sentences
(model/heads), coloured by the statistic chosen and named by the role its numbers support; a
click on a head opens its profile (offset profile, most and least typical sentences, knockout
cost, a joint map of its queries and keys)."""
from __future__ import annotations

from dataclasses import dataclass

import streamlit as st

from app import resources, state
from app.context import Context
from app.settings import HEAD, LAYER, TEXT, layer_head, radio, selectbox, setting
from app.ui import chart
from app.views.explore import KIND
from figures.heads import head_grid, offset_profile, qk_map
from model.heads import HeadStatistics, KindStatistics, StatisticsError, sentence_set, skipped_summary
from model.heads.roles import RULES
from model.kinds import ATTENTION_KINDS


@dataclass(frozen=True)
class Statistic:
    label: str
    help: str
    signed: bool = False


STATISTICS: dict[str, Statistic] = {
    "knockout": Statistic("knockout cost", "how much less likely the model's own translation becomes with this head "
                          "switched off (drop in log-probability, mean over the knockout sentences)", signed=True),
    "agreement": Statistic("agreement with ALTI+", "correlation between the head's weights and what ALTI+ says each "
                           "token used (1: its picture shows what the model used)", signed=True),
    "entropy_norm": Statistic("entropy, share of uniform", "0: all weight on one key; 1: spread evenly"),
    "max_weight": Statistic("largest weight", "how concentrated the head is: its rows' largest weight, on average"),
    "previous": Statistic("share on the previous token", "the token just before the query (cross-attention: just "
                          "before the monotonic diagonal)"),
    "same": Statistic("share on the same token / diagonal", "the query's own position (cross-attention: the source "
                      "token on the monotonic diagonal, first output word to first source word, last to last)"),
    "next": Statistic("share on the next token", "the token just after the query (cross-attention: just after the "
                      "diagonal)"),
    "left": Statistic("share farther left", "more than one token before the query (or the diagonal)"),
    "right": Statistic("share farther right", "more than one token after the query (or the diagonal)"),
    "distance": Statistic("attention distance", "tokens between the query (or the diagonal) and where it looks"),
    "sink": Statistic("share on the sink", "on the source's end-of-sentence token (or the decoder's start symbol)"),
    "punctuation": Statistic("share on punctuation", "on punctuation marks"),
    "entropy": Statistic("entropy (nats)", "of each row's weights, on average"),
}
STAT = setting("heads_stat", "stat", "knockout", choices=tuple(STATISTICS))
INTRO = ("One sentence's heatmap invites stories that the next sentence contradicts. Here every head is measured over "
         "a whole set of sentences: where its attention lands, how spread out it is, what switching it off costs. "
         "Click a head (or pick it below) for its profile.")


def render(ctx: Context) -> None:
    st.caption(INTRO)
    stats = _statistics(ctx)
    if stats is None:
        return
    _about(stats)
    name = radio(st, KIND, "Attention kind", format_func=lambda k: ATTENTION_KINDS[k].label, horizontal=True)
    k = stats.kinds[name]
    c1, c2, c3 = st.columns(3)
    options = [s for s in STATISTICS if s != "agreement" or k.agreement is not None]
    stat = selectbox(c1, STAT, "Colour by", options, format_func=lambda s: STATISTICS[s].label,
                     help="; ".join(f"{STATISTICS[s].label}: {STATISTICS[s].help}" for s in options))
    n_layers, n_heads = k.means["entropy"].shape
    layer, head = layer_head((c2, c3), n_layers, n_heads)
    _grid(ctx, stats, name, stat, (layer, head))
    _rules(name)
    _profile(ctx, stats, name, layer, head)


# ---- the statistics: the shipped file, or computed for this model ----------------------------------
def _statistics(ctx: Context) -> HeadStatistics | None:
    stats, why = resources.get_head_statistics(ctx.path)
    if stats is not None:
        return stats
    st.info(f"No head statistics for this model yet: {why}. They take about a minute for 1,000 sentences on "
            "two cores (the shipped models come with theirs).", icon=":material/info:")
    default = resources.default_sentences(ctx.path)
    if isinstance(default, str):
        st.caption(f"The default set is not here ({default}).")
        default = None
    pasted = st.text_area(f"…or paste your own sentences in {ctx.checkpoint.src_lang}, one per line",
                          key="heads_pasted", height=120)
    go_default = default is not None and st.button(f"Compute over {len(default.texts)} sentences of {default.name}",
                                                   key="heads_compute", icon=":material/play_arrow:")
    go_pasted = st.button("Compute over the pasted sentences", key="heads_compute_pasted", disabled=not pasted.strip())
    if not (go_default or go_pasted):
        return None
    try:
        chosen = default if go_default else sentence_set(ctx.checkpoint, pasted.splitlines(), "pasted sentences")
    except StatisticsError as exc:
        st.error(str(exc))
        return None
    return _compute(ctx, chosen)


def _compute(ctx: Context, sentences) -> HeadStatistics:
    bar = st.progress(0.0, text="starting…")

    def progress(stage: str, done: int, total: int) -> None:
        bar.progress(done / max(total, 1), text=f"{stage}: {done} of {total} sentences")
    with st.spinner("Measuring every head…", show_time=True):
        stats = resources.compute_head_statistics(ctx.path, sentences, progress)
    bar.empty()
    return stats


def _about(stats: HeadStatistics) -> None:
    d = stats.decoding
    how = f"beam {d.get('beam_size')}" if d.get("method") == "beam" else str(d.get("method"))
    skipped = f"; {len(stats.skipped)} lines skipped ({skipped_summary(stats.skipped)})" if stats.skipped else ""
    st.markdown(f"Measured over **{len(stats.sentences):,} sentences** of {stats.input['name']} and the model's own "
                f"translations ({how}){skipped}. Knockout cost: the first {stats.knockout_sentences} sentences; "
                f"agreement with ALTI+: the first {stats.agreement_sentences}.")
    for note in stats.notes:
        st.caption(note)


# ---- every head ---------------------------------------------------------------------------------
def _grid(ctx: Context, stats: HeadStatistics, name: str, stat: str, selected: tuple[int, int]) -> None:
    k, s = stats.kinds[name], STATISTICS[stat]
    values = k.means[stat] if stat in k.means else getattr(k, stat)
    fig = resources.get_figure("heads_grid", (ctx.path, stats.fingerprint, name, stat, selected), ctx.settings.display,
                               lambda: head_grid(values, k.roles, f"{ATTENTION_KINDS[name].label}: {s.label}",
                                                 s.label, signed=s.signed, selected=selected))
    st.plotly_chart(fig, key="heads_grid", on_select=_clicked, selection_mode="points", width="stretch",
                    config={"displaylogo": False})
    st.caption(f"{s.label}: {s.help}. Each cell names the head's role (rules below).")


def _clicked() -> None:
    """A click on the grid picks that head (the layer and head pickers follow)."""
    try:
        point = state.widget("heads_grid")["selection"]["points"][0]
        layer, head = int(point["y"]), int(point["x"])
    except (KeyError, TypeError, IndexError, ValueError):
        return
    state.set_widget(LAYER.name, layer)
    state.set_widget(HEAD.name, head)


def _rules(name: str) -> None:
    with st.expander("How roles are named (the first rule that holds)"):
        st.markdown("\n".join(f"{i}. **{r.role}**: {r.text}" for i, r in
                              enumerate((r for r in RULES if name in r.kinds), 1)))
        st.caption("Shares are over every row of every sentence: the query's weights on its allowed keys. Rows with "
                   "only one key to look at (the decoder's first position) are left out.")


# ---- one head -----------------------------------------------------------------------------------
def _profile(ctx: Context, stats: HeadStatistics, name: str, layer: int, head: int) -> None:
    k = stats.kinds[name]
    numbers, role = k.head(layer, head), k.roles[layer][head]
    rule = next(r for r in RULES if r.role == role and name in r.kinds)
    st.subheader(f"Layer {layer}, head {head}: {role}")
    st.caption(f"Rule: {rule.text}.")
    cols = st.columns(5)
    cols[0].metric("entropy (share of uniform)", f"{numbers['entropy_norm']:.2f}")
    cols[1].metric("largest weight", f"{numbers['max_weight']:.2f}")
    cols[2].metric("attention distance", f"{numbers['distance']:.1f} tokens")
    cols[3].metric("knockout cost", _or_dash(numbers["knockout"], "{:+.3f}"),
                   help=STATISTICS["knockout"].help)
    cols[4].metric("agreement with ALTI+", _or_dash(numbers["agreement"], "{:.2f}"),
                   help=STATISTICS["agreement"].help)
    left, right = st.columns(2)
    where = "the diagonal" if name == "cross" else "the query"
    sink = "end of sentence" if ATTENTION_KINDS[name].key_side == "source" else "start symbol"
    fig = resources.get_figure("heads_profile", (ctx.path, stats.fingerprint, name, layer, head), ctx.settings.display,
                               lambda: offset_profile(numbers, {sink: numbers["sink"],
                                                                "punctuation": numbers["punctuation"]},
                                                      f"where its attention lands, relative to {where}"))
    chart(left, fig, key="heads_profile", settings=ctx.settings)
    fig = resources.get_figure("heads_map", (ctx.path, stats.fingerprint, name, layer, head), ctx.settings.display,
                               lambda: _map(stats, k, name, layer, head))
    chart(right, fig, key="heads_map", settings=ctx.settings)
    _sentences(ctx, stats, k, name, layer, head)


def _choose(text: str, kind: str, layer: int, head: int) -> None:
    """Before the next run draws any widget: the explorer's sentence, kind, layer and head."""
    for setting_, value in ((TEXT, text), (KIND, kind), (LAYER, layer), (HEAD, head)):
        state.set_widget(setting_.name, value)


def _or_dash(value: float, fmt: str) -> str:
    return "–" if value != value else fmt.format(value)       # nan: not measured


def _map(stats: HeadStatistics, k: KindStatistics, name: str, layer: int, head: int):
    kind = ATTENTION_KINDS[name]

    def labels(points, side: str) -> list[str]:
        return [f"{stats.tokens(side, s)[p]} · {_short(stats.sentences[s])}" for s, p in points]
    shown = float(k.shown[layer, head]) if k.shown is not None else 0.0
    return qk_map(k.queries[layer, head], k.keys[layer, head], labels(k.query_tokens, kind.query_side),
                  labels(k.key_tokens, kind.key_side),
                  f"its queries and keys on one plane ({shown:.0%} of their variance shown)")


def _short(text: str, n: int = 48) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


def _sentences(ctx: Context, stats: HeadStatistics, k: KindStatistics, name: str, layer: int, head: int) -> None:
    st.markdown("**Where it is most and least typical** (the sentences whose own numbers for this head lie "
                "nearest to, and farthest from, its numbers over the whole set)")
    cols = st.columns(2)
    for col, title, picked, tag in ((cols[0], "Most typical", k.typical, "t"),
                                    (cols[1], "Least typical", k.atypical, "a")):
        col.markdown(f"*{title}*")
        for rank, s in enumerate(picked[layer, head]):
            text = stats.sentences[int(s)]
            col.markdown(f"{rank + 1}. {text}  \n→ {stats.translations[int(s)]}")
            if col.button("open in the explorer", key=f"heads_open_{tag}{rank}", icon=":material/grid_view:",
                          type="tertiary", help="this sentence, this kind of attention, this layer and head",
                          on_click=_choose, args=(text, name, layer, head)):
                ctx.open("explore")
