"""Other libraries' names over penstock's own: ``penstock.compat.dali`` for programs written for
NVIDIA DALI (change ``nvidia.dali`` to ``penstock.compat.dali`` in the imports)."""
