"""Speculative decoding on day zero (issue 15): is a draft compatible with its target, how many of its tokens would
the target accept, and what speedup that buys on this machine (`onboard draft-check`).

- compat.py: tokenizer ids on the verify-tokenizer corpus, special tokens, stop set, vocabulary inside the embedding.
- drafts.py: what a draft proposes along the target's greedy trajectory (a draft model, n-gram lookup, MTP heads).
- acceptance.py: greedy accepted lengths per k (simulated exactly), acceptance at temperature T from both
  distributions (sum min(p, q), computed, not sampled), acceptance per position in the draft window.
- speedup.py: the measured cost ratio of a draft step to a target step, the expected speedup per k, the recommended k.
- check.py: the command's run; report.py: the onboarding report's "acceptance by position" plot.
- mtp.py (the MTP module's draft logits) belongs to the adapter side (validate --speculative, issue 15 part B).
"""
