"""fleetplan: GPU fleet capacity planning for LLM inference."""

__version__ = "0.1.0"
