"""The catalogue as data: every entry of the 46 that existed before the data files gives the numbers it
gave when it was code (``data/catalogue_golden.json`` was written by the pre-split ``gpusim/workload.py``),
and the data files are validated."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpusim.errors import ScenarioError
from gpusim.workload import get_workload, workload_ids
from gpusim.workload.catalogue import DATA_DIR, CatalogueFile, spec_from_dict

GOLDEN = json.loads((Path(__file__).parent / "data" / "catalogue_golden.json").read_text())
NUMBERS = ("params", "fwd_flop_per_sample", "act_bytes_per_sample", "act_ckpt_bytes_per_sample",
           "act_block_bytes_per_sample", "tokens_per_sample", "input_bytes_per_sample", "h2d_bytes_per_sample",
           "preprocess_core_s_per_sample")


@pytest.mark.parametrize("key", sorted(GOLDEN))
def test_entries_give_the_numbers_they_gave_as_code(key):
    model_id, seq = key.split("@")
    w = get_workload(model_id, seq_len=None if seq == "default" else int(seq))
    old = GOLDEN[key]
    for f in NUMBERS:
        assert getattr(w, f) == pytest.approx(old[f], rel=1e-12), f
    assert (w.name, w.family, w.sample_unit, w.seq_len_default) == (old["name"], old["family"], old["sample_unit"],
                                                                    old["seq_len_default"])
    groups = {(g.kind, g.name): (g.count, g.fwd_flop_per_sample, g.fwd_bytes_per_sample, g.weight_bytes)
              for g in w.layers}
    old_groups = {(k, n): tuple(v) for k, n, *v in old["layers"]}
    assert groups.keys() == old_groups.keys()
    for k, v in old_groups.items():
        assert groups[k][0] == v[0] and groups[k][1:] == pytest.approx(v[1:], rel=1e-12), k
    assert w.params_active == w.params and not w.is_moe


def test_old_ids_are_all_still_there_in_order():
    old = [k.split("@")[0] for k in GOLDEN if k.endswith("@default")]
    assert [i for i in workload_ids() if i in old] == [i for i in workload_ids() if i in set(old)]
    assert set(old) <= set(workload_ids()) and len(old) == 46


@pytest.mark.parametrize("path", sorted(DATA_DIR.glob("*.yaml")), ids=lambda p: p.name)
def test_every_data_file_validates_and_cites(path):
    import yaml

    doc = CatalogueFile.model_validate(yaml.safe_load(path.read_text()))
    for m in doc.models:
        assert m.sources and all(len(s) > 10 for s in m.sources)


def test_bad_spec_fields_are_named():
    with pytest.raises(ScenarioError, match="unknown TransformerSpec field 'n_layer'"):
        spec_from_dict({"n_layer": 2}, "x")
    with pytest.raises(ScenarioError, match="'d_model'"):
        spec_from_dict({"n_layers": 2, "d_model": "wide", "n_heads": 2, "vocab_size": 10, "seq_len": 8}, "x")
    with pytest.raises(ScenarioError, match="n_layers must be a positive integer"):
        spec_from_dict({"n_layers": -2, "d_model": 8, "n_heads": 2, "vocab_size": 10, "seq_len": 8}, "x")


def test_grok1_params_match_the_release():
    """xai-org/grok-1 README: 314B parameters (8 experts, 2 per token, 64 layers, d 6144, 48/8 heads,
    vocabulary 131,072; ffn_size(6144, 8) = 32768 in model.py)."""
    w = get_workload("grok-1")
    assert w.params == pytest.approx(314e9, rel=0.01) and w.is_moe
    assert w.transformer.n_experts == 8 and w.transformer.top_k == 2


# NumParams at SeqLen 2048 in MosaicML's MPT training benchmarks (mosaicml/llm-foundry
# scripts/train/benchmarking/README.md, the A100 80GB and H100 80GB tables), for the recipes in
# scripts/train/yamls/pretrain/mpt-*.yaml that the catalogue entries copy.
MPT_RECIPES = [("mpt-125m", 125_311_488), ("mpt-350m", 355_985_408), ("mpt-760m", 760_470_528),
               ("mpt-1b", 1_315_950_592), ("mpt-3b", 2_651_837_440), ("mpt-13b", 12_853_954_560),
               ("mpt-70b-recipe", 64_862_437_376)]


@pytest.mark.parametrize("model_id, published", MPT_RECIPES)
def test_mpt_recipes_match_mosaicmls_benchmark_parameter_counts(model_id, published):
    w = get_workload(model_id)
    assert w.seq_len == 2048
    assert w.params == pytest.approx(published, rel=1e-4), f"{model_id}: {w.params:,.0f} vs {published:,}"
