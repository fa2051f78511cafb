"""PyTorch building blocks for generated model adapters.

Parameter names and layouts are documented per module (fused qkv_proj / gate_up_proj, stacked experts) so an
adapter's weight map can fill them. Element-wise hot spots go through `onboard.kernels.dispatch`: Triton on CUDA,
the PyTorch reference on CPU. Inference only: no KV cache, no padding masks, no dropout.
"""
