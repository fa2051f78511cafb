"""onboard: day-zero model onboarding toolkit.

Stages (one package each): inspect_checkpoint → generate_adapter → verify_tokenizer → validate_serving → promote.
Sub-packages import only lower layers: the order, and why, is LAYERS in tests/test_import_graph.py.
"""

__version__ = "0.1.0"
