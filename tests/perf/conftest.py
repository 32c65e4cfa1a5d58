"""Shared fixtures for the step-time predictor tests: catalog GPUs and bundled models."""

from __future__ import annotations

import pytest

from fleetplan.hardware import load_catalog
from fleetplan.models import ModelConfig, load_model


@pytest.fixture(scope="session")
def catalog():
    return load_catalog()


@pytest.fixture(scope="session")
def llama70b() -> ModelConfig:
    return load_model("llama-3.1-70b")


@pytest.fixture(scope="session")
def llama8b() -> ModelConfig:
    return load_model("llama-3.1-8b")


@pytest.fixture(scope="session")
def qwen_moe() -> ModelConfig:
    return load_model("qwen3-30b-a3b")


@pytest.fixture(scope="session")
def deepseek() -> ModelConfig:
    return load_model("deepseek-v3")

