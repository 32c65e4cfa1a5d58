"""Incremental, horizon-optimal procurement plans (what ``fleetplan whatif`` plans over a forecast).

``forecast`` (dated demand, P50/P90), ``solve`` (exact mixed-integer program over per-period
candidate fleets: buy, reserve for a term, rent on demand, retire), ``plan`` (the entry point:
candidates per period from the analytic sweep, prices, simulation of every chosen fleet at its
period's peak, the action schedule), ``schedule`` (the actions procurement acts on), ``result`` (the
settings, plan and action types both read).
"""
