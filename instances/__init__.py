"""The shared reference data, shipped inside the package as ``hetopt._instances``.

Only data lives here (TOML, JSON, Markdown, licences); this file makes the folder a package so
that wheel and editable installs both find it. Locate it with ``hetopt.catalog.instances_dir()``.
"""
