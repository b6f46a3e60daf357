"""Heads across the corpus: every head of one kind measured over a whole set of sentences
(model/analysis/heads), coloured by the statistic chosen and named by the role its numbers support; a
click on a head opens its profile (offset profile, most and least typical sentences, knockout
cost, a joint map of its queries and keys)."""
from __future__ import annotations

from dataclasses import dataclass

import streamlit as st

from app import resources, state
from app.context import Context
from app.settings import HEAD, LAYER, TEXT, declare, layer_head, selectbox
from app.ui import chart, described, why_box
from app.views.explore import KIND, kind_picker
from figures.heads import head_grid, offset_profile, qk_map
from i18n import N_, _, language, num
from model.analysis.heads import HeadStatistics, KindStatistics, StatisticsError, sentence_set, skipped_summary
from model.analysis.heads.roles import RULES
from model.network.kinds import ATTENTION_KINDS


@dataclass(frozen=True)
class Statistic:
    label: str              # marked for the catalog: _() where shown
    help: str
    signed: bool = False


STATISTICS: dict[str, Statistic] = {
    "knockout": Statistic(N_("knockout cost"), N_("how much less likely the model's own translation becomes with "
                                                  "this head "
                          "switched off (drop in log-probability, mean over the knockout sentences)"), signed=True),
    "agreement": Statistic(N_("agreement with ALTI+"), N_("correlation between the head's weights and what ALTI+ "
                                                          "says each "
                           "token used (1: its picture shows what the model used)"), signed=True),
    "entropy_norm": Statistic(N_("entropy, share of uniform"), N_("0: all weight on one key; 1: spread evenly")),
    "max_weight": Statistic(N_("largest weight"), N_("how concentrated the head is: its rows' largest weight, on "
                                                     "average")),
    "previous": Statistic(N_("share on the previous token"), N_("the token just before the query (cross-attention: "
                                                                "just "
                          "before the monotonic diagonal)")),
    "same": Statistic(N_("share on the same token / diagonal"), N_("the query's own position (cross-attention: the "
                                                                   "source "
                      "token on the monotonic diagonal, first output word to first source word, last to last)")),
    "next": Statistic(N_("share on the next token"), N_("the token just after the query (cross-attention: just after "
                                                        "the "
                      "diagonal)")),
    "left": Statistic(N_("share farther left"), N_("more than one token before the query (or the diagonal)")),
    "right": Statistic(N_("share farther right"), N_("more than one token after the query (or the diagonal)")),
    "distance": Statistic(N_("attention distance"),
                          N_("tokens between the query (or the diagonal) and where it looks")),
    "sink": Statistic(N_("share on the sink"), N_("on the source's end-of-sentence token (or the decoder's start "
                                                  "symbol)")),
    "punctuation": Statistic(N_("share on punctuation"), N_("on punctuation marks")),
    "entropy": Statistic(N_("entropy (nats)"), N_("of each row's weights, on average")),
}
KNOCKOUT, AGREEMENT = STATISTICS["knockout"], STATISTICS["agreement"]
STAT = declare("heads_stat", "stat", "knockout", choices=tuple(STATISTICS))
INTRO = N_("One sentence's heatmap invites stories that the next sentence contradicts. Here every head is measured "
           "over "
         "a whole set of sentences: where its attention lands, how spread out it is, what switching it off costs. "
         "Click a head (or pick it below) for its profile.")


def render(ctx: Context) -> None:
    compact = ctx.settings.projector    # the front of a room: one row of choices, the words behind "Why?"
    if not compact:
        st.caption(_(INTRO))
    stats = _statistics(ctx)
    if stats is None:
        return
    row = st.columns([4, 3, 2, 2, 2], vertical_alignment="bottom") if compact else None
    if compact:
        with why_box(row[4], "heads"):
            st.markdown(_(INTRO))
            _about(stats)
    else:
        _about(stats)
    name = kind_picker(row[0] if compact else st, compact)
    k = stats.kinds[name]
    c1, c2, c3 = row[1:4] if compact else st.columns(3)
    options = [s for s in STATISTICS if s != "agreement" or k.agreement is not None]
    stat = selectbox(c1, STAT, _("Colour by"), options, format_func=lambda s: _(STATISTICS[s].label),
                     help="; ".join(f"{_(STATISTICS[s].label)}: {_(STATISTICS[s].help)}" for s in options))
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
    st.info(_("No head statistics for this model yet: {why}. They take about a minute for 1,000 sentences on "
              "two cores (the shipped models come with theirs).").format(why=why), icon=":material/info:")
    default = resources.default_sentences(ctx.path)
    if isinstance(default, str):
        st.caption(_("The default set is not here ({why}).").format(why=default))
        default = None
    pasted = st.text_area(_("…or paste your own sentences in {lang}, one per line").format(
                              lang=ctx.checkpoint.src_lang),
                          key="heads_pasted", height=120)
    go_default = default is not None and st.button(
        _("Compute over {n} sentences of {name}").format(n=len(default.texts), name=default.name),
        key="heads_compute", icon=":material/play_arrow:")
    go_pasted = st.button(_("Compute over the pasted sentences"), key="heads_compute_pasted",
                          disabled=not pasted.strip())
    if not (go_default or go_pasted):
        return None
    try:
        chosen = default if go_default else sentence_set(ctx.checkpoint, pasted.splitlines(), _("pasted sentences"))
    except StatisticsError as exc:
        st.error(str(exc))
        return None
    return _compute(ctx, chosen)


def _compute(ctx: Context, sentences) -> HeadStatistics:
    bar = st.progress(0.0, text=_("starting…"))

    def progress(stage: str, done: int, total: int) -> None:
        bar.progress(done / max(total, 1), text=_("{stage}: {done} of {total} sentences").format(
            stage=_(stage), done=done, total=total))
    with st.spinner(_("Measuring every head…"), show_time=True):
        stats = resources.compute_head_statistics(ctx.path, sentences, progress)
    bar.empty()
    return stats


def _about(stats: HeadStatistics) -> None:
    d = stats.decoding
    how = _("beam {k}").format(k=d.get("beam_size")) if d.get("method") == "beam" else _(str(d.get("method")))
    skipped = _("; {n} lines skipped ({why})").format(n=len(stats.skipped), why=skipped_summary(stats.skipped)) \
        if stats.skipped else ""
    st.markdown(_("Measured over **{n} sentences** of {name} and the model's own translations ({how}){skipped}. "
                  "Knockout cost: the first {knockout} sentences; agreement with ALTI+: the first {agreement}.").format(
        n=num(len(stats.sentences), ","), name=stats.input["name"], how=how, skipped=skipped,
        knockout=stats.knockout_sentences, agreement=stats.agreement_sentences))
    for note in stats.notes:
        st.caption(note)


# ---- every head ---------------------------------------------------------------------------------
def _grid(ctx: Context, stats: HeadStatistics, name: str, stat: str, selected: tuple[int, int]) -> None:
    k, s = stats.kinds[name], STATISTICS[stat]
    values = k.means[stat] if stat in k.means else getattr(k, stat)
    fig = resources.get_figure("heads_grid", (ctx.path, stats.fingerprint, name, stat, selected), ctx.settings.display,
                               language(),
                               lambda: head_grid(values, [[_(r) for r in row] for row in k.roles],
                                                 f"{_(ATTENTION_KINDS[name].label)}: {_(s.label)}",
                                                 _(s.label), signed=s.signed, selected=selected))
    st.plotly_chart(fig, key="heads_grid", on_select=_clicked, selection_mode="points", width="stretch",
                    config={"displaylogo": False})
    described(st, fig, ctx.settings)
    st.caption(_("{statistic}: {meaning}. Each cell names the head's role (rules below).").format(
        statistic=_(s.label), meaning=_(s.help)))


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
    with st.expander(_("How roles are named (the first rule that holds)")):
        st.markdown("\n".join(f"{i}. **{_(r.role)}**: {_(r.text)}" for i, r in
                              enumerate((r for r in RULES if name in r.kinds), 1)))
        st.caption(_("Shares are over every row of every sentence: the query's weights on its allowed keys. Rows "
                     "with only one key to look at (the decoder's first position) are left out."))


# ---- one head -----------------------------------------------------------------------------------
def _profile(ctx: Context, stats: HeadStatistics, name: str, layer: int, head: int) -> None:
    k = stats.kinds[name]
    numbers, role = k.head(layer, head), k.roles[layer][head]
    rule = next(r for r in RULES if r.role == role and name in r.kinds)
    st.subheader(_("Layer {layer}, head {head}: {role}").format(layer=layer, head=head, role=_(role)))
    st.caption(_("Rule: {rule}.").format(rule=_(rule.text)))
    cols = st.columns(5)
    cols[0].metric(_("entropy (share of uniform)"), num(numbers["entropy_norm"], ".2f"))
    cols[1].metric(_("largest weight"), num(numbers["max_weight"], ".2f"))
    cols[2].metric(_("attention distance"), _("{n} tokens").format(n=num(numbers['distance'], ".1f")))
    cols[3].metric(_("knockout cost"), _or_dash(numbers["knockout"], "+.3f"),
                   help=_(KNOCKOUT.help))
    cols[4].metric(_("agreement with ALTI+"), _or_dash(numbers["agreement"], ".2f"),
                   help=_(AGREEMENT.help))
    left, right = st.columns(2)
    where = _("the diagonal") if name == "cross" else _("the query")
    sink = _("end of sentence") if ATTENTION_KINDS[name].key_side == "source" else _("start symbol")
    fig = resources.get_figure("heads_profile", (ctx.path, stats.fingerprint, name, layer, head), ctx.settings.display,
                               language(),
                               lambda: offset_profile(numbers, {sink: numbers["sink"],
                                                                _("punctuation"): numbers["punctuation"]},
                                                      _("where its attention lands, relative to {where}").format(
                                                          where=where)))
    chart(left, fig, key="heads_profile", settings=ctx.settings)
    fig = resources.get_figure("heads_map", (ctx.path, stats.fingerprint, name, layer, head), ctx.settings.display,
                               language(), lambda: _map(stats, k, name, layer, head))
    chart(right, fig, key="heads_map", settings=ctx.settings)
    _sentences(ctx, stats, k, name, layer, head)


def _choose(text: str, kind: str, layer: int, head: int) -> None:
    """Before the next run draws any widget: the explorer's sentence, kind, layer and head."""
    for setting_, value in ((TEXT, text), (KIND, kind), (LAYER, layer), (HEAD, head)):
        state.set_widget(setting_.name, value)


def _or_dash(value: float, fmt: str) -> str:
    return "–" if value != value else num(value, fmt)       # nan: not measured


def _map(stats: HeadStatistics, k: KindStatistics, name: str, layer: int, head: int):
    kind = ATTENTION_KINDS[name]

    def labels(points, side: str) -> list[str]:
        return [f"{stats.tokens(side, s)[p]} · {_short(stats.sentences[s])}" for s, p in points]
    shown = float(k.shown[layer, head]) if k.shown is not None else 0.0
    return qk_map(k.queries[layer, head], k.keys[layer, head], labels(k.query_tokens, kind.query_side),
                  labels(k.key_tokens, kind.key_side),
                  _("its queries and keys on one plane ({share} of their variance shown)").format(
                      share=num(shown, ".0%")))


def _short(text: str, n: int = 48) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


def _sentences(ctx: Context, stats: HeadStatistics, k: KindStatistics, name: str, layer: int, head: int) -> None:
    st.markdown(_("**Where it is most and least typical** (the sentences whose own numbers for this head lie "
                  "nearest to, and farthest from, its numbers over the whole set)"))
    cols = st.container(key="data-typical").columns(2)      # the corpus's sentences: data, not interface
    for col, title, picked, tag in ((cols[0], _("Most typical"), k.typical, "t"),
                                    (cols[1], _("Least typical"), k.atypical, "a")):
        col.markdown(f"*{title}*")
        for rank, s in enumerate(picked[layer, head]):
            text = stats.sentences[int(s)]
            col.markdown(f"{rank + 1}. {text}  \n→ {stats.translations[int(s)]}")
            if col.button(_("open in the explorer"), key=f"heads_open_{tag}{rank}", icon=":material/grid_view:",
                          type="tertiary", help=_("this sentence, this kind of attention, this layer and head"),
                          on_click=_choose, args=(text, name, layer, head)):
                ctx.open("explore")
