"""What a sentence-transformers model directory says about encoding a text, for the ONNX backend.

:func:`read_pipeline` reads ``modules.json``, the pooling and normalize modules and the
tokenizer settings, refusing what the ONNX adapter does not run; :func:`load_tokenizer` and
:func:`batch_arrays` tokenize and pad a batch as sentence-transformers does. Used by
:mod:`llm_connect.adapters._onnx`; nothing here imports onnxruntime or torch.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from llm_connect.errors import ConfigurationError

__all__ = ["Pipeline", "batch_arrays", "load_tokenizer", "read_pipeline"]

_MODULE_PREFIX = "sentence_transformers."


def _read_json(path: Path, model: str) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigurationError(f"onnx backend: cannot read {path} of model {model!r}: {exc}") from exc


@dataclass
class Pipeline:
    """What a sentence-transformers model directory says about encoding a text."""

    model: str
    source: Path
    max_length: int
    pad_token: str
    normalize: bool


def _module_kind(entry: Any, model: str) -> tuple[str, str]:
    kind = entry.get("type") if isinstance(entry, dict) else None
    if not isinstance(kind, str) or not kind.startswith(_MODULE_PREFIX):
        raise ConfigurationError(
            f"onnx backend: model {model!r} has a module the backend does not support: {kind!r} "
            "(supported: Transformer, mean Pooling, Normalize); use backend=torch"
        )
    return kind.rpartition(".")[2], str(entry.get("path") or "")


def _check_pooling(source: Path, path: str, model: str) -> None:
    config = _read_json(source / path / "config.json", model)
    mode = config.get("pooling_mode")
    if mode is None:
        modes = sorted(
            k.removeprefix("pooling_mode_") for k, v in config.items() if k.startswith("pooling_mode_") and v
        )
        mode = modes[0] if len(modes) == 1 else "+".join(modes) or "none"
    if mode not in ("mean", "mean_tokens"):
        raise ConfigurationError(
            f"onnx backend: model {model!r} pools with {mode!r}; only mean pooling is supported "
            "(use backend=torch)"
        )


def read_pipeline(model: str, source: Path) -> Pipeline:
    """The model's modules (Transformer, mean Pooling, optional Normalize) and tokenizer settings."""
    if not (source / "modules.json").is_file():
        raise ConfigurationError(
            f"onnx backend: {str(source)!r} (model {model!r}) is not a local sentence-transformers "
            "model directory with a modules.json; the backend exports only local weights, never "
            "downloads"
        )
    modules = _read_json(source / "modules.json", model)
    if not isinstance(modules, list):
        raise ConfigurationError(f"onnx backend: modules.json of model {model!r} is not a list")
    kinds = [_module_kind(m, model) for m in sorted(modules, key=lambda m: m.get("idx", 0))]
    names = [kind for kind, _ in kinds]
    if names not in (["Transformer", "Pooling"], ["Transformer", "Pooling", "Normalize"]) or kinds[0][1]:
        raise ConfigurationError(
            f"onnx backend: model {model!r} is made of {names}; the backend supports a Transformer "
            "at the model's root, mean Pooling and an optional Normalize (use backend=torch)"
        )
    _check_pooling(source, kinds[1][1], model)
    sbert_path = source / "sentence_bert_config.json"
    sbert = _read_json(sbert_path, model) if sbert_path.is_file() else {}
    if sbert.get("do_lower_case"):
        raise ConfigurationError(f"onnx backend: model {model!r} sets do_lower_case; use backend=torch")
    if not (source / "tokenizer.json").is_file():
        raise ConfigurationError(f"onnx backend: model {model!r} has no tokenizer.json (a fast tokenizer)")
    tokenizer_path = source / "tokenizer_config.json"
    tokenizer_config = _read_json(tokenizer_path, model) if tokenizer_path.is_file() else {}
    if tokenizer_config.get("padding_side", "right") != "right":
        raise ConfigurationError(f"onnx backend: model {model!r} pads on the left; use backend=torch")
    config = _read_json(source / "config.json", model)
    # As sentence-transformers: max_seq_length (else the tokenizer's limit), capped by the positions.
    limits = [
        sbert.get("max_seq_length") or tokenizer_config.get("model_max_length"),
        config.get("max_position_embeddings"),
    ]
    usable = [v for v in limits if isinstance(v, int) and not isinstance(v, bool) and 0 < v < 1_000_000]
    if not usable:
        raise ConfigurationError(f"onnx backend: model {model!r} names no maximum sequence length")
    pad = tokenizer_config.get("pad_token", "[PAD]")
    pad_token = pad.get("content") if isinstance(pad, dict) else pad
    return Pipeline(
        model=model,
        source=source,
        max_length=min(usable),
        pad_token=str(pad_token),
        normalize=names[-1] == "Normalize",
    )


def load_tokenizer(pipeline: Pipeline) -> Any:
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(pipeline.source / "tokenizer.json"))
    tokenizer.no_padding()  # tokenizer.json may pad to a fixed width; batches are padded here
    tokenizer.enable_truncation(max_length=pipeline.max_length)
    if tokenizer.token_to_id(pipeline.pad_token) is None:
        raise ConfigurationError(
            f"onnx backend: model {pipeline.model!r} has no pad token {pipeline.pad_token!r}"
        )
    return tokenizer


def batch_arrays(encodings: Sequence[Any], pad_id: int) -> dict[str, Any]:
    """Right-padded ``input_ids``, ``attention_mask`` and ``token_type_ids`` of one batch."""
    import numpy as np

    width = max(len(e.ids) for e in encodings)
    ids = np.full((len(encodings), width), pad_id, dtype=np.int64)
    mask = np.zeros((len(encodings), width), dtype=np.int64)
    types = np.zeros((len(encodings), width), dtype=np.int64)
    for row, e in enumerate(encodings):
        n = len(e.ids)
        ids[row, :n] = e.ids
        mask[row, :n] = e.attention_mask
        types[row, :n] = e.type_ids
    return {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}
