"""Reports: rows, CSV, JSON, HTML and plots from a plan's result or a saved run JSON (formats only).

``run_json`` (the run document and ``fleetplan report``'s reader), ``procurement`` and
``optimize_report`` (CSV rows), ``html`` / ``plots`` (self-contained HTML with embedded PNGs),
``horizon`` (procurement-plan documents), ``sim_export`` (a simulation's per-request CSV and
summary JSON).  Every figure comes with the result (``plan.figures.with_report_figures``); this
package computes nothing and imports no simulator.  Files are written atomically (``atomic``).
"""
