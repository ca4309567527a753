"""The schema of a model catalogue data file (``gpusim/workload/data/*.yaml``), validated by pydantic when
:mod:`gpusim.workload.catalogue` parses the files (a start served from its cache does not import this)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from gpusim.workload.core import FAMILIES


class ModelEntry(BaseModel):
    """One catalogue entry."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(pattern=r"^[a-z0-9][a-z0-9.\-]*$", description="lower-case, hyphenated")
    name: str = Field(min_length=1)
    family: Literal[FAMILIES]  # type: ignore[valid-type]
    aliases: tuple[str, ...] = ()
    builder: Literal["transformer", "resnet", "vgg16", "inception_v3", "ssd300", "mask_rcnn", "gnmt"] = "transformer"
    spec: dict[str, Any] | None = None
    hf_config: dict[str, Any] | None = None
    seq_len: int | None = Field(default=None, ge=1, description="default tokens per sequence (overrides the config's)")
    args: dict[str, Any] = {}
    pipeline: Literal["imagenet", "squad", "text"] | None = None
    sources: tuple[str, ...] = Field(min_length=1)
    notes: str = ""

    @field_validator("sources")
    @classmethod
    def _sources_say_something(cls, v):
        if any(len(s.strip()) < 10 for s in v):
            raise ValueError("every source must name a paper, model card or file (at least 10 characters)")
        return v

    @model_validator(mode="after")
    def _spec_iff_transformer(self):
        if (self.builder == "transformer") != ((self.spec is None) != (self.hf_config is None)):
            raise ValueError("a transformer entry needs one of `spec` (TransformerSpec fields) or `hf_config` "
                             "(a Hugging Face config.json); other builders take `args`")
        return self


class CatalogueFile(BaseModel):
    """One data file: a model family."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    title: str
    order: int
    defaults: dict[str, Any] = {}
    models: tuple[ModelEntry, ...] = Field(min_length=1)
