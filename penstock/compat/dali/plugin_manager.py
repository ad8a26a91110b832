"""``nvidia.dali.plugin_manager``: DALI loads operators compiled in C++ from shared libraries;
penstock's operators are Python (penstock.registry), so there is nothing such a library could add."""


def load_library(library_path: str) -> None:
    raise NotImplementedError(f"plugin_manager.load_library({library_path!r}): penstock cannot load DALI's C++ "
                              "operator libraries; write the operator in Python (see penstock.registry)")
