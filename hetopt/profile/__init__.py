"""Plans from the user's own measurements: profile files, ``hetopt profile``, importers (issue 42).

* :mod:`~hetopt.profile.format`: the profile file (docs/formats.md, "Profiles"), read and written;
* :mod:`~hetopt.profile.measured`: a profile as the cost model asks it (``price_stage``'s
  ``measured`` argument): a term where the profile covers the setting, None elsewhere, with the
  interpolation rules of docs/formats.md;
* :mod:`~hetopt.profile.measure` and :mod:`~hetopt.profile.collectives`: ``hetopt profile``,
  measuring with torch (an optional import: ``pip install 'hetopt[runtimes]'``);
* :mod:`~hetopt.profile.importers`: nccl-tests output, Sailor's and Metis's profiles;
* :mod:`~hetopt.profile.hetero`: a heterogeneous published row (a layout stated stage by stage)
  priced by the cost model, and :mod:`~hetopt.profile.sidebyside`: Sailor's measured runs priced
  from Sailor's profiles beside its simulator (``hetopt profile sailor``).

Nothing here imports torch at import time.
"""

from hetopt.profile.format import (COLLECTIVES, PARTS, CollectiveRow, HostRow, LayerRow, OptimizerRow, Profile,
                                   Provenance, merge, parse_profile, read_profile, write_profile)

__all__ = ["COLLECTIVES", "PARTS", "CollectiveRow", "HostRow", "LayerRow", "OptimizerRow", "Profile", "Provenance",
           "merge", "parse_profile", "read_profile", "write_profile"]
