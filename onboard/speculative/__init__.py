"""Speculative decoding on day zero (`onboard draft-check`, docs/speculative.md): compat, drafts (and mtp), acceptance,
and the speedup it predicts; check runs the command, report draws the onboarding report's section.
"""
