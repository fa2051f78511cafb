"""PyTorch building blocks for generated model adapters (inference only); README.md lists their parameters."""
