"""Environment capture: what the measurements depend on, stored in meta.json beside the records.

Per node (local rank 0): host, OS, Python, torch / CUDA / NCCL / cuDNN versions, driver, CPU model,
sockets, cores, RAM, the GPUs (torch properties plus NVML clocks, temperature, power, clock-event
("throttle") reasons and PCIe link), and ``nvidia-smi topo -m`` / ``topo -p2p r`` with gpusim's
reading of them. Per rank: host, pid, local rank, device and its nvidia-smi index.
NVML (nvidia-ml-py) and nvidia-smi are optional: without them those fields are None.
"""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
import sys
from typing import Any

import torch

from gpusim.calibrate_bench.records import utc_now

# NVML clock-event reason bits (nvml.h: nvmlClocksEventReason*, formerly nvmlClocksThrottleReason*).
_REASONS = {
    0x1: "gpu_idle",
    0x2: "applications_clocks_setting",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown",
    0x100: "display_clock_setting",
}


class Nvml:
    """A thin, failure-tolerant wrapper over pynvml (nvidia-ml-py)."""

    def __init__(self):
        import pynvml  # noqa: PLC0415 (optional dependency)

        self.nv = pynvml
        pynvml.nvmlInit()

    @classmethod
    def try_open(cls) -> Nvml | None:
        try:
            return cls()
        except Exception:  # not installed, no driver, no GPU
            return None

    def _call(self, name: str, *args, default=None):
        fn = getattr(self.nv, name, None)
        if fn is None:
            return default
        try:
            v = fn(*args)
        except Exception:
            return default
        return v.decode() if isinstance(v, bytes) else v

    def count(self) -> int:
        return self._call("nvmlDeviceGetCount", default=0) or 0

    def handle(self, index: int):
        return self._call("nvmlDeviceGetHandleByIndex", index)

    def index_of_bus_id(self, bus_id: str) -> int | None:
        """nvidia-smi index of the GPU at PCI ``bus_id`` (any zero-padding of the domain)."""
        want = _norm_bus(bus_id)
        for i in range(self.count()):
            h = self.handle(i)
            pci = self._call("nvmlDeviceGetPciInfo", h)
            if pci is not None:
                bid = pci.busId.decode() if isinstance(pci.busId, bytes) else str(pci.busId)
                if _norm_bus(bid) == want:
                    return i
        return None

    def throttle_reasons(self, handle) -> list[str]:
        mask = self._call("nvmlDeviceGetCurrentClocksEventReasons", handle)
        if mask is None:
            mask = self._call("nvmlDeviceGetCurrentClocksThrottleReasons", handle)
        if not mask:
            return []
        return [name for bit, name in _REASONS.items() if mask & bit]

    def gpu(self, index: int) -> dict:
        nv = self.nv
        h = self.handle(index)
        if h is None:
            return {"index": index, "name": "unknown"}
        pci = self._call("nvmlDeviceGetPciInfo", h)
        mem = self._call("nvmlDeviceGetMemoryInfo", h)
        power = self._call("nvmlDeviceGetPowerUsage", h)
        limit = self._call("nvmlDeviceGetEnforcedPowerLimit", h)
        clk = getattr(nv, "NVML_CLOCK_SM", 1), getattr(nv, "NVML_CLOCK_MEM", 2)
        return {
            "index": index,
            "name": self._call("nvmlDeviceGetName", h) or "unknown",
            "uuid": self._call("nvmlDeviceGetUUID", h),
            "pci_bus_id": (pci.busId.decode() if isinstance(pci.busId, bytes) else str(pci.busId)) if pci else None,
            "memory_total_bytes": int(mem.total) if mem is not None else None,
            "clocks_sm_mhz": self._call("nvmlDeviceGetClockInfo", h, clk[0]),
            "clocks_mem_mhz": self._call("nvmlDeviceGetClockInfo", h, clk[1]),
            "clocks_sm_max_mhz": self._call("nvmlDeviceGetMaxClockInfo", h, clk[0]),
            "clocks_mem_max_mhz": self._call("nvmlDeviceGetMaxClockInfo", h, clk[1]),
            "temperature_c": self._call("nvmlDeviceGetTemperature", h, getattr(nv, "NVML_TEMPERATURE_GPU", 0)),
            "power_w": power / 1e3 if power is not None else None,  # NVML reports milliwatts
            "power_limit_w": limit / 1e3 if limit is not None else None,
            "throttle_reasons": self.throttle_reasons(h),
            "pcie_generation": self._call("nvmlDeviceGetCurrPcieLinkGeneration", h),
            "pcie_width": self._call("nvmlDeviceGetCurrPcieLinkWidth", h),
            "pcie_max_generation": self._call("nvmlDeviceGetMaxPcieLinkGeneration", h),
            "pcie_max_width": self._call("nvmlDeviceGetMaxPcieLinkWidth", h),
            "persistence_mode": self._call("nvmlDeviceGetPersistenceMode", h),
        }

    def driver(self) -> str | None:
        return self._call("nvmlSystemGetDriverVersion")


def _norm_bus(bus_id: str) -> tuple[int, int, int, int] | str:
    """'00000000:07:00.0' and '0000:07:00.0' -> (0, 7, 0, 0)."""
    try:
        dom, bus, rest = bus_id.strip().lower().split(":")
        dev, fn = rest.split(".")
        return int(dom, 16), int(bus, 16), int(dev, 16), int(fn, 16)
    except ValueError:
        return bus_id.strip().lower()


def torch_bus_id(index: int) -> str | None:
    p = torch.cuda.get_device_properties(index)
    bus, dev, dom = (getattr(p, a, None) for a in ("pci_bus_id", "pci_device_id", "pci_domain_id"))
    if bus is None or dev is None:
        return None
    return f"{dom or 0:04x}:{bus:02x}:{dev:02x}.0"


def _run(cmd: list[str], timeout_s: float = 20.0) -> str | None:
    if not shutil.which(cmd[0]):
        return None
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return p.stdout if p.returncode == 0 and p.stdout.strip() else None


def cpu_info() -> dict:
    model, sockets, cores = None, set(), set()
    try:
        phys = None
        with open("/proc/cpuinfo") as f:
            for line in f:
                k, _, v = line.partition(":")
                k, v = k.strip(), v.strip()
                if k == "model name" and model is None:
                    model = v
                elif k == "physical id":
                    phys = v
                    sockets.add(v)
                elif k == "core id":
                    cores.add((phys, v))
    except OSError:
        pass
    ram = None
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    ram = int(line.split()[1]) * 1024  # kB (KiB) in /proc/meminfo
                    break
    except (OSError, ValueError):
        pass
    return {
        "cpu_model": model or platform.processor() or None,
        "cpu_sockets": len(sockets) or None,
        "cpu_cores": len(cores) or None,
        "cpu_threads": os.cpu_count(),
        "ram_bytes": ram,
    }


def node_env(host: str, node_rank: int, ranks: list[int], nvml: Nvml | None, device_kind: str) -> dict:
    """The environment of this node (call on its local rank 0)."""
    cuda = torch.cuda.is_available()
    env: dict[str, Any] = {
        "host": host, "node_rank": node_rank, "ranks": ranks, "date_utc": utc_now(),
        "os": platform.platform(), "python": sys.version.split()[0], "torch": torch.__version__,
        "cuda": torch.version.cuda, "nccl": None, "cudnn": None, "driver": None,
        "cpu_capability": _safe(lambda: torch.backends.cpu.get_cpu_capability()),
        "torch_threads": torch.get_num_threads(),
        "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
        "visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
        # [issue 18] NCCL's settings change what the collectives measure (NCCL_P2P_DISABLE stages every intra-node
        # transfer through host memory, NVLink included)
        "nccl_env": {k: v for k, v in sorted(os.environ.items()) if k.startswith("NCCL_")},
        **cpu_info(), "gpus": [], "nvml": nvml is not None,
        "topo_text": None, "topo_p2p_text": None, "topology": None, "topology_warnings": [],
    }
    if cuda:
        env["nccl"] = _safe(lambda: ".".join(map(str, torch.cuda.nccl.version())))
        env["cudnn"] = _safe(lambda: str(torch.backends.cudnn.version()))
        for i in range(torch.cuda.device_count()):
            p = torch.cuda.get_device_properties(i)
            g = {"index": i, "name": p.name, "memory_total_bytes": int(p.total_memory),
                 "compute_capability": f"{p.major}.{p.minor}", "multiprocessors": p.multi_processor_count,
                 "pci_bus_id": _safe(lambda i=i: torch_bus_id(i))}
            if nvml is not None:
                ni = nvml.index_of_bus_id(g["pci_bus_id"]) if g["pci_bus_id"] else None
                if ni is None and not os.environ.get("CUDA_VISIBLE_DEVICES"):
                    ni = i
                if ni is not None:
                    n = nvml.gpu(ni)
                    n.pop("index", None)
                    n.pop("name", None)
                    n["pci_bus_id"] = n.get("pci_bus_id") or g["pci_bus_id"]
                    g.update(n)
                    g["nvml_index"] = ni
            env["gpus"].append(g)
    if nvml is not None:
        env["driver"] = nvml.driver()
    if device_kind == "cuda" or shutil.which("nvidia-smi"):
        env["topo_text"] = _run(["nvidia-smi", "topo", "-m"])
        env["topo_p2p_text"] = _run(["nvidia-smi", "topo", "-p2p", "r"])
        if env["topo_text"]:
            from gpusim.topology import TopologyError, parse_topo

            try:
                t = parse_topo(env["topo_text"], env["topo_p2p_text"])
                env["topology"] = t.summary()
                env["topology_warnings"] = t.warnings()
            except TopologyError as e:
                env["topology_warnings"] = [f"could not read `nvidia-smi topo -m`: {e}"]
    from gpusim.profile import nccl_p2p_disabled

    if nccl_p2p_disabled(env["nccl_env"]):
        env["topology_warnings"].append(
            "NCCL_P2P_DISABLE is set: NCCL stages every transfer between this node's GPUs through host memory "
            "(NVLink unused), so the intra-node collectives measure host staging; unset it to calibrate the "
            "node's own links")
    return env



def rank_env(rank: int, local_rank: int, node_rank: int, host: str, device: torch.device,
             nvml: Nvml | None) -> dict:
    out = {"rank": rank, "local_rank": local_rank, "node_rank": node_rank, "host": host, "pid": os.getpid(),
           "device": device.type, "gpu_index": None, "nvml_index": None,
           "device_name": cpu_info()["cpu_model"] or platform.machine()}
    if device.type == "cuda":
        idx = device.index if device.index is not None else torch.cuda.current_device()
        out["gpu_index"] = idx
        out["device_name"] = torch.cuda.get_device_name(idx)
        bus = _safe(lambda: torch_bus_id(idx))
        if nvml is not None:
            ni = nvml.index_of_bus_id(bus) if bus else None
            if ni is None and not os.environ.get("CUDA_VISIBLE_DEVICES"):
                ni = idx
            out["nvml_index"] = ni
        out["pci_bus_id"] = bus
    return out


def _safe(fn):
    try:
        return fn()
    except Exception:
        return None
