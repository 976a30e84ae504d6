"""Readers that turn validated TOML data into each family's Instance (used by ``hetopt.io``)."""
