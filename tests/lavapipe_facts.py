"""Mesa's lavapipe as probe's facts show it (device/gpu_driver.py), captured in the packaged lane (Debian sid:
Mesa 26.2 with LLVM 22.1.8, llama.cpp 0.7.0, GGML_VK_VISIBLE_DEVICES=0): `vulkaninfo --summary` and
`vulkaninfo` (deviceType, driverID, the one memory heap, maxStorageBufferRange) and the sizes on disk of the
ICD lvp_icd.json names and the large library it links (`readelf -d libvulkan_lvp.so`: libLLVM.so.22.1)."""

from __future__ import annotations

from edgepilot.device.gpu_driver import DriverFacts

LIB = "/usr/lib/x86_64-linux-gnu/"
LAVAPIPE = DriverFacts(
    llama_name="Vulkan0",
    name="llvmpipe (LLVM 22.1.8, 256 bits)",
    device_type="CPU",
    driver="DRIVER_ID_MESA_LLVMPIPE",
    heaps=[{"bytes": 25276190720, "device_local": True}],
    libraries={f"{LIB}libvulkan_lvp.so": 15715000, f"{LIB}libLLVM.so.22.1": 150538760},
    max_storage_range=134217728,
)
