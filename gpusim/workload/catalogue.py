"""The model catalogue: sourced data files (``gpusim/workload/data/*.yaml``, one per model family,
validated by pydantic on first use) turned into workloads by the builders in code.

A data file holds a ``title``, an ``order`` (where the family sits in ``gpusim models``), optional
``defaults`` (TransformerSpec fields shared by the file's transformers) and ``models``: each with an
``id``, ``name``, ``family``, ``aliases``, a ``builder`` (``transformer`` by default, with ``spec``: the
:class:`~gpusim.workload.transformer.TransformerSpec` fields; or a CNN/RNN builder with ``args``),
``sources`` and ``notes``. Wherever an id is accepted, so is a path to a Hugging Face style
``config.json`` (or to the directory holding one): :func:`get_workload` hands it to
:func:`gpusim.workload.from_config.from_config`.
"""

from __future__ import annotations

import dataclasses
import functools
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any


from gpusim import diskcache
from gpusim.errors import ScenarioError, UnknownIdError
import gpusim.workload.cnn as cnn
import gpusim.workload.rnn as rnn
from gpusim.workload.core import IMAGENET_JPEG_BYTES, IMAGENET_PREPROCESS_CORE_S, Workload, \
    image_pipeline, text_pipeline
from gpusim.workload.transformer import TransformerSpec, EntryInfo, build_transformer

DATA_DIR = Path(__file__).with_name("data")

_KORTHIKANTI = ("Korthikanti et al. 2022, 'Reducing Activation Recomputation in Large Transformer Models', "
                "arXiv:2205.05198, Sec. 4.1 (activation bytes per layer s*h*(34+5*a*s/h))")


# --- data pipelines named in the files --------------------------------------------------------------

def _imagenet_pipe(_: float) -> dict[str, float]:
    return image_pipeline(IMAGENET_JPEG_BYTES, 3, 224, 224, 1.0, IMAGENET_PREPROCESS_CORE_S)


def _squad_pipe(s: float) -> dict[str, float]:
    # input ids, segment ids and mask as int64, plus start/end positions
    d = text_pipeline(s, 30522, 3)
    d["h2d_bytes_per_sample"] += 16.0
    return d


#: ``pipeline:`` names -> tokens -> data pipeline fields; ``text`` (token ids of the model's vocabulary,
#: inputs and labels copied as int64) is the default of every language model.
PIPELINES: dict[str, Callable[[float], dict[str, float]] | None] = {
    "imagenet": _imagenet_pipe, "squad": _squad_pipe, "text": None}

#: ``builder:`` names of the non-transformer builders -> (function, accepts a sequence length).
BUILDERS: dict[str, tuple[Callable[..., Workload], bool]] = {
    "resnet": (cnn.build_resnet, False), "vgg16": (cnn.build_vgg16, False),
    "inception_v3": (cnn.build_inception_v3, False), "ssd300": (cnn.build_ssd300, False),
    "mask_rcnn": (cnn.build_mask_rcnn, False), "gnmt": (rnn.build_gnmt, True)}


# --- the schema of a data file --------------------------------------------------------------------

_SPEC_FIELDS = set(TransformerSpec.__dataclass_fields__)


@functools.cache
def _spec_adapter():
    """The validator of TransformerSpec fields, built on first use (a start served from the cache needs none)."""
    from pydantic import TypeAdapter

    return TypeAdapter(TransformerSpec)


def __getattr__(name: str):
    """The file schema (:mod:`gpusim.workload.catalogue_schema`), imported where asked for: a start served from
    the cache builds no pydantic model of it."""
    if name in ("ModelEntry", "CatalogueFile"):
        from gpusim.workload import catalogue_schema

        return getattr(catalogue_schema, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def spec_from_dict(values: dict[str, Any], where: str) -> TransformerSpec:
    """A :class:`TransformerSpec` from plain values (lists become tuples), every field type-checked;
    an unknown or ill-typed field raises :class:`ScenarioError` naming it."""
    from pydantic import ValidationError

    unknown = sorted(set(values) - _SPEC_FIELDS)
    if unknown:
        raise ScenarioError(f"{where}: unknown TransformerSpec field {unknown[0]!r} "
                            f"(known: {', '.join(sorted(_SPEC_FIELDS))})")
    try:
        return _spec_adapter().validate_python(values)
    except ValidationError as e:
        err = e.errors()[0]
        loc = ".".join(str(x) for x in err["loc"])
        raise ScenarioError(f"{where}: spec field {loc!r}: {err['msg']} (got {err.get('input')!r})") from None


#: the code whose output the cache holds: the schema and loader (this file) and the builders it refers to
_CACHED_CODE = ("catalogue.py", "catalogue_schema.py", "transformer.py", "core.py", "cnn.py", "rnn.py", "from_config.py")


@functools.lru_cache(maxsize=1)
def _load() -> tuple[dict[str, Callable[[int | None], Workload]], dict[str, str],
                     dict[str, tuple[EntryInfo, TransformerSpec]]]:
    """Every data file read and validated once: (id -> builder, alias -> id, id -> (info, spec)); from the
    on-disk cache (:mod:`gpusim.diskcache`) when neither the files nor the code that reads them changed."""
    paths = sorted(DATA_DIR.glob("*.yaml"))
    here = Path(__file__).resolve().parent
    cached = diskcache.cache_path("catalogue", diskcache.content_key(
        [here / f for f in _CACHED_CODE], paths)) if diskcache.cache_dir() is not None else None
    hit = diskcache.read(cached, tuple)
    if hit is not None and len(hit) == 3:
        return hit
    out = _parse(paths)
    diskcache.write(cached, out)
    return out


def _parse(paths: Sequence[Path]):
    import yaml
    from pydantic import ValidationError

    from gpusim.workload.catalogue_schema import CatalogueFile

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # C: ~10x faster; Python where libyaml is missing
    files = []
    for path in paths:
        try:
            raw = yaml.load(path.read_text(encoding="utf-8"), Loader=loader)
            files.append((path, CatalogueFile.model_validate(raw)))
        except (OSError, yaml.YAMLError) as e:
            raise ScenarioError(f"catalogue file {path}: cannot read it ({e})") from None
        except ValidationError as e:
            err = e.errors()[0]
            raise ScenarioError(f"catalogue file {path.name}: {'.'.join(str(x) for x in err['loc'])}: "
                                f"{err['msg']}") from None
    files.sort(key=lambda pf: (pf[1].order, pf[0].name))
    catalogue: dict[str, Callable[[int | None], Workload]] = {}
    aliases: dict[str, str] = {}
    specs: dict[str, tuple[EntryInfo, TransformerSpec]] = {}
    for path, doc in files:
        for m in doc.models:
            if m.id in catalogue:
                raise ScenarioError(f"catalogue file {path.name}: duplicate model id {m.id!r}")
            if m.builder == "transformer":
                where = f"catalogue file {path.name}, model {m.id!r}"
                assumed: tuple[str, ...] = ()
                if m.hf_config is not None:
                    from gpusim.workload.from_config import spec_from_config

                    try:
                        spec, _, assumptions, _, _ = spec_from_config(m.hf_config)
                    except ScenarioError as e:
                        raise ScenarioError(f"{where}: {e}") from None
                    assumed = tuple(a for a in assumptions if not a.startswith("sequence length"))
                else:
                    spec = spec_from_dict({**doc.defaults, **m.spec}, where)
                if m.seq_len is not None:
                    spec = dataclasses.replace(spec, seq_len=m.seq_len)
                info = EntryInfo(m.id, m.name, m.family, (*m.sources, _KORTHIKANTI), m.notes,
                             PIPELINES[m.pipeline] if m.pipeline else None, assumed)
                specs[m.id] = (info, spec)
                catalogue[m.id] = functools.partial(build_transformer, info, spec)
            else:
                info = EntryInfo(m.id, m.name, m.family, m.sources, m.notes)
                fn, takes_seq = BUILDERS[m.builder]
                catalogue[m.id] = functools.partial(_build_other, fn, takes_seq, info, dict(m.args))
            for a in m.aliases:
                aliases[a] = m.id
    return catalogue, aliases, specs


def _build_other(fn, takes_seq: bool, info: EntryInfo, args: dict[str, Any], seq_len: int | None = None) -> Workload:
    if takes_seq:
        return fn(info, seq_len, **args)
    w = fn(info, **args)
    if seq_len is not None:
        w.with_seq_len(seq_len)   # raises the readable error
    return w


# --- lookups --------------------------------------------------------------------------------------

def workload_ids() -> list[str]:
    """Catalogue ids in catalogue order."""
    return list(_load()[0])


def _key(model_id: str) -> str:
    key = str(model_id).strip().lower()
    return _load()[1].get(key, key)


def transformer_spec(model_id: str) -> TransformerSpec | None:
    """The :class:`TransformerSpec` behind a catalogue transformer or a config.json path (None for other
    models)."""
    if is_config_path(model_id):
        return get_workload(model_id).transformer
    specs = _load()[2]
    key = _key(model_id)
    return specs[key][1] if key in specs else None


def build_from_spec(spec: TransformerSpec, *, id: str = "custom-transformer", name: str | None = None,
                    family: str = "decoder-lm", seq_len: int | None = None,
                    sources: Sequence[str] = ("user-supplied TransformerSpec",), notes: str = "") -> Workload:
    """A workload for your own transformer hyper-parameters (same builder as the catalogue)."""
    info = EntryInfo(id, name or id, family, (*sources, _KORTHIKANTI), notes)
    return build_transformer(info, spec, seq_len)


def is_config_path(model: str) -> bool:
    """Whether a ``--model`` value names a file or directory rather than a catalogue id: it ends in
    ``.json``, contains a path separator, or exists on disk."""
    m = str(model).strip()
    if m.lower().endswith(".json") or "/" in m or os.sep in m:
        return True
    if not m or m.lower() in _load()[0] or m.lower() in _load()[1]:
        return False
    try:
        return Path(m).exists()
    except (OSError, ValueError):   # a name the file system cannot hold is no path
        return False


@functools.lru_cache(maxsize=256)
def _get(model_id: str, seq_len: int | None) -> Workload:
    w = _load()[0][model_id](None)
    if seq_len is not None and seq_len != w.seq_len:
        w = w.with_seq_len(seq_len)
    return w


@functools.lru_cache(maxsize=64)
def _get_config(path: str, stamp: tuple[int, int], seq_len: int | None) -> Workload:
    from gpusim.workload.from_config import from_config

    return from_config(path, seq_len=seq_len)


def _check_seq_len(seq_len: int | None) -> None:
    if seq_len is not None and (isinstance(seq_len, bool) or int(seq_len) != seq_len or seq_len < 1):
        raise ScenarioError(f"sequence length must be a positive integer (got {seq_len!r})")


def get_workload(model_id: str, seq_len: int | None = None) -> Workload:
    """The catalogue entry ``model_id`` (case-insensitive; a few aliases such as ``resnet-50``), or the
    transformer described by a ``config.json`` path, evaluated at ``seq_len`` for sequence models.

    Raises :class:`gpusim.errors.UnknownIdError` with close matches for an unknown id,
    :class:`gpusim.errors.ScenarioError` for ``seq_len`` on a fixed-size model or a bad config file.
    """
    _check_seq_len(seq_len)
    seq = None if seq_len is None else int(seq_len)
    if is_config_path(model_id):
        p = Path(str(model_id).strip()).expanduser()
        if p.is_dir():
            p = p / "config.json"
        try:
            st = p.stat()
        except OSError as e:
            raise ScenarioError(f"cannot read model config {str(p)!r}: {e.strerror or e} (give a catalogue id "
                                f"from `gpusim models` or the path of a Hugging Face config.json)") from None
        return _get_config(str(p.resolve()), (st.st_mtime_ns, st.st_size), seq)
    key = _key(model_id)
    catalogue = _load()[0]
    if key not in catalogue:
        raise UnknownIdError("model", str(model_id), catalogue,
                             hint=" (`gpusim models` lists them; a path to a config.json works too)")
    return _get(key, seq)


def list_workloads() -> list[Workload]:
    """Every catalogue entry at its default sequence length, in catalogue order."""
    return [get_workload(i) for i in _load()[0]]
