"""`onboard quantize-plan`: a per-layer quantization plan whose fidelity cost is measured, not assumed.

Modules, one concern each:
  numerics.py     int8 / fp8 / fp8-block / int4-g128 / MXFP4 rounding in torch, as vLLM, llm-compressor, AutoAWQ and
                  llama.cpp round (weights; activations where the engine quantizes them)
  ggml_kquants.py llama.cpp's Q6_K and Q4_K reference quantizers ported to torch (the `gguf` package only dequantizes
                  them); Q8_0 / Q5_0 go through `gguf.quants` itself
  formats.py      the format registry: bytes, block-shape rules and llama.cpp's fallbacks, engine names
  units.py        which weights form a unit (a layer's attention, its MLP, experts, shared experts, embedding, head)
  forward.py      the reference run and the quantized reruns: KL and top-1 agreement, resuming at the unit's layer
  sensitivity.py  the sweep: one measured probe per unit, the other formats predicted from output-error energy
  search.py       the plan: the fewest bytes within a KL budget (or the least KL within a byte target)
  refine.py       after the search: neighbouring plans measured whole, the best measured kept
  plan.py         orchestration: sweep, search, measure the whole plan and the uniform formats, the result
  emit.py         engine-ready files: llama-quantize --tensor-type overrides, an llm-compressor recipe with `ignore`
  report.py       the onboarding report's section (sensitivity-per-layer plot and table)
"""
