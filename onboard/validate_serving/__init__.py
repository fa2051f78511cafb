"""Stage `validate`: record goldens with the reference, then show a serving candidate equivalent to them.

golden (goldens) → candidates / runtime / endpoint (what is validated) → parity + checks (against the comparator's
noise model) → performance (measured separately) → report (validation.json + summary); run.validate ties them.
"""
