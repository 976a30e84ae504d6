"""The planner held against the world: published, measured runs (published), priced and ranked
(validate, validate_report), the findings of the papers' settings (findings) and what no
calibration covers (coverage).
"""
