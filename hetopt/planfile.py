"""The plan document (``hetopt plan --json``): its format, its version, and what a reader checks.

A plan is self-contained: beside the layout and the figures it carries ``format`` and
``version`` (:data:`PLAN_FORMAT`, :data:`PLAN_VERSION`), the model's whole shape
(``model_shape``: every key of a model file, its parameter count and a digest of the shape),
the cluster's nodes (``nodes``) and the memory it was planned with (``memory``). ``hetopt
export`` and ``hetopt draw`` read nothing else: no ``--model``, no cluster file. The schema is
published as ``docs/plan.schema.json`` (``tests/export/test_plan_format.py`` checks every plan
against it).

A reader refuses, with one line naming the key and the fix (:func:`check_plan`):

* a document of another format or version (or one written before plans carried them);
* a number JSON does not have (``NaN``, ``Infinity``: Python's ``json`` reads them);
* an edited model shape: one the model reader refuses, whose parameter count or digest is
  not its own, or whose layers are not the stages' sum.

Examples
--------
>>> from hetopt.workload import ModelConfig
>>> shape = model_shape(ModelConfig("tiny", "gpt", 2, 64, 4, 256, 1000, 128))
>>> shape["parameters"], shape["digest"] == shape_digest(shape)
(236160, True)
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
from typing import Any

from hetopt.errors import InputError
from hetopt.readers.fields import Fields
from hetopt.workload import ModelConfig, model_from_fields, parameters

#: The ``format`` of a plan document.
PLAN_FORMAT = "hetopt-plan"
#: The ``version`` of the plan documents this hetopt writes and reads. A change that a reader of
#: version N would misread (a key renamed, a unit changed, a key whose absence means something)
#: raises it; keys added beside the others do not.
PLAN_VERSION = 1
#: The keys of ``model_shape`` that are not the model file's own: derived, and checked.
DERIVED_SHAPE_KEYS = ("parameters", "digest")
#: What every refusal ends with.
REPLAN = "re-run `hetopt plan --json`"


def model_shape(cfg: ModelConfig) -> dict[str, Any]:
    """The model's whole shape as the plan carries it: every key of its model file (None where the
    file leaves one out), its parameter count and :func:`shape_digest`."""
    shape = dataclasses.asdict(cfg)
    shape["parameters"] = parameters(cfg)
    shape["digest"] = shape_digest(shape)
    return shape


def shape_digest(shape: dict[str, Any]) -> str:
    """``sha256:`` and the first 16 hex digits of the SHA-256 of the shape's model-file keys as
    canonical JSON (sorted keys, no blanks): any edit of a key changes it.

    Examples
    --------
    >>> shape_digest({"layers": 2, "hidden": 64}) == shape_digest({"hidden": 64, "layers": 2, "digest": "x"})
    True
    """
    keys = {k: v for k, v in shape.items() if k not in DERIVED_SHAPE_KEYS}
    text = json.dumps(keys, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()[:16]


def non_finite(value: Any, where: str = "") -> str | None:
    """The key path of the first number that is not finite (NaN, ±Infinity) in ``value``, or None.

    Examples
    --------
    >>> non_finite({"stages": [{"time_s": 1.0}, {"time_s": float("nan")}]})
    'stages[1].time_s'
    >>> non_finite({"a": [1, 2.5, None]}) is None
    True
    """
    if isinstance(value, float) and not math.isfinite(value):
        return where or "(the document)"
    if isinstance(value, dict):
        for key, item in value.items():
            found = non_finite(item, f"{where}.{key}" if where else str(key))
            if found:
                return found
    elif isinstance(value, list):
        for k, item in enumerate(value):
            found = non_finite(item, f"{where}[{k}]")
            if found:
                return found
    return None


def check_version(doc: dict[str, Any], source: str) -> None:
    """Refuse a plan document of another format or version.

    Raises
    ------
    InputError
        Naming what the document says and what this hetopt reads.

    Examples
    --------
    >>> check_version({"format": "hetopt-plan", "version": 2}, "p.json")
    Traceback (most recent call last):
    ...
    hetopt.errors.InputError: p.json: version: plan format version 2, this hetopt reads version 1 (export it with the hetopt that wrote it, or re-run `hetopt plan --json`)
    """
    given = doc.get("format")
    if given is None:
        raise InputError(f"{source}: format: missing: a plan written before plans carried their format and version "
                         f"(or not a plan); {REPLAN}")
    if given != PLAN_FORMAT:
        raise InputError(f"{source}: format: {given!r} is not {PLAN_FORMAT!r}; {REPLAN}")
    version = doc.get("version")
    if version != PLAN_VERSION or isinstance(version, bool):
        raise InputError(f"{source}: version: plan format version {version!r}, this hetopt reads version {PLAN_VERSION} "
                         f"(export it with the hetopt that wrote it, or {REPLAN})")


def check_plan(doc: dict[str, Any], source: str) -> ModelConfig:
    """A plan document checked as every reader of plans checks it; its model.

    Raises
    ------
    InputError
        Another format or version, a number that is not finite, a missing or edited
        ``model_shape`` (one line naming the key and the fix).

    Examples
    --------
    >>> from hetopt.workload import ModelConfig
    >>> cfg = ModelConfig("tiny", "gpt", 2, 64, 4, 256, 1000, 128)
    >>> doc = {"format": "hetopt-plan", "version": 1, "model": "tiny", "model_shape": model_shape(cfg),
    ...        "stages": [{"layers": 2}], "iteration_time_s": 1.0}
    >>> check_plan(doc, "p.json") == cfg
    True
    >>> doc["model_shape"]["hidden"] = 128
    >>> check_plan(doc, "p.json")
    Traceback (most recent call last):
    ...
    hetopt.errors.InputError: p.json: model_shape: edited (parameters 236160 is not the shape's 537344): the plan was priced for another model; re-run `hetopt plan --json`
    """
    check_version(doc, source)
    where = non_finite(doc)
    if where is not None:
        raise InputError(f"{source}: {where}: not a finite number (NaN or Infinity, which JSON does not have: the file "
                         f"was edited); {REPLAN}")
    shape = doc.get("model_shape")
    if not isinstance(shape, dict):
        raise InputError(f"{source}: model_shape: missing or not an object (the model's shape); {REPLAN}")
    # the model file's reader, so a shape is refused as its file would be (None and "": keys left out)
    given = {k: v for k, v in shape.items() if k not in DERIVED_SHAPE_KEYS and v not in (None, "")}
    cfg = model_from_fields(Fields(given, source, "model_shape"))
    count = parameters(cfg)
    if shape.get("parameters") != count:
        raise InputError(f"{source}: model_shape: edited (parameters {shape.get('parameters')!r} is not the shape's "
                         f"{count}): the plan was priced for another model; {REPLAN}")
    if shape.get("digest") != shape_digest(shape):
        raise InputError(f"{source}: model_shape: edited (its digest is not the shape's): the plan was priced for "
                         f"another model; {REPLAN}")
    if doc.get("model") != cfg.name:
        raise InputError(f"{source}: model: {doc.get('model')!r} is not model_shape.name {cfg.name!r} (the file was "
                         f"edited); {REPLAN}")
    stages = doc.get("stages")
    if isinstance(stages, list) and stages and all(isinstance(s, dict) and isinstance(s.get("layers"), int)
                                                  for s in stages):
        held = sum(s["layers"] for s in stages)
        if held != cfg.layers:
            raise InputError(f"{source}: model_shape.layers: {cfg.layers} but the stages hold {held} layers (the file was "
                             f"edited); {REPLAN}")
    return cfg


__all__ = ["DERIVED_SHAPE_KEYS", "PLAN_FORMAT", "PLAN_VERSION", "check_plan", "check_version", "model_shape",
           "non_finite", "shape_digest"]
