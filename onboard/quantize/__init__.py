"""`onboard quantize-plan`: a per-layer quantization plan whose fidelity cost is measured (docs/quantize.md).

Rounding: numerics, ggml_kquants, ggml_native, formats. Measuring: units, apply, forward, sensitivity. Choosing:
search (with the measured refinement), plan. Files: emit (engine files), plan_file (reading the plan back), report (the report's section).
"""
