"""Unit constants shared by every layer: the one definition of each.

The library computes in SI (seconds, bytes, FLOP/s, bytes/s); files and printed tables use
human units named in the key (``memory_gib``), converted once at the edges with these.
Imports nothing (families, catalogs and the planner all may import it).
"""

from __future__ import annotations

#: Bytes in one GiB (binary: GPU memory is sized in GiB, as ``nvidia-smi`` reports it).
GIB = 2.0**30

#: Relative slack of every floating-point memory comparison (bytes used against bytes
#: available): a stage or a GPU that needs exactly its capacity fits, and so does one that
#: exceeds it by a rounding error of the GiB -> bytes conversion or of a sum.
MEMORY_RTOL = 1e-9

#: Bits per byte: networks are quoted in Gb/s, the library works in bytes/s.
BITS_PER_BYTE = 8
#: Bytes/s in one Gb/s.
GBPS = 1e9 / BITS_PER_BYTE
