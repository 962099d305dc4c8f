"""Torch-side builders: a case and its axes become a module, seeded inputs and the reference setup (worker side)."""
