"""The LLM layouts against published Megatron-LM runs (validation/llm_parallel.csv): Korthikanti et al. 2022
Table 5 step times and Narayanan et al. SC'21 Table 1 TFLOP/s per GPU. The issue's targets (Table 5 mean
<= 3.5% and every row <= 8%; Table 1 median <= 8%) are reported by `gpusim validate`; these tests guard what
the defaults reach today so that a change that makes it worse fails."""

from __future__ import annotations

import pytest

from gpusim import validation_llm as V


@pytest.fixture(scope="module")
def results(db):
    return V.run(db=db)


def test_every_row_is_predicted_and_fits(results):
    assert len(results) == 18
    for r in results:
        assert r.predicted is not None, r.error
        assert r.fits_in_memory, (r.model, r.memory_per_gpu_bytes)  # every published run ran


def test_table5_step_times(results):
    s = V.summarize(results)[V.TABLE5]
    assert s["predicted"] == 8
    assert s["mean_ape"] <= 0.035 and s["max_ape"] <= 0.08  # the bar (1.7% and 4.4% when written)


def test_table1_tflops_per_gpu(results):
    s = V.summarize(results)[V.TABLE1]
    assert s["predicted"] == 10
    assert s["median_ape"] <= 0.08 and s["max_ape"] <= 0.12
    # what the table does not state is chosen by gpusim's own search, and said so
    assert all("micro-batch" in r.chosen for r in results if r.source_id == V.TABLE1)


def test_paper_flop_formula():
    r = {"global_batch": "3072", "seq_len": "2048", "layers": "128", "hidden": "25600", "vocab": "51200"}
    B, s, l, h, Vv = 3072, 2048, 128, 25600, 51200
    assert V.paper_flop_per_iteration(r) == pytest.approx(96 * B * s * l * h * h * (1 + s / (6 * h) + Vv / (16 * l * h)))
