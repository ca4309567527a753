"""The hardware database loader: validation messages, references, user overrides, lookups."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from gpusim.errors import HardwareFileError, UnknownIdError
from gpusim.hwdb import load, validate_dir

GOOD_GPU = """
gpus:
  - id: my-gpu
    name: My GPU 48GB
    vendor: nvidia
    architecture: ada
    market: datacenter
    form_factor: pcie
    release_year: 2024
    memory_gib: 48
    memory_gbyte_per_s: 900
    dense_tflop_per_s: {fp32: 90, tf32: 180, fp16: 360, bf16: 360}
    pcie: {generation: 4, lanes: 16}
    p2p_pcie: true
    tdp_w: 350
    sources:
      - title: My vendor's datasheet
        fields: [memory_gib, memory_gbyte_per_s, dense_tflop_per_s, pcie, p2p_pcie, tdp_w, release_year]
"""


def write(tmp_path: Path, text: str, name: str = "mine.yaml") -> Path:
    d = tmp_path / "hw"
    d.mkdir(exist_ok=True)
    (d / name).write_text(textwrap.dedent(text))
    return d


def test_the_shipped_database_loads_with_enough_entries(db):
    assert len(db.gpus) >= 30 and len(db.links) >= 15 and len(db.nodes) >= 12
    for kind, entry in db.entries():
        assert entry.sources, (kind, entry.id)


def test_references_resolve(db):
    for n in db.nodes.values():
        assert n.gpu in db.gpus and n.intra_link in db.links
        assert n.nic_link is None or n.nic_link in db.links
    for g in db.gpus.values():
        assert db.pcie_link_id(g) in db.links


def test_a_1000x_typo_is_rejected_naming_file_entry_and_field(tmp_path):
    d = write(tmp_path, GOOD_GPU.replace("memory_gbyte_per_s: 900", "memory_gbyte_per_s: 900000"))
    with pytest.raises(HardwareFileError) as e:
        validate_dir(d)
    msg = str(e.value)
    assert "mine.yaml" in msg and "'my-gpu'" in msg and "memory_gbyte_per_s" in msg and "900000" in msg


def test_unknown_keys_and_missing_sources_are_rejected(tmp_path):
    d = write(tmp_path, GOOD_GPU.replace("tdp_w: 350", "tdp_w: 350\n    colour: red").replace(
        "pcie, p2p_pcie, tdp_w", "pcie, p2p_pcie"))
    with pytest.raises(HardwareFileError) as e:
        validate_dir(d)
    msg = str(e.value)
    assert "colour" in msg and "Extra inputs are not permitted" in msg


def test_figures_without_a_source_are_rejected(tmp_path):
    d = write(tmp_path, GOOD_GPU.replace("pcie, p2p_pcie, tdp_w", "pcie, p2p_pcie"))
    with pytest.raises(HardwareFileError, match=r"figures without a source: \['tdp_w'\]"):
        validate_dir(d)


def test_yaml_syntax_errors_give_file_line_and_column(tmp_path):
    d = write(tmp_path, "gpus:\n  - id: x\n    name: [unclosed\n")
    with pytest.raises(HardwareFileError, match=r"mine\.yaml:\d+:\d+: YAML syntax error"):
        validate_dir(d)


def test_dangling_references_are_reported_with_suggestions(tmp_path):
    d = write(tmp_path, """
    nodes:
      - id: my-box
        name: My box
        kind: server
        gpu: h100-sxmm
        gpus_per_node: 8
        intra_link: nvlink4-nvswitch
        intra_topology: nvswitch
        cpu_cores: 64
        ram_gib: 1024
        numa_sockets: 2
        storage_gbyte_per_s: 10
        sources: [{title: my notes, fields: ['*']}]
    """)
    with pytest.raises(HardwareFileError, match="did you mean 'h100-sxm'"):
        validate_dir(d)


def test_user_files_add_and_override_entries(tmp_path, monkeypatch):
    d = write(tmp_path, GOOD_GPU, "a.yaml")
    (d / "b.yaml").write_text(textwrap.dedent(GOOD_GPU.replace("id: my-gpu", "id: l40s").replace("My GPU 48GB",
                                                                                                   "Overridden")))
    db = load([d])
    assert db.gpu("my-gpu").memory_gib == 48
    assert db.gpu("l40s").name == "Overridden"
    assert ("gpu", "l40s", load().origin[("gpu", "l40s")]) in set(db.overridden)
    monkeypatch.setenv("GPUSIM_HWDB", str(d))
    assert "my-gpu" in load().gpus
    monkeypatch.delenv("GPUSIM_HWDB")
    assert "my-gpu" not in load().gpus


def test_duplicate_ids_in_one_directory_are_an_error(tmp_path):
    d = write(tmp_path, GOOD_GPU, "a.yaml")
    (d / "b.yaml").write_text(textwrap.dedent(GOOD_GPU))
    with pytest.raises(HardwareFileError, match="duplicate id"):
        validate_dir(d)


def test_unknown_ids_suggest_close_matches(db):
    with pytest.raises(UnknownIdError, match="did you mean") as e:
        db.gpu("a100-sxm-80gb")
    assert "a100-sxm4-80gb" in str(e.value)
    with pytest.raises(UnknownIdError, match="h100"):
        db.gpu("h100")


def test_peer_link_ids(db):
    assert db.peer_link_id(db.gpu("h100-sxm")) == "nvlink4-nvswitch"
    assert db.peer_link_id(db.gpu("h100-pcie")) == "nvlink4-bridge"
    assert db.peer_link_id(db.gpu("b200")) == "nvlink5-nvswitch"
    assert db.peer_link_id(db.gpu("rtx-4090")) is None
