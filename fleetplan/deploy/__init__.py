"""From plan to running fleet: a saved run's fleet as files real tools accept (formats, computes no plan).

Entry point: ``export.write_deployment`` (``export.deployment_files`` without writing).  The fleet file
(``sim.fleet_toml``'s format), engine launch lines (``engines``: vLLM or SGLang spelling), Kubernetes
manifests (``kubernetes``, GPU labels in ``gpus``), the gateway's length bands (``router``: vLLM Semantic
Router) and the README (``readme``); ``text`` writes TOML and YAML.  Every number comes from the run's
``deployment`` block (``plan.deployment``) and its verification.
"""

from fleetplan.deploy.engines import Engine
from fleetplan.deploy.export import DeployResult, deployment_files, read_run, select_candidate, write_deployment

__all__ = ["DeployResult", "Engine", "deployment_files", "read_run", "select_candidate", "write_deployment"]
