"""The files the planning commands write (``optimize``, ``whatif``, ``grid-flex``, ``report``):
procurement CSV, candidate CSV, full-run JSON, HTML, plots; and the console they print to.
"""

from __future__ import annotations

import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console

from fleetplan.cli.tables import make_console

if TYPE_CHECKING:
    from fleetplan.plan.optimize import OptimizeResult

# The report modules (HTML, plots, JSON, procurement CSV) are imported where a file is written:
# ``optimize`` without exports, the README command, never loads them.


def report_console() -> Console:
    """Console on stdout; when stdout is not a terminal, as wide as the tables (no cell is cut)."""
    return make_console(file=sys.stdout)


#: The exports that carry the figures of ``plan.figures.with_report_figures`` (the candidates CSV does not).
DOCUMENT_KEYS = ("csv", "json", "html", "plots", "deploy")


class ProfilesAhead:
    """The reports' latency profiles of the recommendation (``plan.figures.recommendation_profiles``),
    simulated on a thread of this process from the moment the recommendation is known, i.e. beside its
    headroom search (the simulator's kernels release the GIL); ``start`` is ``plan.optimize.optimize``'s
    ``on_recommendation``.  Same figures as computed after the run: same function, same arguments."""

    def __init__(self, request, verify, seed: int) -> None:
        self.request, self.verify, self.seed = request, verify, seed
        self.recommendation = None
        self._thread: threading.Thread | None = None
        self._out: dict[str, Any] = {}

    def start(self, recommendation) -> None:
        from fleetplan.plan.figures import recommendation_profiles

        def run() -> None:
            try:
                self._out["value"] = recommendation_profiles(recommendation, self.request, self.verify, self.seed)
            except BaseException as exc:  # noqa: BLE001 - raised where the profiles are read
                self._out["error"] = exc

        self.recommendation = recommendation
        # a daemon: a run that fails before reading the profiles does not wait for them at exit
        self._thread = threading.Thread(target=run, name="fleetplan-profiles", daemon=True)
        self._thread.start()

    def result(self, recommendation):
        """The profiles when they were started for ``recommendation`` (its error, if it failed), else None."""
        if self._thread is None or recommendation is not self.recommendation:
            return None
        self._thread.join()
        if "error" in self._out:
            raise self._out["error"]
        return self._out["value"]


def write_optimize_reports(result: OptimizeResult, verify, seed: int, paths: dict, progress,
                           extra: dict | None = None, ahead: ProfilesAhead | None = None) -> list[str]:
    """Write every requested export of an ``optimize`` run; returns notes for the console.
    ``extra`` keys are added to the run document (e.g. ``peak_valley`` with a rate profile).

    The figures the reports show come with the result (``plan.figures.with_report_figures``): when the
    run was simulated and a document is written, the recommendation is simulated once more
    (``verify``'s request count, the run's seed) for per-pool latency quantiles (CDF plots and the
    procurement report's simulated P99 column), unless ``ahead`` simulated it during the run.
    """
    notes: list[str] = []
    if not any(paths.get(k) for k in ("candidates_csv", "csv", "json", "html", "plots", "deploy")):
        return notes
    from fleetplan.plan.figures import with_report_figures

    documents = any(paths.get(k) for k in DOCUMENT_KEYS)
    profiles = None if ahead is None else ahead.result(result.recommendation)
    result = with_report_figures(result, verify if documents else None, seed, progress, profiles)
    if paths.get("candidates_csv"):
        from fleetplan.report.optimize_report import write_candidates_csv

        write_candidates_csv(result, paths["candidates_csv"])
    if not documents:
        return notes
    from fleetplan.report.procurement import write_procurement_csv
    from fleetplan.report.run_json import optimize_run_dict, write_json

    doc = {**optimize_run_dict(result, seed, all_candidates=bool(paths.get("json_full"))), **(extra or {})}
    if paths.get("csv"):
        write_procurement_csv(doc["procurement"], paths["csv"])
    if paths.get("json"):
        write_json(doc, paths["json"])
    notes += render_documents(doc, None, None, paths.get("html"), paths.get("plots"))
    if paths.get("deploy"):
        notes.append(write_deploy_folder(doc, paths["deploy"]))
    return notes


def write_deploy_folder(doc: dict, out_dir: str) -> str:
    """``--deploy DIR``: the run's verified recommendation as ``fleetplan deploy`` writes it, in the launch flags
    of the engine the run planned for (``--engine``: vllm or sglang); a note."""
    rec = doc.get("recommendation")
    if rec is None or not rec.get("verified"):
        return f"--deploy: nothing written to {out_dir}: the run has no verified recommendation"
    from fleetplan.deploy import Engine, write_deployment

    engine = (doc.get("inputs") or {}).get("engine") or Engine.VLLM.value
    if engine not in {e.value for e in Engine}:
        return (f"--deploy: nothing written to {out_dir}: the run planned for the {engine} engine, whose launch "
                f"files deploy does not write; save the run (--json) and run `fleetplan deploy RUN --engine vllm` "
                "or `--engine sglang`")
    result = write_deployment(doc, out_dir, engine=engine)
    return (f"Deployment of candidate {result.rank}: {result.out_dir}/ ({len(result.files)} files; README.md "
            "re-checks it)")


def render_documents(run, whatif, gridflex, html_path, plots_dir) -> list[str]:
    """HTML and/or plot files from documents; returns console notes (the install hint)."""
    from fleetplan.report.html import write_html, write_plots
    from fleetplan.report.plots import PLOT_HINT, plots_available

    notes = []
    if html_path:
        write_html(html_path, run, whatif, gridflex)
    if plots_dir:
        Path(plots_dir).mkdir(parents=True, exist_ok=True)
        write_plots(plots_dir, run, whatif, gridflex)
    if (html_path or plots_dir) and not plots_available():
        notes.append(PLOT_HINT)
    return notes
