"""The Streamlit app: type a sentence, see every attention head, step through decoding.

Run with `make app` (or `streamlit run app/main.py`). Checkpoints are looked up in
checkpoints/ (or $TRANSFORMER_CHECKPOINTS). Each run: read the link (first run of a
session only), draw the sidebar's settings, then the page the URL names
(app/pages.py), then write the state back into the link. docs/architecture.md
describes the whole flow.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # `streamlit run app/main.py` from anywhere
    sys.path.insert(0, str(ROOT))

import streamlit as st  # noqa: E402

from app import bell, class_code, classroom, lab_models, links, pages, polls, resources, state  # noqa: E402
from app.add_model import add_model_ui  # noqa: E402
from app.settings import PROJECTOR, chosen_language, sidebar  # noqa: E402
from app.ui import page_style  # noqa: E402
from i18n import _, use  # noqa: E402


def no_checkpoint_page() -> None:
    st.title(_("No checkpoint yet"))
    st.info(_("The app looks for trained checkpoints in `{folder}` and found none.").format(
        folder=resources.checkpoints_dir()))
    st.markdown(_("Train one (about 2 hours on a 2-core CPU, much less on a GPU):"))
    st.code(
        "python train.py --data ../shared/data/multi30k --src en --tgt de --preset small \\\n"
        "    --out checkpoints/multi30k-en-de --time-budget 110 --half",
        language="bash",
    )


def run() -> None:
    checkpoints = lab_models.checkpoints()
    use(chosen_language())
    page_style()
    if not checkpoints:
        no_checkpoint_page()
        add_model_ui()
        return
    jump = links.read(pages.SITE, [c.name for c in checkpoints])
    use(chosen_language())                      # a link's language
    classroom.join_from_link()
    jump = classroom.apply_pending(pages.SITE) or jump    # a follower: the teacher's view, before any widget
    use(chosen_language())                      # the teacher's
    settings = sidebar(checkpoints, resources.DEFAULT_CHECKPOINT, lambda path: resources.get_checkpoint(str(path)),
                       below_checkpoint=add_model_ui)
    classroom.sidebar(pages.SITE)
    polls.answers_download()
    class_code.join_banner(classroom.shown_code())
    polls.poll_area()
    nav, st_pages = pages.navigation(settings)
    if jump is not None and jump != (state.held(state.PAGE) or pages.PAGES[0].slug):
        st.switch_page(st_pages[jump])          # ?view=<slug>: an old-style link, AppTest, the teacher's page
    for problem in links.problems_once():      # what did not fit in the link, never dropped in silence: said on
        st.warning(problem, icon=":material/link_off:")   # the run that draws the page the link opened
    nav.run()


def projector_on() -> bool:
    """Projector mode, known before anything is drawn: the toggle just moved, else the session's, else
    a first run's link. The sidebar then starts collapsed: the front of a room shows the page's picture."""
    for value in (state.widget(PROJECTOR.name), state.get(PROJECTOR.name)):
        if value is not None:
            return bool(value)
    raw = st.query_params.get(PROJECTOR.param)
    return bool(raw) and PROJECTOR.from_link(raw) is True


def main() -> None:
    st.set_page_config(page_title="Transformer, explained", page_icon="🔎", layout="wide",
                       initial_sidebar_state="collapsed" if projector_on() else "auto")
    completed = False
    try:
        run()
        completed = True
    finally:  # also when a page ends the run early (st.rerun while playing, st.switch_page)
        classroom.end_of_run(pages.SITE, completed)


if __name__ == "__main__":   # Streamlit runs this file as __main__; a training lab's spawned process
    main()                   # imports it as __mp_main__ and must not draw the whole app again
elif __name__ != "__mp_main__":   # `streamlit run app/main.py` finds this and serves the app through it
    server = st.App(__file__, routes=bell.routes())   # (ASGI): the pages and the class bell's route (app/bell.py)
