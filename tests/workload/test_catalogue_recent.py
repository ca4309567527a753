"""[issue 17] The 2024-2026 architectures in the catalogue (Llama 4, Nemotron-H and Nemotron 3, GLM-4.5-Air, Moonlight,
Kimi K2, Jamba): each entry is its published config.json as the test fixture holds it, so the catalogue id and the file give
the same model, and the counts are the published ones."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpusim.workload import from_config, get_workload, workload_ids

CONFIGS = Path(__file__).parent / "configs"

#: (catalogue id, fixture, published total parameters, tolerance, source); the MTP modules are left out of the
#: published counts (their sources count without them)
RECENT = [
    ("llama4-scout-17b-16e", "llama4-scout-17b-16e-text", 109e9, 0.015,
     "Meta model card: 109B total with the ~0.7B vision encoder the text model leaves out"),
    ("llama4-maverick-17b-128e", "llama4-maverick-17b-128e", 400e9, 0.01, "Meta model card: 400B total"),
    ("nemotron-h-8b", "nemotron-h-8b", 8e9, 0.03, "Nemotron-H report (arXiv:2504.03624): 8B"),
    ("nemotron-h-56b", "nemotron-h-56b", 56e9, 0.02, "NVIDIA ADLR Nemotron-H page: 56B"),
    ("nemotron-3-nano-30b-a3b", "nemotron-3-nano-30b-a3b", 31.6e9, 0.01, "Nemotron 3 Nano model card: 31.6B"),
    ("nemotron-3-super-120b-a12b", "nemotron-3-super-120b-a12b", 120e9, 0.02, "Nemotron 3 Super model card: 120B"),
    ("glm-4.5-air", "glm-4.5-air", 106e9, 0.03, "GLM-4.5 report (arXiv:2508.06471): GLM-4.5-Air 106B"),
    ("moonlight-16b-a3b", "moonlight-16b-a3b", 16e9, 0.03, "Moonlight (arXiv:2502.16982): 16B total"),
    ("kimi-k2", "kimi-k2", 1.04e12, 0.02, "Kimi K2 (arXiv:2507.20534): 1.04T total"),
    ("jamba-v0.1", "jamba-v0.1", 52e9, 0.02, "Jamba (arXiv:2403.19887) Table 1: 52B available"),
]


@pytest.mark.parametrize("model_id, fixture, published, tol, source", RECENT, ids=[r[0] for r in RECENT])
def test_catalogue_entry_is_its_published_config(model_id, fixture, published, tol, source):
    w, f = get_workload(model_id), from_config(CONFIGS / f"{fixture}.json")
    t, tf = w.transformer, f.transformer
    # the entry's architecture is the file's (only the default sequence length is the catalogue's own)
    assert t.n_layers == tf.n_layers and t.d_model == tf.d_model and t.n_experts == tf.n_experts
    assert w.params == pytest.approx(f.params, rel=1e-12)
    assert w.params_active == pytest.approx(f.params_active, rel=1e-12)
    trained = w.params - t.mtp_params(active=False)
    assert trained == pytest.approx(published, rel=tol), f"{model_id}: {trained:.4g} vs {published:.4g} ({source})"


def test_recent_entries_are_listed_beside_their_families():
    ids = list(workload_ids())
    assert ids.index("llama3.1-405b") < ids.index("llama4-scout-17b-16e") < ids.index("mistral-7b")
    assert ids.index("nemotron-4-340b") < ids.index("nemotron-h-8b") < ids.index("nemotron-3-super-120b-a12b")


def test_the_mtp_entries_train_their_module_and_can_drop_it():
    """GLM-4.5-Air and Nemotron 3 Super carry one MTP module each (num_nextn_predict_layers 1), the others none."""
    for model_id in ("glm-4.5-air", "nemotron-3-super-120b-a12b"):
        assert get_workload(model_id).transformer.mtp_layers == 1
    assert get_workload("nemotron-3-nano-30b-a3b").transformer.mtp_layers == 0
