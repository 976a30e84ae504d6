"""Node shapes of the shipped instances: the machines, their GPUs from the GPU catalog.

A node shape is a machine: which GPU (an entry of ``instances/gpus.toml``), how many, and
its network card. The per-GPU figures are *read* from the GPU catalog, never typed here, so
the islands instances, the planner's cluster files (``hetopt generate clusters``) and the
pipeline generator (:mod:`hetopt.pipeline.synthetic`) describe the same hardware:

* ``tflops``: the catalog's ``training_tflops`` (dense FP16/BF16 tensor rate; for the P40,
  which has no fast FP16, its FP32 rate, the useful one);
* ``memory_gib``: the catalog's ``memory_gib`` (the datasheet's GB figure; the islands
  tolerance compares ratios, so GB vs GiB does not change any answer);
* ``intra_gbs``: the catalog's ``intra_gbs``, GPU-to-GPU bandwidth per GPU and per
  direction (NVLink2 150, NVLink3 300, NVLink4 450, PCIe 3.0 x16 16, PCIe 4.0 x16 32); a
  one-GPU node uses its PCIe link.

What a shape states itself, with its source (``REFERENCE-FIGURES.md``: [NV] datasheets, [AZ]
Azure VM size docs, AWS docs): the GPU label written into instance files, the GPU count and
``nic_gbps``, the VM's or node's network bandwidth, which bounds every link it has. The
``source`` text repeats the datasheet figures for the reader of an instance file's header.

A shared module (not inside a family): the islands generator, the pipeline generator and
``hetopt generate clusters`` all take their machines from here. The shapes are built when
this module is imported, from the shipped ``instances/gpus.toml`` (read once); that is the
one deliberate exception to "nothing run at import time", because the shapes are data
constants, and only the instance generators and their tests import this module.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from hetopt.hardware import GIGA, TERA, GpuType, gpu, load_gpus
from hetopt.units import GIB


@dataclass(frozen=True)
class Shape:
    """A node shape: GPU label, GPUs, per-GPU figures, NIC, and where the figures come from.

    ``catalog_gpu`` names the ``instances/gpus.toml`` entry the per-GPU figures were read
    from (:meth:`from_catalog`); ``None`` for a shape whose figures are stated by hand (a
    test instance's).
    """

    gpu: str
    gpus: int
    tflops: float
    memory_gib: float
    intra_gbs: float
    nic_gbps: float
    source: str
    catalog_gpu: str | None = None

    @classmethod
    def from_catalog(
        cls, label: str, catalog_gpu: str, gpus: int, nic_gbps: float, source: str, *, catalog: Mapping[str, GpuType]
    ) -> Shape:
        """A shape whose per-GPU figures are the GPU catalog's.

        Parameters
        ----------
        label : str
            The GPU name instance files show (e.g. ``"V100-16GB"``); not necessarily a
            catalog name, which also says the form factor.
        catalog_gpu : str
            The ``instances/gpus.toml`` entry of the node's GPUs (e.g. ``"V100-PCIe-16GB"``).
        gpus : int
            GPUs per node.
        nic_gbps : float
            The node's network bandwidth, Gb/s.
        source : str
            Where the shape comes from, for instance file headers.
        catalog : Mapping[str, GpuType]
            The GPU catalog, as :func:`hetopt.hardware.load_gpus` returns it.

        Returns
        -------
        Shape
            ``tflops`` = training FLOP/s / 10¹², ``memory_gib`` = memory bytes / 2³⁰,
            ``intra_gbs`` = intra-node bytes/s / 10⁹ of the catalog entry.

        Raises
        ------
        InputError
            When ``catalog_gpu`` is not in the catalog (the message lists the known names).

        Examples
        --------
        >>> from hetopt.hardware import load_gpus
        >>> s = Shape.from_catalog("V100-16GB", "V100-PCIe-16GB", 4, 24.0, "NC24s_v3", catalog=load_gpus())
        >>> s.tflops, s.memory_gib, s.intra_gbs, s.nic_gbps
        (112.0, 16.0, 16.0, 24.0)
        """
        entry = gpu(catalog, catalog_gpu, where="node shape")
        return cls(label, gpus, entry.training_flops / TERA, entry.memory_bytes / GIB, entry.intra_bandwidth / GIGA,
                   nic_gbps, source, catalog_gpu)


#: The shipped GPU catalog, read once at import: every shape below takes its figures from it.
_GPUS = load_gpus()


def _shape(label: str, catalog_gpu: str, gpus: int, nic_gbps: float, source: str) -> Shape:
    return Shape.from_catalog(label, catalog_gpu, gpus, nic_gbps, source, catalog=_GPUS)


# --- Azure VMs (Tangram's clusters) ---------------------------------------------------------
NC64AS_T4_V3 = _shape("T4", "T4", 4, 32.0, "Azure NC64as_T4_v3 [AZ]: 4×T4 on PCIe 3.0, 32 Gb/s Ethernet; T4 65 TF FP16, 16 GB [NV]")
# ⚠ [AZ] does not give the NCv3 Ethernet figure in REFERENCE-FIGURES; 24 Gb/s is the
# "expected network bandwidth" Azure lists for the 24-core NCv3 sizes.
NC24S_V3 = _shape("V100-16GB", "V100-PCIe-16GB", 4, 24.0, "Azure NC24s_v3 [AZ]: 4×V100-16GB PCIe (112 TF, 16 GB [NV][LA]), PCIe 3.0; ⚠ Ethernet 24 Gb/s assumed")
# ⚠ NC24rs_v3 adds InfiniBand whose generation [AZ] does not state; 100 Gb/s EDR assumed,
# the generation of the ND40rs_v2 of the same V100 era.
NC24RS_V3_IB_GBPS = 100.0
ND40RS_V2 = _shape("V100-32GB", "V100-SXM2-32GB", 8, 100.0, "Azure ND40rs_v2 [AZ]: 8×V100-32GB SXM2 (125 TF [NV]), NVLink2 150 GB/s per direction, 100 Gb/s EDR InfiniBand")
NC96ADS_A100_V4 = _shape("A100-80GB", "A100-PCIe-80GB", 4, 80.0, "Azure NC96ads_A100_v4 [AZ]: 4×A100-80GB PCIe (312 TF, 80 GB [LA]), PCIe 4.0, 80 Gb/s Ethernet")
# ⚠ [AZ] does not state whether the two H100 NVL are bridged; the H100 NVL product pairs
# them with a 600 GB/s bidirectional bridge, used here (300 per direction).
NC80ADIS_H100_V5 = _shape("H100-NVL", "H100-NVL", 2, 80.0, "Azure NC80adis_H100_v5 [AZ]: 2×H100 NVL (835 TF, 94 GB [TT]), ⚠ NVLink bridge 300 GB/s per direction, 80 Gb/s Ethernet")

# --- AWS VMs (Cephalo's Cluster B) ------------------------------------------------------------
G5_48XLARGE = _shape("A10G", "A10G", 8, 100.0, "AWS g5.48xlarge: 8×A10G (⚠ ~70 TF FP16 [LA], 24 GB), PCIe 4.0, 100 Gb/s")
P3_16XLARGE = _shape("V100-16GB-SXM2", "V100-SXM2-16GB", 8, 25.0, "AWS p3.16xlarge: 8×V100-16GB SXM2 (125 TF [NV]), NVLink2 150 GB/s per direction, 25 Gb/s")
G4DN_METAL = _shape("T4", "T4", 8, 100.0, "AWS g4dn.metal: 8×T4 (65 TF, 16 GB [NV]), PCIe 3.0, ⚠ 100 Gb/s (EFA)")

# --- Cephalo's Cluster A: two workstations with mixed GPUs -------------------------------------
L4_PAIR = _shape("L4", "L4", 2, 50.0, "L4 [NV]: 121 TF FP16, 24 GB, PCIe 4.0 x16")
A6000_ONE = _shape("A6000", "A6000", 1, 50.0, "RTX A6000 [TT][LA]: 154.8 TF, 48 GB; one GPU: its PCIe 4.0 x16 link")
P40_ONE = _shape("P40", "P40", 1, 50.0, "P40 [NV]: no fast FP16, FP32 11.76 TF is the useful rate; 24 GB; PCIe 3.0 x16")
P40_PAIR = _shape("P40", "P40", 2, 50.0, "P40 [NV]: FP32 11.76 TF, 24 GB, PCIe 3.0 x16")
# the 12 GB part: the one Cephalo profiled (its table lists 12), as the cluster file names it
P100_PAIR = _shape("P100", "P100-PCIe-12GB", 2, 50.0, "P100 PCIe 12GB [NV]: 18.7 TF FP16, 12 GB (the part Cephalo profiled), PCIe 3.0 x16")
#: Cluster A's two machines are joined at 50 Gb/s (Cephalo).
CLUSTER_A_GBPS = 50.0

# --- Datacenter nodes (synthetic clusters) ----------------------------------------------------
V100_SXM2_NODE = _shape("V100-32GB", "V100-SXM2-32GB", 8, 100.0, "8×V100-32GB SXM2 [NV], NVLink2, 100 Gb/s EDR (ND40rs_v2-like)")
A100_40_NODE = _shape("A100-40GB", "A100-SXM4-40GB", 8, 1600.0, "8×A100-40GB SXM4 [LA], NVLink3 300 GB/s per direction, 8×200 Gb/s HDR (ND96asr_v4-like)")
A100_80_NODE = _shape("A100-80GB", "A100-SXM4-80GB", 8, 1600.0, "8×A100-80GB SXM4 [LA], NVLink3 300 GB/s per direction, 8×200 Gb/s HDR")
H100_NODE = _shape("H100", "H100-SXM5", 8, 3200.0, "8×H100 SXM5 [TT], NVLink4 450 GB/s per direction, 8×400 Gb/s NDR (ND96isr_H100_v5-like)")
B200_NODE = _shape("B200", "B200", 8, 3200.0, "8×B200 [MLE][TT], NVLink5 900 GB/s per direction, 8×400 Gb/s")


# --- 4-GPU workstation nodes (the pipeline generator's synthetic islands) -----------------------
# ⚠ No source at hand describes a 4×L4 or 4×A6000 node; assumed: the catalog GPU's own PCIe 4.0
# x16 link between the GPUs and 50 Gb/s between nodes, the network of Cephalo's cluster A, whose
# machines hold these GPUs.
L4_QUAD = _shape("L4", "L4", 4, CLUSTER_A_GBPS, "⚠ assumed 4×L4 node (121 TF FP16, 24 GB [NV]), PCIe 4.0 x16, 50 Gb/s as Cephalo's cluster A")
A6000_QUAD = _shape("A6000", "A6000", 4, CLUSTER_A_GBPS, "⚠ assumed 4×RTX A6000 node (154.8 TF, 48 GB [TT][LA]), PCIe 4.0 x16, 50 Gb/s as Cephalo's cluster A")
