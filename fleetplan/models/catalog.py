"""Bundled model configs (``models/*.json``) and lookup by name or path.

Each bundled file is the model's published HuggingFace ``config.json`` with the
original keys plus ``_source``, the HuggingFace repository it comes from, and (for the
files added in 2026) ``_copied_from``, the public copy its values were taken from:
NVIDIA's ``aiconfigurator-core`` 0.12.0 wheel (PyPI, Apache-2.0), which ships the
published configs under ``aiconfigurator_core/model_configs/``, or for GLM-4.5/4.6/Air
the public copies named in the file.  Where the model's chat template was read, ``_chat_template_tokens`` (the tokens
it adds around one user message, ``ModelConfig.chat_template_tokens``) and ``_chat_template_source`` (its derivation)
are there too.  The file's stem is the model's catalog name
(``llama-3.1-70b``); its display name is the repository's model name (``Llama-3.1-70B``).
Published parameter totals are checked within 3 % (``tests/models/test_bundled_models.py``).
"""

from __future__ import annotations

import functools
from pathlib import Path

from fleetplan.errors import DataFormatError, UnknownNameError
from fleetplan.models.config import ModelConfig
from fleetplan.models.hf_config import read_hf_config
from fleetplan.paths import data_dir

__all__ = ["list_models", "load_model", "model_path"]

SUFFIX = ".json"


def _models_dir() -> Path:
    return data_dir("models")


def list_models() -> tuple[str, ...]:
    """Catalog names of the bundled models, sorted."""
    return tuple(sorted(p.stem for p in _models_dir().glob(f"*{SUFFIX}")))


def model_path(name: str) -> Path:
    """The bundled config file for catalog ``name`` (case-insensitive, ``.json`` optional).

    Raises
    ------
    UnknownNameError
        ``name`` is not bundled; the message lists the valid names.
    """
    key = str(name).strip().lower().removesuffix(SUFFIX)
    if key not in list_models():
        raise UnknownNameError("model", str(name), list_models())
    return _models_dir() / f"{key}{SUFFIX}"


def load_model(name_or_path: str | Path) -> ModelConfig:
    """A bundled model by catalog name, or any HuggingFace ``config.json`` by path.

    A string that names an existing file (or a directory with ``config.json``) is read
    as a path; otherwise it must be a bundled name.

    Raises
    ------
    UnknownNameError
        Neither an existing path nor a bundled name (lists the bundled names).
    DataFormatError
        A path (contains a slash) that does not exist, or a file that is not a readable
        config (names file and field).
    """
    path = Path(name_or_path)
    if path.is_file() or (path.is_dir() and (path / "config.json").is_file()):
        return _read(str(path.resolve()))
    text = str(name_or_path)
    if ("/" in text or "\\" in text) and text.strip().lower().removesuffix(SUFFIX) not in list_models():
        raise DataFormatError(text, None, "no such file (or directory with a config.json)",
                              f"give a HuggingFace config.json path or a bundled name: {', '.join(list_models())}")
    return _read(str(model_path(text)))


@functools.lru_cache(maxsize=64)
def _read(path: str) -> ModelConfig:
    return read_hf_config(path)
