"""``python -m hetopt`` is the ``hetopt`` command."""

from hetopt.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
