"""Speculative decoding on day zero (`onboard draft-check`, docs/speculative.md): is a draft compatible with its target
(compat), what it proposes (drafts: a draft model, n-gram lookup, the checkpoint's MTP heads from mtp), how many of its
tokens the target accepts (acceptance), what speedup that buys here (speedup); check runs the command, report draws
the onboarding report's plot.
"""
