"""Calibration: upload a calibration file or a profile; measured vs fitted curves; use it on every page.

Appears when calibration (``gpusim.calibration``) is installed; until then the page says so."""

import importlib.util

import streamlit as st

st.markdown("#### Calibration: fit gpusim to your own measurements")
if importlib.util.find_spec("gpusim.calibration") is None:
    st.info("Calibration (`gpusim.calibration`) is not installed yet, so this page has nothing to show and every "
            "page uses the model's default parameters (published measurements, named in `gpusim/params.py`). "
            "When it lands, this page takes a calibration file or a profile from `gpusim calibrate`, draws measured "
            "vs fitted curves, and applies the fitted parameters to every other page.",
            icon=":material/hourglass_empty:")
else:
    st.warning("`gpusim.calibration` is installed, but this page is not wired to it yet: use `gpusim fit` and "
               "`gpusim predict --calibration FILE` on the command line meanwhile.", icon=":material/construction:")
