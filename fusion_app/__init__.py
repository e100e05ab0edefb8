"""The Streamlit app's own support code (not part of the ``fusion_core`` library, which never imports Streamlit).

* :mod:`fusion_app.state` — per-browser-session state (``st.session_state``, ``fc_*`` keys) and the upload limit;
* :mod:`fusion_app.cache` — the fit cache and the cached diagnostics (agreement, bootstrap, cartels);
* :mod:`fusion_app.fit_form` — the Fit page's method list and one widget per declared parameter;
* :mod:`fusion_app.shell` — the page shell: navigation, sidebar, notices, escaping for markdown;
* :mod:`fusion_app.memory` — returns the memory of ended sessions to the OS (fixed glibc mmap threshold, expired
  sessions emptied, malloc_trim thread).

Pages (``app.py``, ``pages/``) read the session state through these modules, call the library and render figures
from :mod:`fusion_core.plots`; no algorithm code lives on the app side.
"""
