"""Node shapes used by the shipped islands instances, with their sources.

Figures come from ``REFERENCE-FIGURES.md`` (sources in brackets there: [NV] datasheets,
[AZ] Azure VM size docs, AWS docs). Conventions chosen here, stated once:

* ``tflops``: dense FP16/BF16 tensor rate per GPU; for the P40, which has no fast FP16,
  its FP32 rate (the useful one);
* ``memory_gib``: the datasheet's GB figure (the tolerance compares ratios, so GB vs GiB
  does not change any answer);
* ``intra_gbs``: GPU-to-GPU bandwidth per GPU and per direction (NVLink2 150, NVLink3 300,
  NVLink4 450, PCIe 3.0 x16 16, PCIe 4.0 x16 32); a one-GPU node uses its PCIe link;
* ``nic_gbps``: the VM's or node's network bandwidth, which bounds every link it has.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Shape:
    """A node shape: GPU label, GPUs, per-GPU figures, NIC, and where the figures come from."""

    gpu: str
    gpus: int
    tflops: float
    memory_gib: float
    intra_gbs: float
    nic_gbps: float
    source: str


# --- Azure VMs (Tangram's clusters) ---------------------------------------------------------
NC64AS_T4_V3 = Shape("T4", 4, 65.0, 16.0, 16.0, 32.0, "Azure NC64as_T4_v3 [AZ]: 4×T4 on PCIe 3.0, 32 Gb/s Ethernet; T4 65 TF FP16, 16 GB [NV]")
# ⚠ [AZ] does not give the NCv3 Ethernet figure in REFERENCE-FIGURES; 24 Gb/s is the
# "expected network bandwidth" Azure lists for the 24-core NCv3 sizes.
NC24S_V3 = Shape("V100-16GB", 4, 112.0, 16.0, 16.0, 24.0, "Azure NC24s_v3 [AZ]: 4×V100-16GB PCIe (112 TF, 16 GB [NV][LA]), PCIe 3.0; ⚠ Ethernet 24 Gb/s assumed")
# ⚠ NC24rs_v3 adds InfiniBand whose generation [AZ] does not state; 100 Gb/s EDR assumed,
# the generation of the ND40rs_v2 of the same V100 era.
NC24RS_V3_IB_GBPS = 100.0
ND40RS_V2 = Shape("V100-32GB", 8, 125.0, 32.0, 150.0, 100.0, "Azure ND40rs_v2 [AZ]: 8×V100-32GB SXM2 (125 TF [NV]), NVLink2 150 GB/s per direction, 100 Gb/s EDR InfiniBand")
NC96ADS_A100_V4 = Shape("A100-80GB", 4, 312.0, 80.0, 32.0, 80.0, "Azure NC96ads_A100_v4 [AZ]: 4×A100-80GB PCIe (312 TF, 80 GB [LA]), PCIe 4.0, 80 Gb/s Ethernet")
# ⚠ [AZ] does not state whether the two H100 NVL are bridged; the H100 NVL product pairs
# them with a 600 GB/s bidirectional bridge, used here (300 per direction).
NC80ADIS_H100_V5 = Shape("H100-NVL", 2, 835.0, 94.0, 300.0, 80.0, "Azure NC80adis_H100_v5 [AZ]: 2×H100 NVL (835 TF, 94 GB [TT]), ⚠ NVLink bridge 300 GB/s per direction, 80 Gb/s Ethernet")

# --- AWS VMs (Cephalo's Cluster B) ------------------------------------------------------------
G5_48XLARGE = Shape("A10G", 8, 70.0, 24.0, 32.0, 100.0, "AWS g5.48xlarge: 8×A10G (⚠ ~70 TF FP16 [LA], 24 GB), PCIe 4.0, 100 Gb/s")
P3_16XLARGE = Shape("V100-16GB-SXM2", 8, 125.0, 16.0, 150.0, 25.0, "AWS p3.16xlarge: 8×V100-16GB SXM2 (125 TF [NV]), NVLink2 150 GB/s per direction, 25 Gb/s")
G4DN_METAL = Shape("T4", 8, 65.0, 16.0, 16.0, 100.0, "AWS g4dn.metal: 8×T4 (65 TF, 16 GB [NV]), PCIe 3.0, ⚠ 100 Gb/s (EFA)")

# --- Cephalo's Cluster A: two workstations with mixed GPUs -------------------------------------
L4_PAIR = Shape("L4", 2, 121.0, 24.0, 32.0, 50.0, "L4 [NV]: 121 TF FP16, 24 GB, PCIe 4.0 x16")
A6000_ONE = Shape("A6000", 1, 154.8, 48.0, 32.0, 50.0, "RTX A6000 [TT][LA]: 154.8 TF, 48 GB; one GPU: its PCIe 4.0 x16 link")
P40_ONE = Shape("P40", 1, 11.76, 24.0, 16.0, 50.0, "P40 [NV]: no fast FP16, FP32 11.76 TF is the useful rate; 24 GB; PCIe 3.0 x16")
P40_PAIR = Shape("P40", 2, 11.76, 24.0, 16.0, 50.0, "P40 [NV]: FP32 11.76 TF, 24 GB, PCIe 3.0 x16")
P100_PAIR = Shape("P100", 2, 18.7, 16.0, 16.0, 50.0, "P100 PCIe [NV]: 18.7 TF FP16, 16 GB (Cephalo's profile table uses 12), PCIe 3.0 x16")
#: Cluster A's two machines are joined at 50 Gb/s (Cephalo).
CLUSTER_A_GBPS = 50.0

# --- Datacenter nodes (synthetic clusters) ----------------------------------------------------
V100_SXM2_NODE = Shape("V100-32GB", 8, 125.0, 32.0, 150.0, 100.0, "8×V100-32GB SXM2 [NV], NVLink2, 100 Gb/s EDR (ND40rs_v2-like)")
A100_40_NODE = Shape("A100-40GB", 8, 312.0, 40.0, 300.0, 1600.0, "8×A100-40GB SXM4 [LA], NVLink3 300 GB/s per direction, 8×200 Gb/s HDR (ND96asr_v4-like)")
A100_80_NODE = Shape("A100-80GB", 8, 312.0, 80.0, 300.0, 1600.0, "8×A100-80GB SXM4 [LA], NVLink3 300 GB/s per direction, 8×200 Gb/s HDR")
H100_NODE = Shape("H100", 8, 989.0, 80.0, 450.0, 3200.0, "8×H100 SXM5 [TT], NVLink4 450 GB/s per direction, 8×400 Gb/s NDR (ND96isr_H100_v5-like)")
B200_NODE = Shape("B200", 8, 2250.0, 180.0, 900.0, 3200.0, "8×B200 [MLE][TT], NVLink5 900 GB/s per direction, 8×400 Gb/s")


#: The ``instances/gpus.toml`` entry behind each shape: its tflops (the catalog's
#: ``training_tflops``), memory and intra-node figures must be the catalog's (a test checks
#: it), so the islands instances and the planner's clusters describe the same hardware.
CATALOG_NAME = {
    "NC64AS_T4_V3": "T4", "NC24S_V3": "V100-PCIe-16GB", "ND40RS_V2": "V100-SXM2-32GB",
    "NC96ADS_A100_V4": "A100-PCIe-80GB", "NC80ADIS_H100_V5": "H100-NVL", "G5_48XLARGE": "A10G",
    "P3_16XLARGE": "V100-SXM2-16GB", "G4DN_METAL": "T4", "L4_PAIR": "L4", "A6000_ONE": "A6000",
    "P40_ONE": "P40", "P40_PAIR": "P40", "P100_PAIR": "P100-PCIe", "V100_SXM2_NODE": "V100-SXM2-32GB",
    "A100_40_NODE": "A100-SXM4-40GB", "A100_80_NODE": "A100-SXM4-80GB", "H100_NODE": "H100-SXM5", "B200_NODE": "B200",
}
