"""Add a Marian (OPUS-MT) model by its Hugging Face name, from the sidebar: fetched (or read from
the local Hugging Face cache when offline) and converted into the user's checkpoints (model/storage/hub.py,
model/storage/convert.py), then chosen. Only hub names are taken here, never a path on the server."""
from __future__ import annotations

import streamlit as st

from app import resources, state
from app.settings import CHECKPOINT
from i18n import N_, _
from model.storage import hub
from model.storage.convert import ConvertError

HELP = N_("A MarianMT model of the Hugging Face hub (OPUS-MT: Helsinki-NLP/opus-mt-SRC-TGT) is converted into this "
          "project's format and opens like the shipped models. Offline, it is read from the Hugging Face cache.")


def add_model_ui() -> None:
    if not resources.config().add_models:            # off under `make serve` unless the teacher allows it
        return
    with st.sidebar.expander(_("Add a model by name"), icon=":material/add:"):
        name = st.text_input(_("Hugging Face name"), placeholder="Helsinki-NLP/opus-mt-en-de", key="add_model_name",
                             help=_(HELP)).strip()
        if not st.button(_("Add and open"), key="add_model_go", disabled=not name):
            return
        if not hub.REPO_ID.match(name):
            st.error(_("{name!r} is not a hub name: names look like Helsinki-NLP/opus-mt-en-de").format(name=name))
            return
        try:
            with st.spinner(_("Fetching and converting {name}…").format(name=name), show_time=True):
                written = resources.add_model(name)
        except (ConvertError, hub.HubError) as exc:
            st.error(str(exc))
            return
        state.choose_next_run(CHECKPOINT.name, written.name)
        st.rerun()
