"""Names: how config.json spells a quantity (config.py), what each config key means to onboard (config_keys.py), and
how checkpoints name their tensors (tensors.py). The one layer inspect and generate both read through; a new
spelling or tensor name is one data entry in one of these tables.
"""
