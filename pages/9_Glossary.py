"""Glossary: every term the app and the audit report use, explained once in plain words
(:data:`fusion_core.diagnostics.audit.glossary.TERMS`)."""

import streamlit as st

from fusion_app.shell import page_setup
from fusion_core.diagnostics.audit.glossary import TERMS

page_setup("Glossary")
st.title("Glossary")
query = st.text_input("Find a term", key="glossary_search", placeholder="e.g. kappa")
for term, text in TERMS.items():
    if query and query.lower() not in (term + " " + text).lower():
        continue
    st.markdown(f"**{term}** — {text}")  # the library's own text, no user input
