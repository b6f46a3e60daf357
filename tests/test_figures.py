"""Figure builders as pure functions: arrays in, plotly figures out."""
from __future__ import annotations

import numpy as np
import pytest
from plotly.subplots import make_subplots

import figures


@pytest.mark.parametrize("n_r,n_c", [(1, 1), (2, 4), (3, 8), (6, 8)])
def test_the_grid_is_laid_out_as_make_subplots_would(n_r, n_c):
    """The grid builds its layout as plain dicts (make_subplots was ~6x slower for 24 cells);
    it must put every axis and title where make_subplots puts them."""
    attn = np.random.default_rng(0).random((n_r, n_c, 7, 5))
    ours = figures.attention_grid(attn, list("abcdefg"), list("abcde")).to_plotly_json()["layout"]
    ref = make_subplots(rows=n_r, cols=n_c, column_titles=[f"head {j}" for j in range(n_c)],
                        row_titles=[f"layer {i}" for i in range(n_r)],
                        horizontal_spacing=0.012, vertical_spacing=0.03).to_plotly_json()["layout"]
    axes = [k for k in ref if k.startswith(("xaxis", "yaxis"))]
    assert sorted(axes) == sorted(k for k in ours if k.startswith(("xaxis", "yaxis")))
    for k in axes:
        assert np.allclose(ref[k]["domain"], ours[k]["domain"]), k
        assert ref[k]["anchor"] == ours[k]["anchor"], k
        assert ours[k]["showticklabels"] is False
        assert (ours[k].get("autorange") == "reversed") == k.startswith("yaxis")   # row 0 of a matrix on top
    assert len(ref["annotations"]) == len(ours["annotations"]) == n_r + n_c
    for a, b in zip(ref["annotations"], ours["annotations"]):
        assert a["text"] == b["text"]
        assert a["x"] == pytest.approx(b["x"]) and a["y"] == pytest.approx(b["y"])
        assert (a["xanchor"], a["yanchor"], a.get("textangle")) == (b["xanchor"], b["yanchor"], b.get("textangle"))


def test_each_grid_cell_draws_its_own_matrix_on_its_own_axes():
    attn = np.random.default_rng(1).random((2, 3, 4, 6))
    built = figures.attention_grid(attn, list("abcd"), list("uvwxyz"), highlight_row=2)
    fig = built.to_plotly_json()
    assert len(fig["data"]) == 6
    for k, trace in enumerate(fig["data"], start=1):
        i, j = divmod(k - 1, 3)
        assert np.allclose(np.asarray(built.data[k - 1].z), attn[i, j], atol=1e-6)
        assert trace["xaxis"] == ("x" if k == 1 else f"x{k}") and trace["yaxis"] == ("y" if k == 1 else f"y{k}")
        assert trace["hovertemplate"].startswith(f"layer {i}, head {j}")
    shapes = fig["layout"]["shapes"]
    assert [(s["xref"], s["y0"], s["y1"]) for s in shapes] == [("x" if k == 1 else f"x{k}", 1.5, 2.5)
                                                               for k in range(1, 7)]
    assert fig["layout"]["coloraxis"]["cmin"] == 0 and fig["layout"]["coloraxis"]["cmax"] == 1


def test_grid_rejects_tokens_that_do_not_match():
    with pytest.raises(ValueError, match="do not match"):
        figures.attention_grid(np.zeros((1, 1, 3, 3)), list("ab"), list("abc"))


def test_the_single_heatmap_names_every_token_and_marks_the_row():
    m = np.random.default_rng(2).random((3, 4))
    built = figures.attention_heatmap(m, ["a", "<b>", "a"], list("wxyz"), title="T", highlight_row=1)
    (trace,) = built.data
    assert np.allclose(np.asarray(trace.z), m) and trace.zmin == 0 and trace.zmax == 1
    assert list(trace.customdata[1][2]) == ["1: &lt;b&gt;", "2: y"]          # escaped, repeated tokens apart
    lay = built.to_plotly_json()["layout"]
    assert list(lay["yaxis"]["ticktext"]) == ["a", "&lt;b&gt;", "a"] and lay["yaxis"]["autorange"] == "reversed"
    assert list(lay["xaxis"]["tickvals"]) == [0, 1, 2, 3] and lay["xaxis"]["tickangle"] == -60
    (rect,) = lay["shapes"]
    assert (rect["y0"], rect["y1"], rect["x0"], rect["x1"]) == (0.5, 1.5, -0.5, 3.5)
    assert lay["title"]["text"] == "T"
    with pytest.raises(ValueError, match="does not match"):
        figures.attention_heatmap(m, list("ab"), list("wxyz"))


def test_the_display_is_applied_in_one_place():
    """Display.apply sets the font, recolours only what is marked sequential, moves only the
    annotations that follow the font, and leaves an explicit colour scale alone."""
    from figures.common import CONTRAST_COLORSCALE, Display
    toks = ["a", "b", "c"]
    weights = figures.attention_heatmap(np.eye(3), toks, toks)                    # follows the display
    scores = figures.scores_heatmap(np.eye(3), toks, toks, "scores")             # Viridis, its own
    grid = figures.attention_grid(np.ones((2, 2, 3, 3)) / 3, toks, toks)         # a shared colour axis
    projector = Display.for_projector(True)
    for fig in (weights, scores, grid):
        projector.apply(fig)
        assert fig.layout.font.size == 18
    viridis = weights.data[0].colorscale
    assert viridis == scores.data[0].colorscale == grid.layout.coloraxis.colorscale
    assert viridis != figures.attention_heatmap(np.eye(3), toks, toks).data[0].colorscale   # it did change
    assert CONTRAST_COLORSCALE == "Viridis"
    assert [a.font.size for a in grid.layout.annotations] == [16] * 4            # grid titles keep their size
    from figures import diagram
    from model.network.config import preset
    cfg = preset("tiny", src_vocab_size=40, tgt_vocab_size=40)
    plain = Display().apply(diagram.model_diagram(cfg, {}, {}))
    large = projector.apply(diagram.model_diagram(cfg, {}, {}, large=True))
    sizes = lambda f: [a.font.size for a in f.layout.annotations if a.name == diagram.FOLLOWS_FONT]  # noqa: E731
    assert sizes(plain) and [s + 6 for s in sizes(plain)] == sizes(large)


def test_unsure_tokens_are_told_apart_by_pattern_and_text_not_colour_alone():
    fig = figures.token_confidence(["▁Ich", "▁liebe", "▁Piz", "za", "</s>"], [0.9, 0.2, 0.05, 0.99, 0.97], 0.25,
                                   current=2)
    bar = fig.data[0]
    unsure = [i for i, t in enumerate(bar.text) if t.endswith("unsure")]
    assert unsure == [1, 2]
    assert [bool(s) for s in bar.marker.pattern.shape] == [False, True, True, False, False]
    assert len({bar.marker.color[i] for i in unsure}) == 1 and bar.marker.color[0] != bar.marker.color[1]
    assert list(bar.marker.line.width).index(3) == 2 and list(bar.marker.line.width).count(3) == 1
    assert list(fig.layout.xaxis.ticktext) == ["▁Ich", "▁liebe", "▁Piz", "za", "&lt;/s&gt;"]


# ---- attribution ---------------------------------------------------------------------------------
def test_attribution_heatmap_puts_source_then_prefix_on_one_scale():
    rng = np.random.default_rng(2)
    src, pre = rng.random((3, 4)), np.tril(rng.random((3, 3)))
    fig = figures.attribution_heatmap(src, pre, list("abcd"), ["<s>", "x", "y"], ["x", "y", "</s>"], title="m",
                                      highlight_row=1)
    trace = fig.data[0]
    assert np.array(trace.z).shape == (3, 7)
    assert np.allclose(np.array(trace.z)[:, :4], src) and np.allclose(np.array(trace.z)[:, 4:], pre)
    assert (trace.zmin, trace.zmax) == (0, 1)                              # every method: the same scale
    assert list(fig.layout.xaxis.ticktext[:4]) == list("abcd") and fig.layout.xaxis.ticktext[4].endswith("&lt;s&gt;")
    assert fig.layout.shapes[0].x0 == 3.5                                  # the line between the two parts
    with pytest.raises(ValueError):
        figures.attribution_heatmap(src, pre, list("abc"), ["<s>", "x", "y"], ["x", "y", "</s>"])


def test_source_share_bars_one_trace_per_method_and_patterned():
    fig = figures.source_share_bars(["a", "b"], {"ALTI+": np.array([0.2, 0.9]), "IG": np.array([0.5, 0.5])})
    assert [t.name for t in fig.data] == ["ALTI+", "IG"]
    assert fig.data[0].marker.pattern.shape != fig.data[1].marker.pattern.shape    # not colour alone
    assert tuple(fig.layout.yaxis.range) == (0, 1)


def test_head_agreement_grid_writes_every_number_and_leaves_nan_blank():
    agreement = np.array([[0.5, np.nan], [-0.25, 1.0]])
    fig = figures.head_agreement_grid(agreement)
    assert [list(row) for row in fig.data[0].text] == [["0.50", ""], ["-0.25", "1.00"]]
    assert (fig.data[0].zmin, fig.data[0].zmax) == (-1, 1)


def test_faithfulness_bars_most_faithful_first():
    fig = figures.faithfulness_bars(["attention", "ALTI+", "random"], np.array([[1.0, 2.0], [3.0, 4.0], [0.1, 0.5]]),
                                    np.zeros((3, 2)), (1, 3))
    assert list(fig.layout.yaxis.ticktext) == ["ALTI+", "attention", "random"]
    assert list(fig.data[0].x) == [3.0, 1.0, 0.1] and fig.data[1].name == "top-3 erased"


def test_step_used_vs_looked_compares_shares():
    fig = figures.step_used_vs_looked(list("abc"), np.array([2.0, 1.0, 1.0]), np.array([-1.0, 0.0, 3.0]), "IG")
    assert np.allclose(fig.data[0].y, [0.5, 0.25, 0.25]) and np.allclose(fig.data[1].y, [0.25, 0.0, 0.75])


# ---- heads across the corpus ----------------------------------------------------------------------
def test_the_heads_grid_writes_value_and_role_in_every_cell():
    from figures.heads import head_grid
    values = np.array([[0.1, np.nan], [-0.3, 0.2]])
    roles = [["previous token", "mixed"], ["diagonal / alignment", "focused, by content"]]
    fig = head_grid(values, roles, "t", "cost", signed=True, selected=(1, 0))
    hm = fig.data[0]
    assert hm.text[0][0] == "<b>0.10</b><br>previous token" and hm.text[0][1].startswith("<b>–</b>")
    assert hm.text[1][1].endswith("focused") and hm.zmid == 0 and hm.zmin == -0.3
    assert fig.layout.shapes[0].x0 == -0.5 and fig.layout.shapes[0].y0 == 0.5      # layer 1, head 0 outlined
    plain = head_grid(np.abs(values), roles, "t", "share")
    assert plain.data[0].meta == "sequential" and plain.data[0].zmid is None


def test_the_offset_profile_and_the_query_key_map():
    from figures.heads import offset_profile, qk_map
    shares = {"left": 0.1, "previous": 0.5, "same": 0.2, "next": 0.1, "right": 0.1}
    fig = offset_profile(shares, {"end of sentence": 0.3}, "t")
    assert list(fig.data[0].y[:5]) == [0.1, 0.5, 0.2, 0.1, 0.1] and fig.data[0].x[-1] == "end of sentence"
    assert len(set(fig.data[0].marker.color)) == 2                  # the extra share is told apart
    fig = qk_map(np.zeros((3, 2)), np.ones((2, 2)), ["a", "<b>", "c"], ["x", "y"], "t")
    queries, keys = fig.data
    assert (len(queries.x), len(keys.x)) == (3, 2) and queries.text[1] == "&lt;b&gt;"
    assert queries.marker.symbol != keys.marker.symbol and queries.marker.color != keys.marker.color


def test_a_poll_shows_the_class_beside_the_model():
    fig = figures.poll_results(["▁Hund", "▁Mann", "▁Frau"], ["▁Mann", "▁Mann", "▁Hund", "Katze"],
                               {"▁Hund": 0.1, "▁Mann": 0.7, "▁Frau": 0.05})
    cls, model = fig.data
    assert list(cls.x) == [0.25, 0.5, 0.0, 0.25]                  # shares, typed words pooled last
    assert abs(sum(cls.x) - 1) < 1e-9 and "4 answers" in cls.name
    assert list(model.x)[:3] == [0.1, 0.7, 0.05] and model.x[3] is None
    assert fig.layout.yaxis.ticktext[-1] == "(their own word)"
    assert cls.marker.color != model.marker.color and model.marker.pattern.shape == "/"   # not by hue alone
    empty = figures.poll_results(["a", "b"], [])
    assert list(empty.data[0].x) == [0.0, 0.0] and len(empty.data) == 1


def test_the_heads_chart_holds_every_head_shows_the_chosen_and_its_menu_shows_each():
    rng = np.random.default_rng(0)
    attn = rng.random((3, 4, 5, 6))
    rows, cols = ["a", "b", "a", "c", "d"], ["x", "y", "x", "z", "w", "v"]     # repeated tokens stay apart
    fig = figures.attention_heads(attn, rows, cols, layer=1, head=2, highlight_row=3)
    assert len(fig.data) == 12 and [t.visible for t in fig.data].count(True) == 1
    assert fig.data[1 * 4 + 2].visible and np.allclose(fig.data[6].z, attn[1, 2], atol=1e-6)
    assert fig.data[0].x == tuple(f"{j}: {t}" for j, t in enumerate(cols))              # categories, unique
    assert list(fig.layout.xaxis.ticktext) == cols and list(fig.layout.yaxis.ticktext) == rows
    menu = fig.layout.updatemenus[0]
    assert menu.active == 6 and len(menu.buttons) == 12
    for k, button in enumerate(menu.buttons):
        visible = button.args[0]["visible"]
        assert visible.count(True) == 1 and visible[k]                                 # each shows its own head
        assert button.args[1]["title.text"] == button.label == fig.data[k].name
    assert fig.layout.shapes[0].y0 == 2.5
    with pytest.raises(ValueError):
        figures.attention_heads(attn, rows[:4], cols, 0, 0)


def test_the_heads_chart_is_described_by_the_head_it_shows():
    from figures import describe
    attn = np.zeros((2, 2, 3, 3))
    attn[1, 1, 2, 0] = 0.9                                   # only the shown head has its peak there
    attn[0, 0, 0, 2] = 0.5
    said = describe.summary(figures.attention_heads(attn, ["a", "b", "c"], ["x", "y", "z"], layer=1, head=1))
    assert "a heatmap of 3 rows" in said and "0.9" in said and "row c, column x" in said


def _builders() -> dict:
    """Each figure built from plain dicts (figures.common.from_spec), with a display applied after it."""
    from figures import diagram
    from model.network.config import preset
    rng = np.random.default_rng(3)
    attn = rng.random((2, 3, 4, 5))
    attn /= attn.sum(-1, keepdims=True)
    rows, cols = ["a", "b<", "c", "a"], ["x", "y", "z", "&", "</s>"]
    source, prefix = rng.random((3, 4)), rng.random((3, 3))
    cfg = preset("tiny", src_vocab_size=40, tgt_vocab_size=40)
    blocks = diagram.blocks(cfg)
    tree = [dict(x=x, y=y, token=t, score=-x / 3, status=st, **({"text": "a b"} if t == "b" else {}))
            for x, y, t, st in ((0, 0, "<s>", "kept"), (1, 0, "a", "kept"), (1, 1, "b", "pruned"), (2, 0, "c", "live"),
                                (2, 1, "</s>", "finished"))]
    return {
        "heatmap": lambda: figures.attention_heatmap(attn[0, 0], rows, cols, title="t", highlight_row=1),
        "heads": lambda: figures.attention_heads(attn, rows, cols, 1, 2, highlight_row=0),
        "grid": lambda: figures.attention_grid(attn, rows, cols, title="g", highlight_row=2),
        "diagram": lambda: diagram.model_diagram(cfg, {b.id: np.linspace(-1, 1, 8) for b in blocks[:3]} | {
            blocks[3].id: np.linspace(0, 1, 5)}, {blocks[4].id: "der, die"}, selected=blocks[1].id, title="d"),
        "top_k": lambda: figures.top_k_bar(["a", "b<", "c"], [0.6, 0.3, 0.1], chosen="b<", title="k"),
        "tree": lambda: figures.beam_tree(tree, [(0, 1), (0, 2), (1, 3), (2, 4)], title="b", selected=3),
        "confidence": lambda: figures.token_confidence(["a", "b", "</s>"], [0.9, 0.3, 0.8], 0.5, current=1,
                                                       title="c"),
        "attribution": lambda: figures.attribution_heatmap(source, prefix, list("abcd"), ["<s>", "x", "y"],
                                                           ["x", "y", "</s>"], title="m"),
    }


@pytest.mark.parametrize("name", ["heatmap", "heads", "grid", "diagram", "attribution", "top_k", "tree",
                                  "confidence"])
def test_a_figure_built_unvalidated_is_the_validated_figure(name, monkeypatch):
    """What a server sends (no validation: figures.common.from_spec) is what plotly's validation gives, on
    the base display and on the projector's; and validated, a wrong property raises (what the suite runs)."""
    import json

    import plotly.io

    from figures.common import VALIDATE, Display, from_spec
    build = _builders()[name]
    for display in (Display(), Display.for_projector(True)):
        shown = {}
        for checked in ("0", "1"):
            monkeypatch.setenv(VALIDATE, checked)
            shown[checked] = json.loads(plotly.io.to_json(display.apply(build()), validate=False))
        assert shown["0"] == shown["1"]
    with pytest.raises(ValueError):
        from_spec([dict(type="heatmap", z=[[1]], colour="red")], {})


def test_a_shared_figure_makes_its_dict_once_and_a_change_after_sharing_fails(monkeypatch):
    """What app/resources.get_figure hands to every session: the dict st.plotly_chart sends is made once and is
    the figure's own; changing the figure after sharing it is caught (the suite runs with validation on)."""
    from figures.common import VALIDATE, SharedFigure
    fig = figures.attention_heatmap(np.full((3, 4), 0.25), ["a", "b", "c"], ["w", "x", "y", "z"], "t")
    before = fig.to_json()
    same = figures.shared(fig)
    assert isinstance(same, SharedFigure) and same is fig
    assert same.to_dict() is same.to_dict() and same.to_json() == before
    monkeypatch.setenv(VALIDATE, "1")
    same.update_layout(title_text="changed")
    with pytest.raises(AssertionError, match="shared figure was changed"):
        same.to_dict()


class _Untouchable(dict):
    """A trace dict that fails if anything takes one of its keys out of it, even for a moment (plotly.io.to_json
    asks for a "uid" it would drop, which it has not: that changes nothing)."""

    def pop(self, key, *default):
        if key in self:
            raise AssertionError(f"the shared dict's trace lost {key!r}")
        return super().pop(key, *default)


def test_checking_a_shared_figure_leaves_its_dict_alone(monkeypatch):
    """Other sessions read a shared figure's dict at any moment: the suite's check that it was not changed must not
    change it (validating a dict made plotly pop each trace's "type" and put it back: a session reading it then drew
    a heatmap as a scatter, the class bell's "Invalid property specified for object of type Scatter")."""
    from figures.common import VALIDATE
    monkeypatch.setenv(VALIDATE, "1")
    same = figures.shared(figures.attention_heatmap(np.full((3, 4), 0.25), ["a", "b", "c"], ["w", "x", "y", "z"], "t"))
    made = same.to_dict()
    made["data"][0] = _Untouchable(made["data"][0])
    assert same.to_dict() is made and made["data"][0]["type"] == "heatmap"


def test_a_named_colour_scale_is_plotlys_own_and_a_new_list_each_time():
    import plotly.colors

    from figures.common import scale
    first = scale("Viridis")
    assert first == [[float(at), c] for at, c in plotly.colors.get_colorscale("Viridis")]
    first[0][1] = "changed"                                  # a figure's change stays in its own copy
    assert scale("Viridis")[0][1] != "changed" and scale([[0, "#fff"], [1, "#000"]]) == [[0.0, "#fff"], [1.0, "#000"]]


def test_a_poll_built_from_plain_dicts_is_the_figure_plotly_validates(monkeypatch):
    """poll_results skips plotly's validation when the app runs (every follower builds it at a reveal): validation
    changes nothing in it (each property already as plotly writes it), and what the test above reads holds."""
    import json

    import plotly.io as pio

    from figures.common import VALIDATE
    args = (["▁Hund", "▁Mann"], ["▁Mann", "Katze"], {"▁Hund": 0.1, "▁Mann": 0.7})
    monkeypatch.setenv(VALIDATE, "0")
    fast = figures.poll_results(*args, title="t")
    monkeypatch.setenv(VALIDATE, "1")
    checked = figures.poll_results(*args, title="t")
    assert json.loads(pio.to_json(fast, validate=False)) == json.loads(pio.to_json(checked, validate=False))
    assert fast.layout.title.text == "t" and fast.data[1].marker.pattern.shape == "/"
