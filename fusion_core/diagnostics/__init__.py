from fusion_core.diagnostics.cartels import CartelReport, detect_cartels  # noqa: F401
