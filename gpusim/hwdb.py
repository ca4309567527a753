"""Load and cross-check the hardware database.

``load()`` reads the YAML files shipped with gpusim (``hwdb/`` in a checkout, ``gpusim.hwdb_data`` in
the wheel), then the user's own directories (``--hwdb DIR`` on the CLI, or the ``GPUSIM_HWDB``
environment variable, several joined with ``os.pathsep``). A user entry with the id of a shipped one
overrides it; a new id adds to it. Every file is validated by :mod:`gpusim.hardware`; all problems of
all files are reported at once, each line naming the file, the entry and the field.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import ValidationError

from gpusim import diskcache
from gpusim.diskcache import CACHE_DIR_ENV_VAR, CACHE_ENV_VAR, cache_dir, cache_path, content_key  # noqa: F401
from gpusim.errors import HardwareFileError, UnknownIdError
from gpusim.hardware import GPU, SECTIONS, Cluster, Energy, HwdbFile, Link, Node, Price

ENV_VAR = "GPUSIM_HWDB"


def _loader_class():
    """PyYAML's C safe loader (~10x faster), or the pure-Python one where libyaml is missing. yaml is imported
    here, not at the top: a start served from the cache (:func:`cache_dir`) parses nothing."""
    import yaml

    return getattr(yaml, "CSafeLoader", yaml.SafeLoader)


#: parser limits for hardware files (the shipped files are < 100 KiB, < 10 levels deep, without aliases
#: expanding past a few hundred nodes): a larger, deeper or alias-exploding file is refused, not loaded
MAX_FILE_BYTES = 4 * 1024 * 1024
MAX_DEPTH = 32
MAX_EXPANDED_NODES = 200_000
MAX_ALIASES = 1_000


def builtin_dir() -> Path:
    """Directory of the shipped database: the checkout's ``hwdb/`` or the installed package data."""
    here = Path(__file__).resolve().parent
    checkout = here.parent / "hwdb"
    if checkout.is_dir() and any(checkout.rglob("*.yaml")):
        return checkout
    import gpusim.hwdb_data as data  # installed wheel: hwdb/ is packaged as gpusim.hwdb_data

    return Path(data.__path__[0])


def user_dirs_from_env() -> list[Path]:
    raw = os.environ.get(ENV_VAR, "")
    return [Path(p) for p in raw.split(os.pathsep) if p.strip()]


@dataclass(frozen=True)
class HardwareDB:
    """The validated database. Entries by id per kind; ``origin`` says which file each came from."""

    gpus: dict[str, GPU]
    links: dict[str, Link]
    nodes: dict[str, Node]
    clusters: dict[str, Cluster]
    prices: dict[str, Price]
    energy: dict[str, Energy]
    origin: dict[tuple[str, str], str] = field(default_factory=dict)
    overridden: tuple[tuple[str, str, str], ...] = ()  # (kind, id, file) replaced by a user file

    # --- lookups with "did you mean" -------------------------------------------------------------
    def _get(self, section: str, kind: str, wanted: str):
        table = getattr(self, section)
        try:
            return table[wanted]
        except (KeyError, TypeError):
            lowered = str(wanted).strip().lower()
            if lowered in table:
                return table[lowered]
            raise UnknownIdError(kind, str(wanted), table.keys()) from None

    def gpu(self, gpu_id: str) -> GPU:
        return self._get("gpus", "gpu", gpu_id)

    def link(self, link_id: str) -> Link:
        return self._get("links", "link", link_id)

    def node(self, node_id: str) -> Node:
        return self._get("nodes", "node", node_id)

    def cluster(self, cluster_id: str) -> Cluster:
        return self._get("clusters", "cluster", cluster_id)

    def price(self, price_id: str) -> Price:
        return self._get("prices", "price", price_id)

    def get(self, kind: str, entry_id: str):
        for section, (_, singular) in SECTIONS.items():
            if kind in (section, singular):
                return self._get(section, singular, entry_id)
        raise ValueError(f"unknown kind {kind!r}; one of {[s for _, s in SECTIONS.values()]}")

    def find(self, entry_id: str) -> tuple[str, object]:
        """Look an id up in every kind; returns ``(kind, entry)``."""
        for section, (_, singular) in SECTIONS.items():
            table = getattr(self, section)
            if entry_id in table:
                return singular, table[entry_id]
        every = [k for section in SECTIONS for k in getattr(self, section)]
        raise UnknownIdError("id", entry_id, every, hint=" (`gpusim hw list` lists every id)")

    def entries(self, kind: str | None = None) -> Iterable[tuple[str, object]]:
        for section, (_, singular) in SECTIONS.items():
            if kind in (None, section, singular):
                for entry in getattr(self, section).values():
                    yield singular, entry

    # --- derived lookups -------------------------------------------------------------------------
    def pcie_link_id(self, gpu: GPU) -> str:
        """The PCIe link of a GPU's slot, e.g. ``pcie5-x16``."""
        return f"pcie{gpu.pcie.generation}-x{gpu.pcie.lanes}"

    def peer_link_id(self, gpu: GPU) -> str | None:
        """The database link of a GPU's own NVLink / Infinity Fabric: same technology and generation, the
        closest per-direction bandwidth (a bridge for bridged cards, a switch or mesh for boards)."""
        if gpu.peer_link is None:
            return None
        pl = gpu.peer_link
        kinds = {"bridge": ("nvlink-bridge",), "switch": ("nvswitch",), "mesh": ("nvlink-mesh", "infinity-fabric"),
                 "direct": ("nvlink-bridge", "nvlink-mesh")}[pl.connection]
        if pl.technology == "infinity-fabric":
            kinds = ("infinity-fabric",)
        used = sorted(n.intra_link for n in self.nodes.values()
                      if n.gpu == gpu.id and self.links.get(n.intra_link) and self.links[n.intra_link].kind in kinds)
        if used:  # the link the database's own nodes for this GPU use
            return used[0]
        cands = [lk for lk in self.links.values() if lk.kind in kinds
                 and (pl.technology == "infinity-fabric" or (lk.generation or "").startswith(str(pl.generation)))]
        if not cands:
            return None
        return min(cands, key=lambda lk: (abs(lk.bandwidth_gbyte_per_s_per_direction - pl.gbyte_per_s_per_direction),
                                          lk.id)).id

    def prices_for(self, *, node: str | None = None, gpu: str | None = None, kind: str | None = None) -> list[Price]:
        out = [p for p in self.prices.values()
               if (node is None or p.node == node) and (gpu is None or p.gpu == gpu) and (kind is None or p.kind == kind)]
        return sorted(out, key=lambda p: p.date, reverse=True)

    def default_energy(self) -> Energy:
        if "default" in self.energy:
            return self.energy["default"]
        return next(iter(self.energy.values()))


def _format_validation_error(where: str, err: ValidationError) -> list[str]:
    lines = []
    for e in err.errors():
        loc = ".".join(str(p) for p in e["loc"])
        msg = e["msg"].removeprefix("Value error, ")
        got = e.get("input")
        show_got = e["type"] not in ("missing",) and not isinstance(got, dict)
        shown = repr(got)
        shown = shown if len(shown) <= 120 else shown[:100] + f"... ({len(shown):,} characters)"
        lines.append(f"{where}: {loc + ': ' if loc else ''}{msg}" + (f" (got {shown})" if show_got else ""))
    return lines


class _Refused(Exception):
    pass


def _check_node_graph(root, path: Path) -> None:
    """Refuse duplicate keys, impossible timestamps, nesting past :data:`MAX_DEPTH` and aliases expanding past
    :data:`MAX_EXPANDED_NODES` (a "billion laughs" bomb), on the composed node graph before anything is
    constructed. Linear in the file: each node's expanded size is computed once (aliases share the node)."""
    import yaml

    size: dict[int, int] = {}
    aliases = 0
    seen: set[int] = set()
    # iterative post-order walk: (node, depth, children_done)
    stack = [(root, 1, False)]
    while stack:
        node, depth, done = stack.pop()
        nid = id(node)
        if done:
            kids = [v for kv in node.value for v in kv] if isinstance(node, yaml.MappingNode) else (
                node.value if isinstance(node, yaml.SequenceNode) else [])
            size[nid] = 1 + sum(size[id(k)] for k in kids)
            if size[nid] > MAX_EXPANDED_NODES:
                raise _Refused(f"{path}: aliases expand to more than {MAX_EXPANDED_NODES:,} values (a YAML alias "
                               "bomb?); write the entries out")
            continue
        if nid in seen:  # an alias: the same node again
            aliases += 1
            if aliases > MAX_ALIASES:
                raise _Refused(f"{path}: more than {MAX_ALIASES:,} YAML aliases")
            if nid not in size:
                raise _Refused(f"{path}:{node.start_mark.line + 1}: a YAML alias refers to a node that contains it")
            continue
        seen.add(nid)
        if depth > MAX_DEPTH:
            raise _Refused(f"{path}:{node.start_mark.line + 1}: nested deeper than {MAX_DEPTH} levels")
        if isinstance(node, yaml.ScalarNode):
            size[nid] = 1
            if node.tag == "tag:yaml.org,2002:timestamp":
                try:
                    yaml.constructor.SafeConstructor.construct_yaml_timestamp(yaml.constructor.SafeConstructor(), node)
                except (ValueError, OverflowError) as e:
                    raise _Refused(f"{path}:{node.start_mark.line + 1}: {node.value!r} is not a valid date ({e})") \
                        from None
            continue
        stack.append((node, depth, True))
        if isinstance(node, yaml.MappingNode):
            keys: dict[str, int] = {}
            for k, v in node.value:
                if isinstance(k, yaml.ScalarNode) and k.tag != "tag:yaml.org,2002:merge":
                    if k.value in keys:
                        raise _Refused(f"{path}:{k.start_mark.line + 1}: duplicate key {k.value!r} (first on line "
                                       f"{keys[k.value]}): YAML keeps only the last one; remove one of them")
                    keys[k.value] = k.start_mark.line + 1
                stack.append((k, depth + 1, False))
                stack.append((v, depth + 1, False))
        else:
            stack.extend((c, depth + 1, False) for c in node.value)


def load_yaml_text(text: str, path: Path):
    """Parse one YAML document with the safe loader and the limits above; ``_Refused`` or ``yaml.YAMLError``."""
    loader = _loader_class()(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _check_node_graph(node, path)
        return loader.construct_document(node)
    finally:
        loader.dispose()


def _read_file(path: Path) -> tuple[dict, list[str]]:
    import yaml

    from gpusim.checks import read_text
    from gpusim.errors import GpusimError

    try:
        text = read_text(path, "hardware YAML file", MAX_FILE_BYTES)
    except GpusimError as e:
        return {}, [str(e)]
    try:
        raw = load_yaml_text(text, path)
    except _Refused as e:
        return {}, [str(e)]
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else str(path)
        return {}, [f"{where}: YAML syntax error: {getattr(e, 'problem', None) or e}"]
    except (ValueError, TypeError, OverflowError, RecursionError) as e:  # a value the constructor cannot build
        return {}, [f"{path}: cannot read a value: {str(e)[:200]}"]
    if raw is None:
        return {}, []
    if not isinstance(raw, dict):
        return {}, [f"{path}: expected a mapping with lists under {sorted(SECTIONS)}, got {type(raw).__name__}"]
    try:
        HwdbFile.model_validate(raw)
    except ValidationError as e:
        return {}, _format_validation_error(str(path), e)
    return raw, []


def _yaml_files(directory: Path) -> list[Path]:
    return sorted(p for p in directory.rglob("*.y*ml") if p.suffix in (".yaml", ".yml") and p.is_file())


def _parse_dir(directory: Path, problems: list[str]):
    """Yield (section, entry model, file) for every valid entry of a directory."""
    if not directory.exists():
        problems.append(f"{directory}: no such directory (from --hwdb or ${ENV_VAR})")
        return
    files = [directory] if directory.is_file() else _yaml_files(directory)
    if not files:
        problems.append(f"{directory}: no .yaml files found")
    for path in files:
        raw, errs = _read_file(path)
        problems.extend(errs)
        for section, (model, singular) in SECTIONS.items():
            for i, item in enumerate(raw.get(section) or []):
                ident = item.get("id") if isinstance(item, dict) else None
                where = f"{path}: {singular} {ident!r}" if ident else f"{path}: {section}[{i}]"
                if not isinstance(item, dict):
                    problems.append(f"{where}: expected a mapping, got {item!r}")
                    continue
                try:
                    yield section, model.model_validate(item), str(path)
                except ValidationError as e:
                    problems.extend(_format_validation_error(where, e))


def _check_references(db_tables: dict[str, dict], origin: dict, problems: list[str]) -> None:
    def ref(section: str, singular: str, entry_id: str, fld: str, target_section: str, value):
        if value is not None and value not in db_tables[target_section]:
            exc = UnknownIdError(SECTIONS[target_section][1], value, db_tables[target_section].keys(), hint="")
            problems.append(f"{origin[(singular, entry_id)]}: {singular} {entry_id!r}: {fld}: {exc}")

    for n in db_tables["nodes"].values():
        ref("nodes", "node", n.id, "gpu", "gpus", n.gpu)
        for fld in ("intra_link", "pcie_link", "socket_link", "nic_link"):
            ref("nodes", "node", n.id, fld, "links", getattr(n, fld))
    for c in db_tables["clusters"].values():
        ref("clusters", "cluster", c.id, "node", "nodes", c.node)
        ref("clusters", "cluster", c.id, "inter_link", "links", c.inter_link)
    for p in db_tables["prices"].values():
        ref("prices", "price", p.id, "node", "nodes", p.node)
        ref("prices", "price", p.id, "gpu", "gpus", p.gpu)
    for g in db_tables["gpus"].values():
        pcie_id = f"pcie{g.pcie.generation}-x{g.pcie.lanes}"
        if db_tables["links"] and pcie_id not in db_tables["links"]:
            problems.append(f"{origin[('gpu', g.id)]}: gpu {g.id!r}: pcie: no link {pcie_id!r} in the database")


def load(user_dirs: Sequence[str | os.PathLike] | None = None, *, builtin: bool = True,
         use_env: bool = True) -> HardwareDB:
    """Load the database: shipped files, then ``$GPUSIM_HWDB``, then ``user_dirs`` (later wins).

    Raises :class:`HardwareFileError` listing every problem found (one line each).
    """
    dirs: list[Path] = []
    if use_env:
        dirs += user_dirs_from_env()
    dirs += [Path(d) for d in (user_dirs or [])]
    return _load_cached(builtin, tuple(str(d.resolve()) for d in dirs))


# --- on-disk cache of the validated database ------------------------------------------------------------
# Parsing ~20 YAML files (12,000 nodes) and validating ~150 entries costs 0.1-0.3 s of every CLI start: the
# validated HardwareDB is pickled by gpusim.diskcache under a key that hashes every file read (bytes and paths),
# the schema and loader source (hardware.py, units.py, this file) and the Python/pydantic versions.

def _cache_key(layers: Sequence[Path]) -> str | None:
    """Content hash of every input of :func:`_load_cached`; None when a layer cannot be read (then parse)."""
    here = Path(__file__).resolve().parent
    files: list[Path] = []
    marks: list[str] = []
    try:
        for directory in layers:
            marks.append(str(directory) + ("" if directory.exists() else ":missing"))
            if directory.exists():
                files += [directory] if directory.is_file() else _yaml_files(directory)
    except OSError:
        return None
    return content_key((here / "hardware.py", here / "hwdb.py", here / "units.py"), files,
                       f"{MAX_FILE_BYTES}|{'|'.join(marks)}")


def _cache_read(path: Path) -> HardwareDB | None:
    return diskcache.read(path, HardwareDB)


def _cache_write(path: Path, db: HardwareDB) -> None:
    diskcache.write(path, db)


@functools.lru_cache(maxsize=8)
def _load_cached(builtin: bool, user_dirs: tuple[str, ...]) -> HardwareDB:
    layers: list[Path] = [builtin_dir()] if builtin else []
    layers += [Path(d) for d in user_dirs]
    cached = cache_path("hwdb", _cache_key(layers)) if cache_dir() is not None else None
    if cached is not None:
        db = _cache_read(cached)
        if db is not None:
            return db
    db = _parse_layers(layers)
    if cached is not None:
        _cache_write(cached, db)
    return db


def _parse_layers(layers: Sequence[Path]) -> HardwareDB:
    problems: list[str] = []
    tables: dict[str, dict] = {s: {} for s in SECTIONS}
    origin: dict[tuple[str, str], str] = {}
    overridden: list[tuple[str, str, str]] = []

    for directory in layers:
        seen_here: dict[tuple[str, str], str] = {}
        for section, entry, path in _parse_dir(directory, problems):
            singular = SECTIONS[section][1]
            key = (singular, entry.id)
            if key in seen_here:
                problems.append(f"{path}: {singular} {entry.id!r}: duplicate id (also in {seen_here[key]})")
                continue
            seen_here[key] = path
            if key in origin:
                overridden.append((singular, entry.id, origin[key]))
            tables[section][entry.id] = entry
            origin[key] = path

    if not problems:
        _check_references(tables, origin, problems)
    if problems:
        head = f"hardware database: {len(problems)} problem{'s' * (len(problems) > 1)}"
        raise HardwareFileError(head + "\n  " + "\n  ".join(problems))
    return HardwareDB(**tables, origin=origin, overridden=tuple(overridden))


def validate_dir(directory: str | os.PathLike, *, with_builtin: bool = True) -> HardwareDB:
    """Validate a directory of user files (references may point into the shipped database)."""
    return _load_cached(with_builtin, (str(Path(directory).resolve()),))
