"""[issue 20] CLI frictions, each with a test that would have caught it."""

from __future__ import annotations

import re

import pytest


@pytest.fixture(scope="module")
def resnet_result():
    from gpusim.simulation import Scenario, simulate

    return simulate(Scenario.create(model="resnet50", gpu="h100-sxm", gpus=8, per_gpu_batch=256), recommend=False)


def _report(res, interval, capsys) -> str:
    from gpusim.commands.predict import print_report

    print_report(res, interval)
    return capsys.readouterr().out


def test_a_zero_width_interval_is_not_printed(resnet_result, capsys):
    t = resnet_result.throughput_samples_per_s
    iv = {"step_s": (1.0, 1.0), "throughput_samples_per_s": (t, t), "level": 0.9, "applies": False,
          "note": "no fitted parameter of this calibration applies to this hardware: the interval has no width"}
    text = _report(resnet_result, iv, capsys)
    assert "90% interval" not in text and ".." not in text.split("throughput", 1)[1].splitlines()[0]
    assert re.search(r"interval\s+none: no fitted parameter", text)
    # degenerate but said to apply: still no "X .. X"
    text = _report(resnet_result, {**iv, "applies": True, "note": None}, capsys)
    assert "90% interval" not in text and "interval" in text


def test_an_interval_with_width_is_printed(resnet_result, capsys):
    t = resnet_result.throughput_samples_per_s
    iv = {"step_s": (0.9, 1.1), "throughput_samples_per_s": (0.9 * t, 1.1 * t), "level": 0.9, "applies": True}
    text = _report(resnet_result, iv, capsys)
    assert "[90% interval" in text and "none:" not in text
