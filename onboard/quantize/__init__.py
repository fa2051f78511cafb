"""`onboard quantize-plan`: a per-layer quantization plan whose fidelity cost is measured (docs/quantize.md).

Rounding as the engines do: numerics (torch), ggml_kquants (llama.cpp's K-quants ported), ggml_native (llama.cpp's
own library); formats is the table of them. units groups a model's weights; forward runs the reference and the
quantized reruns; sensitivity sweeps each unit alone; search (the knapsack) and refine (measured neighbours) choose;
plan orchestrates and measures the uniform baselines; emit writes the engine files; plan_file reads the
plan back; report draws the onboarding report's section.
"""
