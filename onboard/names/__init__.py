"""Names: how config.json spells a quantity and how checkpoints name their tensors. The one layer inspect and
generate both read through (it imports nothing of theirs):

- `config.py`: the alias table (`ALIASES`, `spellings`), the Mamba knobs' spellings, and the values families derive
  from other keys (one KV head for multi_query, a partial rotary factor from rotary_dim, ...);
- `config_keys.py`: what each config key means to onboard: no effect on the forward pass (each with its reason),
  shown by the tensors or the layer plan, a known effect on the numbers, left unread by adapters, and the sections
  a config nests the language model's keys in;
- `tensors.py`: where the decoder layers are, tower and wrapper prefixes, and the role each tensor plays (the
  patterns composition maps to blocks and inspect counts by component).

A new spelling of a config quantity, or a new tensor name, is one data entry in one of these tables.
"""
