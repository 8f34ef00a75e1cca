"""The old-Mali fix for ggml's Vulkan backend, applied to the engine's vendored source by `build --vulkan`.

Old Mali drivers (device apiVersion 1.1, Mali-G77/G78/G610 r32p1) report `bufferDeviceAddress` in
VkPhysicalDeviceVulkan12Features, yet leave the `vkGetBufferDeviceAddress` dispatch slot NULL: ggml-vulkan
calls it for its first buffer and dies with SIGSEGV (llama.cpp #28593, closed unmerged). ggml also reads the
Vulkan 1.1/1.2 feature structs without zeroing them, which a 1.1 driver may leave as they were, and refuses a
Vulkan 1.1 instance (Android 12's loader). The fix: below Vulkan 1.2, ask the 1.1-era feature structs
(16-bit storage, float16/int8, timeline semaphores, zero-initialised), never use buffer device addresses, and
accept a 1.1 instance. A 1.2+ device is untouched.

Each edit replaces text that must occur exactly once in the vendored file; a source that differs is refused
with one line rather than patched blindly.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

from edgepilot.errors import UserError
from edgepilot.safe_write import write_text

TARGET = Path("ggml/src/ggml-vulkan/ggml-vulkan.cpp")
MARKER = "edgepilot old-Mali fix"
LOG_LINE = "below Vulkan 1.2: buffer device address off"

HELPERS = """\
// edgepilot old-Mali fix (issue 32). A device below Vulkan 1.2 (or any device behind a 1.1 instance) need not
// fill VkPhysicalDeviceVulkan11/12Features, and old Mali drivers report bufferDeviceAddress while leaving
// vkGetBufferDeviceAddress NULL. There the 1.1-era feature structs are asked, zero-initialised, and buffer
// device addresses are never used.
static uint32_t ggml_vk_instance_api_version = VK_API_VERSION_1_2;

struct ggml_vk_core_features {
    VkPhysicalDeviceVulkan11Features vk11{};
    VkPhysicalDeviceVulkan12Features vk12{};
    VkPhysicalDevice16BitStorageFeatures storage16{};
    VkPhysicalDevice8BitStorageFeatures storage8{};
    VkPhysicalDeviceShaderFloat16Int8Features float16_int8{};
    VkPhysicalDeviceTimelineSemaphoreFeatures timeline{};
    bool legacy = false;
    bool has_8bit_storage = false;
    bool has_float16_int8 = false;
    bool has_timeline = false;
};

static VkBaseOutStructure * ggml_vk_chain_core_features(const vk::PhysicalDevice & physical_device,
                                                       uint32_t device_api_version,
                                                       VkPhysicalDeviceFeatures2 & features2,
                                                       ggml_vk_core_features & f) {
    f.vk11.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES;
    f.vk12.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES;
    f.legacy = std::min(device_api_version, ggml_vk_instance_api_version) < VK_API_VERSION_1_2;
    if (!f.legacy) {
        features2.pNext = &f.vk11;
        f.vk11.pNext = &f.vk12;
        return (VkBaseOutStructure *)&f.vk12;
    }
    for (const auto & ext : physical_device.enumerateDeviceExtensionProperties()) {
        if (strcmp("VK_KHR_8bit_storage", ext.extensionName) == 0) {
            f.has_8bit_storage = true;
        } else if (strcmp("VK_KHR_shader_float16_int8", ext.extensionName) == 0) {
            f.has_float16_int8 = true;
        } else if (strcmp("VK_KHR_timeline_semaphore", ext.extensionName) == 0) {
            f.has_timeline = true;
        }
    }
    f.storage16.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES;
    features2.pNext = &f.storage16;
    VkBaseOutStructure * last = (VkBaseOutStructure *)&f.storage16;
    if (f.has_8bit_storage) {  // the quantized blocks' uint8_t/int8_t in storage buffers
        f.storage8.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_8BIT_STORAGE_FEATURES;
        last->pNext = (VkBaseOutStructure *)&f.storage8;
        last = (VkBaseOutStructure *)&f.storage8;
    }
    if (f.has_float16_int8) {
        f.float16_int8.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_FLOAT16_INT8_FEATURES;
        last->pNext = (VkBaseOutStructure *)&f.float16_int8;
        last = (VkBaseOutStructure *)&f.float16_int8;
    }
    if (f.has_timeline) {
        f.timeline.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_TIMELINE_SEMAPHORE_FEATURES;
        last->pNext = (VkBaseOutStructure *)&f.timeline;
        last = (VkBaseOutStructure *)&f.timeline;
    }
    return last;
}

// After vkGetPhysicalDeviceFeatures2: the Vulkan 1.1/1.2 view the rest of ggml reads, from the 1.1-era
// structs. bufferDeviceAddress and vulkanMemoryModel stay VK_FALSE: never asked of such a device.
static void ggml_vk_read_core_features(ggml_vk_core_features & f) {
    if (!f.legacy) {
        return;
    }
    f.vk11.storageBuffer16BitAccess = f.storage16.storageBuffer16BitAccess;
    f.vk11.uniformAndStorageBuffer16BitAccess = f.storage16.uniformAndStorageBuffer16BitAccess;
    f.vk11.storagePushConstant16 = f.storage16.storagePushConstant16;
    f.vk11.storageInputOutput16 = f.storage16.storageInputOutput16;
    f.vk12.storageBuffer8BitAccess = f.storage8.storageBuffer8BitAccess;
    f.vk12.uniformAndStorageBuffer8BitAccess = f.storage8.uniformAndStorageBuffer8BitAccess;
    f.vk12.storagePushConstant8 = f.storage8.storagePushConstant8;
    f.vk12.shaderFloat16 = f.float16_int8.shaderFloat16;
    f.vk12.shaderInt8 = f.float16_int8.shaderInt8;
    f.vk12.timelineSemaphore = f.timeline.timelineSemaphore;
}

"""


@dataclass(frozen=True)
class Edit:
    why: str
    old: str
    new: str


def _chain(indent: str, device: str, api: str, comment: str) -> Edit:
    old = (
        f"{indent}VkPhysicalDeviceVulkan11Features vk11_features;\n"
        f"{indent}vk11_features.pNext = nullptr;\n"
        f"{indent}vk11_features.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES;\n"
        f"{indent}device_features2.pNext = &vk11_features;\n\n"
        f"{indent}VkPhysicalDeviceVulkan12Features vk12_features;\n"
        f"{indent}vk12_features.pNext = nullptr;\n"
        f"{indent}vk12_features.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES;\n"
        f"{indent}vk11_features.pNext = &vk12_features;\n\n"
        f"{comment}"
        f"{indent}last_struct = (VkBaseOutStructure *)&vk12_features;\n"
    )
    new = (
        f"{indent}// {MARKER}: zero-initialised, and the 1.1-era structs below Vulkan 1.2\n"
        f"{indent}ggml_vk_core_features core_features;\n"
        f"{indent}VkPhysicalDeviceVulkan11Features & vk11_features = core_features.vk11;\n"
        f"{indent}VkPhysicalDeviceVulkan12Features & vk12_features = core_features.vk12;\n"
        f"{indent}last_struct = ggml_vk_chain_core_features({device}, {api},\n"
        f"{indent}                                          device_features2, core_features);\n"
    )
    return Edit("feature chain", old, new)


EDITS: tuple[Edit, ...] = (
    Edit(
        "subgroup facts from the 1.1 struct",
        "        device->physical_device.getProperties2(&props2);\n"
        "        device->properties = props2.properties;\n",
        "        device->physical_device.getProperties2(&props2);\n"
        "        device->properties = props2.properties;\n"
        f"        // {MARKER}: below 1.2 the subgroup facts come from VkPhysicalDeviceSubgroupProperties\n"
        "        if (std::min(device->properties.apiVersion, ggml_vk_instance_api_version) <\n"
        "            VK_API_VERSION_1_2) {\n"
        "            vk11_props.subgroupSupportedStages = subgroup_props.supportedStages;\n"
        "            vk11_props.subgroupSupportedOperations = subgroup_props.supportedOperations;\n"
        "        }\n",
    ),
    Edit(
        "helpers",
        "vk_device ggml_vk_get_device(size_t idx) {\n",
        HELPERS + "vk_device ggml_vk_get_device(size_t idx) {\n",
    ),
    _chain("        ", "device->physical_device", "device->properties.apiVersion", ""),
    _chain(
        "    ",
        "physical_device",
        "props2.properties.apiVersion",
        "    // Pointer to the last chain element\n",
    ),
    Edit(
        "read the device's features",
        "        vkGetPhysicalDeviceFeatures2(device->physical_device, &device_features2);\n",
        "        vkGetPhysicalDeviceFeatures2(device->physical_device, &device_features2);\n"
        "        ggml_vk_read_core_features(core_features);\n"
        "        if (core_features.legacy) {\n"
        f'            GGML_LOG_INFO("ggml_vulkan: device %zu {LOG_LINE} ({MARKER})\\n", idx);\n'
        "        }\n",
    ),
    Edit(
        "read the features printed",
        "    vkGetPhysicalDeviceFeatures2(physical_device, &device_features2);\n",
        "    vkGetPhysicalDeviceFeatures2(physical_device, &device_features2);\n"
        "    ggml_vk_read_core_features(core_features);\n",
    ),
    Edit(
        "extensions a 1.1 device needs",
        '        device_extensions.push_back("VK_KHR_16bit_storage");\n',
        '        device_extensions.push_back("VK_KHR_16bit_storage");\n'
        "        if (core_features.legacy) {\n"
        "            if (!vk12_features.timelineSemaphore) {\n"
        '                std::cerr << "ggml_vulkan: device " << GGML_VK_NAME << idx'
        ' << " does not support timeline semaphores." << std::endl;\n'
        '                throw std::runtime_error("Unsupported device");\n'
        "            }\n"
        '            device_extensions.push_back("VK_KHR_timeline_semaphore");\n'
        "            if (core_features.has_8bit_storage) {\n"
        '                device_extensions.push_back("VK_KHR_8bit_storage");\n'
        "            }\n"
        "            if (core_features.has_float16_int8 && !device->fp16) {\n"
        '                device_extensions.push_back("VK_KHR_shader_float16_int8");\n'
        "            }\n"
        "        }\n",
    ),
    Edit(
        "which devices are listed",
        "    VkPhysicalDeviceVulkan11Features vk11_features;\n"
        "    vk11_features.pNext = nullptr;\n"
        "    vk11_features.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES;\n"
        "    device_features2.pNext = &vk11_features;\n\n"
        "    vkGetPhysicalDeviceFeatures2(vkdev, &device_features2);\n\n"
        "    return vk11_features.storageBuffer16BitAccess;\n",
        "    device_features2.pNext = nullptr;\n"
        f"    ggml_vk_core_features core_features;  // {MARKER}\n"
        "    ggml_vk_chain_core_features(vkdev, vkdev.getProperties().apiVersion,\n"
        "                                device_features2, core_features);\n"
        "    vkGetPhysicalDeviceFeatures2(vkdev, &device_features2);\n"
        "    ggml_vk_read_core_features(core_features);\n\n"
        "    return core_features.vk11.storageBuffer16BitAccess &&\n"
        "           (!core_features.legacy || core_features.vk12.timelineSemaphore);\n",
    ),
    Edit(
        "a Vulkan 1.1 instance (Android 12's loader)",
        "    if (api_version < VK_API_VERSION_1_2) {\n"
        '        std::cerr << "ggml_vulkan: Error: Vulkan 1.2 required." << std::endl;\n'
        '        throw vk::SystemError(vk::Result::eErrorFeatureNotPresent, "Vulkan 1.2 required");\n'
        "    }\n",
        "    if (api_version < VK_API_VERSION_1_1) {  // " + MARKER + "\n"
        '        std::cerr << "ggml_vulkan: Error: Vulkan 1.1 required." << std::endl;\n'
        '        throw vk::SystemError(vk::Result::eErrorFeatureNotPresent, "Vulkan 1.1 required");\n'
        "    }\n"
        "    ggml_vk_instance_api_version = api_version;\n",
    ),
)


def fix_id() -> str:
    """Names this version of the fix (in the build stamp: a changed fix rebuilds)."""
    text = "".join(e.old + e.new for e in EDITS)
    return "old-mali-" + hashlib.sha256(text.encode()).hexdigest()[:10]


def applied_id(src: Path) -> str | None:
    """The id of the fix src's ggml-vulkan.cpp carries ("" for one without an id line), None: not fixed."""
    try:
        text = (src / TARGET).read_text(errors="replace")
    except OSError:
        return None
    if MARKER not in text:
        return None
    found = re.search(rf"^// {MARKER} id (\S+)$", text, re.M)
    return found.group(1) if found else ""


def is_applied(src: Path) -> bool:
    return applied_id(src) is not None


def apply_fix(src: Path) -> None:
    """Apply every edit to src's ggml-vulkan.cpp, or change nothing and raise UserError. A source fixed by
    another version of the fix is refused too: unpack it again (the builder does)."""
    path = src / TARGET
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"cannot read {TARGET} in the llama.cpp source: {exc}") from None
    if MARKER in text:
        if applied_id(src) == fix_id():
            return
        raise UserError(f"{TARGET} carries another version of the old-Mali fix: unpack the source again")
    for edit in EDITS:
        count = text.count(edit.old)
        if count != 1:
            raise UserError(
                f"the old-Mali fix does not apply to this llama.cpp ({edit.why}: expected once, found "
                f"{count} times in {TARGET}); build with the engine's own source (no --source)"
            )
        text = text.replace(edit.old, edit.new)
    write_text(path, text + f"\n// {MARKER} id {fix_id()}\n", what="the patched ggml-vulkan.cpp")
