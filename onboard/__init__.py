"""onboard: day-zero model onboarding toolkit.

Stages (one package each): inspect_checkpoint → generate_adapter → verify_tokenizer → validate_serving → promote.
"""

__version__ = "0.1.0"
