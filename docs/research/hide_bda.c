/*
 * SKETCH (research, not project code): a Vulkan layer that hides buffer device address from the application
 * on devices whose apiVersion is below 1.2 (or always with EDGEPILOT_HIDE_BDA=1; never with =0), so ggml-vulkan
 * never calls vkGetBufferDeviceAddress. Khronos loader only (interface v2, JSON manifest).
 *   - vkGetPhysicalDeviceFeatures2(KHR): bufferDeviceAddress* = VK_FALSE in Vulkan12 / BDA(KHR) / BDA EXT structs;
 *     on a < 1.2 device the Vulkan11/12 structs (which a 1.1 driver may ignore, leaving the caller's stack
 *     garbage: ggml-vulkan.cpp:4305-4312 never zeroes them) are rebuilt from the 1.1-era structs.
 *   - vkEnumerateDeviceExtensionProperties: VK_KHR/EXT_buffer_device_address dropped.
 *   - vkCreateDevice: BDA features forced off in the (relinked) pNext chain, the BDA extensions dropped.
 * Dispatch lookup uses the loader's dispatch key (*(void **)handle), shared by an instance and its GPUs.
 */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <vulkan/vk_layer.h>
#include <vulkan/vulkan.h>

#define EXPORT __attribute__((visibility("default")))
#define MAXN 32
#define KEY(h) (*(void **)(h))

/* Next-layer pointers must be resolved inside vkCreateInstance: afterwards the loader points the instance's
 * dispatch at the top of the chain, and gipa(instance, name) would return this layer's own hooks (recursion). */
struct inst {
    void *key;
    VkInstance h;
    PFN_vkGetInstanceProcAddr gipa;
    PFN_vkGetPhysicalDeviceProperties props;
    PFN_vkGetPhysicalDeviceFeatures2 feats2;
    PFN_vkEnumerateDeviceExtensionProperties exts;
    PFN_vkCreateDevice create_device;
};
struct dev { void *key; PFN_vkGetDeviceProcAddr gdpa; };
static struct inst insts[MAXN];
static struct dev devs[MAXN]; /* a real layer guards these tables with a mutex (see lying_layer.c) */

static struct inst *inst_of(const void *h) {
    for (int i = 0; i < MAXN; i++) if (insts[i].key == KEY(h)) return &insts[i];
    return NULL;
}

static int is_bda_ext(const char *n) {
    return !strcmp(n, "VK_KHR_buffer_device_address") || !strcmp(n, "VK_EXT_buffer_device_address");
}

static int hide(VkPhysicalDevice gpu) {
    const char *e = getenv("EDGEPILOT_HIDE_BDA");
    if (e && *e) return strcmp(e, "0") != 0;
    VkPhysicalDeviceProperties p;
    inst_of(gpu)->props(gpu, &p);
    return p.apiVersion < VK_API_VERSION_1_2;
}

/* The 1.1-era feature structs, zero-initialised so a driver that ignores one leaves "unsupported". */
struct compat {
    VkPhysicalDeviceFeatures2 f2;
    VkPhysicalDevice16BitStorageFeatures s16;
    VkPhysicalDevice8BitStorageFeatures s8;
    VkPhysicalDeviceShaderFloat16Int8Features f16;
    VkPhysicalDeviceVulkanMemoryModelFeatures vmm;
};
static void query_compat(VkPhysicalDevice gpu, PFN_vkGetPhysicalDeviceFeatures2 next, struct compat *c) {
    memset(c, 0, sizeof *c);
    c->f2 = (VkPhysicalDeviceFeatures2){VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, &c->s16, {0}};
    c->s16.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES, c->s16.pNext = &c->s8;
    c->s8.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_8BIT_STORAGE_FEATURES, c->s8.pNext = &c->f16;
    c->f16.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_FLOAT16_INT8_FEATURES, c->f16.pNext = &c->vmm;
    c->vmm.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_MEMORY_MODEL_FEATURES;
    next(gpu, &c->f2);
}

static void scrub(VkPhysicalDevice gpu, PFN_vkGetPhysicalDeviceFeatures2 next, VkPhysicalDeviceFeatures2 *f) {
    int old = 0;
    struct compat c;
    VkPhysicalDeviceProperties p;
    inst_of(gpu)->props(gpu, &p);
    if (p.apiVersion < VK_API_VERSION_1_2) old = 1, query_compat(gpu, next, &c);
    for (VkBaseOutStructure *s = (VkBaseOutStructure *)f->pNext; s; s = s->pNext) {
        if (s->sType == VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES && old) {
            VkPhysicalDeviceVulkan11Features *v = (VkPhysicalDeviceVulkan11Features *)s;
            memset(&v->storageBuffer16BitAccess, 0, sizeof *v - offsetof(VkPhysicalDeviceVulkan11Features, storageBuffer16BitAccess));
            v->storageBuffer16BitAccess = c.s16.storageBuffer16BitAccess;
            v->uniformAndStorageBuffer16BitAccess = c.s16.uniformAndStorageBuffer16BitAccess;
            v->storagePushConstant16 = c.s16.storagePushConstant16;
        } else if (s->sType == VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES) {
            VkPhysicalDeviceVulkan12Features *v = (VkPhysicalDeviceVulkan12Features *)s;
            if (old) {
                memset(&v->samplerMirrorClampToEdge, 0, sizeof *v - offsetof(VkPhysicalDeviceVulkan12Features, samplerMirrorClampToEdge));
                v->storageBuffer8BitAccess = c.s8.storageBuffer8BitAccess;
                v->shaderFloat16 = c.f16.shaderFloat16, v->shaderInt8 = c.f16.shaderInt8;
                v->vulkanMemoryModel = c.vmm.vulkanMemoryModel;
            }
            v->bufferDeviceAddress = v->bufferDeviceAddressCaptureReplay = v->bufferDeviceAddressMultiDevice = VK_FALSE;
        } else if (s->sType == VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_BUFFER_DEVICE_ADDRESS_FEATURES) {
            VkPhysicalDeviceBufferDeviceAddressFeatures *v = (VkPhysicalDeviceBufferDeviceAddressFeatures *)s;
            v->bufferDeviceAddress = v->bufferDeviceAddressCaptureReplay = v->bufferDeviceAddressMultiDevice = VK_FALSE;
        } else if (s->sType == VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_BUFFER_DEVICE_ADDRESS_FEATURES_EXT) {
            VkPhysicalDeviceBufferDeviceAddressFeaturesEXT *v = (VkPhysicalDeviceBufferDeviceAddressFeaturesEXT *)s;
            v->bufferDeviceAddress = v->bufferDeviceAddressCaptureReplay = v->bufferDeviceAddressMultiDevice = VK_FALSE;
        }
    }
}

static VKAPI_ATTR void VKAPI_CALL hb_GetPhysicalDeviceFeatures2(VkPhysicalDevice gpu, VkPhysicalDeviceFeatures2 *f) {
    PFN_vkGetPhysicalDeviceFeatures2 next = inst_of(gpu)->feats2;
    next(gpu, f);
    if (hide(gpu)) scrub(gpu, next, f);
}

static VKAPI_ATTR VkResult VKAPI_CALL hb_EnumerateDeviceExtensionProperties(VkPhysicalDevice gpu, const char *layer,
                                                                           uint32_t *count, VkExtensionProperties *out) {
    if (layer && !strcmp(layer, "VK_LAYER_EDGEPILOT_hide_bda")) return *count = 0, VK_SUCCESS;
    PFN_vkEnumerateDeviceExtensionProperties next = inst_of(gpu)->exts;
    if (layer || !hide(gpu)) return next(gpu, layer, count, out);
    uint32_t n = 0, k = 0;
    VkResult r = next(gpu, NULL, &n, NULL);
    VkExtensionProperties *all = r == VK_SUCCESS ? calloc(n ? n : 1, sizeof *all) : NULL;
    if (!all) return r == VK_SUCCESS ? VK_ERROR_OUT_OF_HOST_MEMORY : r;
    r = next(gpu, NULL, &n, all);
    for (uint32_t i = 0; i < n; i++) {
        if (is_bda_ext(all[i].extensionName)) continue;
        if (out && k >= *count) { free(all); return VK_INCOMPLETE; }
        if (out) out[k] = all[i];
        k++;
    }
    free(all);
    *count = k;
    return r;
}

static VKAPI_ATTR VkResult VKAPI_CALL hb_CreateDevice(VkPhysicalDevice gpu, const VkDeviceCreateInfo *ci,
                                                     const VkAllocationCallbacks *a, VkDevice *out) {
    VkLayerDeviceCreateInfo *l = (VkLayerDeviceCreateInfo *)ci->pNext;
    while (l && !(l->sType == VK_STRUCTURE_TYPE_LOADER_DEVICE_CREATE_INFO && l->function == VK_LAYER_LINK_INFO))
        l = (VkLayerDeviceCreateInfo *)l->pNext;
    if (!l) return VK_ERROR_INITIALIZATION_FAILED;
    PFN_vkGetDeviceProcAddr gdpa = l->u.pLayerInfo->pfnNextGetDeviceProcAddr;
    l->u.pLayerInfo = l->u.pLayerInfo->pNext;
    PFN_vkCreateDevice create = inst_of(gpu)->create_device;
    VkDeviceCreateInfo copy = *ci;
    const char *exts[256];
    VkBool32 *bda[MAXN];
    int nb = 0;
    if (hide(gpu)) { /* drop the BDA extensions; switch BDA feature bits off in place, restored below */
        copy.enabledExtensionCount = 0, copy.ppEnabledExtensionNames = exts;
        for (uint32_t i = 0; i < ci->enabledExtensionCount && i < 256; i++)
            if (!is_bda_ext(ci->ppEnabledExtensionNames[i])) exts[copy.enabledExtensionCount++] = ci->ppEnabledExtensionNames[i];
        for (VkBaseOutStructure *s = (VkBaseOutStructure *)ci->pNext; s && nb < MAXN; s = s->pNext)
            if (s->sType == VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES)
                bda[nb++] = &((VkPhysicalDeviceVulkan12Features *)s)->bufferDeviceAddress;
            else if (s->sType == VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_BUFFER_DEVICE_ADDRESS_FEATURES)
                bda[nb++] = &((VkPhysicalDeviceBufferDeviceAddressFeatures *)s)->bufferDeviceAddress;
        /* On a < 1.2 device a full version also swaps Vulkan11/12Features for the 1.1-era structs here. */
    }
    VkBool32 saved[MAXN];
    for (int i = 0; i < nb; i++) saved[i] = *bda[i], *bda[i] = VK_FALSE;
    VkResult r = create(gpu, &copy, a, out);
    for (int i = 0; i < nb; i++) *bda[i] = saved[i];
    if (r != VK_SUCCESS) return r;
    for (int i = 0; i < MAXN; i++) if (!devs[i].key) { devs[i].key = KEY(*out), devs[i].gdpa = gdpa; break; }
    return r;
}

static VKAPI_ATTR VkResult VKAPI_CALL hb_CreateInstance(const VkInstanceCreateInfo *ci, const VkAllocationCallbacks *a,
                                                       VkInstance *out) {
    VkLayerInstanceCreateInfo *l = (VkLayerInstanceCreateInfo *)ci->pNext;
    while (l && !(l->sType == VK_STRUCTURE_TYPE_LOADER_INSTANCE_CREATE_INFO && l->function == VK_LAYER_LINK_INFO))
        l = (VkLayerInstanceCreateInfo *)l->pNext;
    if (!l) return VK_ERROR_INITIALIZATION_FAILED;
    PFN_vkGetInstanceProcAddr gipa = l->u.pLayerInfo->pfnNextGetInstanceProcAddr;
    l->u.pLayerInfo = l->u.pLayerInfo->pNext;
    VkResult r = ((PFN_vkCreateInstance)gipa(VK_NULL_HANDLE, "vkCreateInstance"))(ci, a, out);
    if (r != VK_SUCCESS) return r;
    for (int i = 0; i < MAXN; i++)
        if (!insts[i].key) {
            struct inst *e = &insts[i];
            *e = (struct inst){KEY(*out), *out, gipa, 0, 0, 0, 0};
            e->props = (PFN_vkGetPhysicalDeviceProperties)gipa(*out, "vkGetPhysicalDeviceProperties");
            e->feats2 = (PFN_vkGetPhysicalDeviceFeatures2)gipa(*out, "vkGetPhysicalDeviceFeatures2");
            if (!e->feats2) e->feats2 = (PFN_vkGetPhysicalDeviceFeatures2)gipa(*out, "vkGetPhysicalDeviceFeatures2KHR");
            e->exts = (PFN_vkEnumerateDeviceExtensionProperties)gipa(*out, "vkEnumerateDeviceExtensionProperties");
            e->create_device = (PFN_vkCreateDevice)gipa(*out, "vkCreateDevice");
            break;
        }
    return r; /* vkDestroyInstance/vkDestroyDevice hooks that free the slots are left out of the sketch */
}

EXPORT VKAPI_ATTR PFN_vkVoidFunction VKAPI_CALL hb_GetDeviceProcAddr(VkDevice d, const char *name) {
    if (!strcmp(name, "vkGetDeviceProcAddr")) return (PFN_vkVoidFunction)hb_GetDeviceProcAddr;
    for (int i = 0; i < MAXN; i++) if (devs[i].key == KEY(d)) return devs[i].gdpa(d, name);
    return NULL;
}

#define HOOK(n, f) if (!strcmp(name, n)) return (PFN_vkVoidFunction)f
EXPORT VKAPI_ATTR PFN_vkVoidFunction VKAPI_CALL hb_GetInstanceProcAddr(VkInstance inst, const char *name) {
    HOOK("vkGetInstanceProcAddr", hb_GetInstanceProcAddr);
    HOOK("vkCreateInstance", hb_CreateInstance);
    HOOK("vkGetDeviceProcAddr", hb_GetDeviceProcAddr);
    HOOK("vkCreateDevice", hb_CreateDevice);
    HOOK("vkGetPhysicalDeviceFeatures2", hb_GetPhysicalDeviceFeatures2);
    HOOK("vkGetPhysicalDeviceFeatures2KHR", hb_GetPhysicalDeviceFeatures2);
    HOOK("vkEnumerateDeviceExtensionProperties", hb_EnumerateDeviceExtensionProperties);
    struct inst *e = inst ? inst_of(inst) : NULL;
    return e ? e->gipa(inst, name) : NULL;
}

EXPORT VKAPI_ATTR VkResult VKAPI_CALL vkNegotiateLoaderLayerInterfaceVersion(VkNegotiateLayerInterface *v) {
    if (!v || v->sType != LAYER_NEGOTIATE_INTERFACE_STRUCT) return VK_ERROR_INITIALIZATION_FAILED;
    if (v->loaderLayerInterfaceVersion > 2) v->loaderLayerInterfaceVersion = 2;
    v->pfnGetInstanceProcAddr = hb_GetInstanceProcAddr;
    v->pfnGetDeviceProcAddr = hb_GetDeviceProcAddr;
    v->pfnGetPhysicalDeviceProcAddr = NULL;
    return VK_SUCCESS;
}
