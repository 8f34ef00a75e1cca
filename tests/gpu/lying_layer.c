/*
 * A Vulkan layer that acts out an old Mali phone driver over Mesa's lavapipe, for the GPU lane's tests.
 *
 * Mode (env EDGEPILOT_LYING_MODE, read at each call):
 *   bda (default)  the device says it is an integrated "Mali-G77 MC9" (vendor 0x13B5, ARM's proprietary
 *                  driver r32p1) with device apiVersion 1.1, while the Vulkan 1.2 feature struct still says
 *                  bufferDeviceAddress = true (lavapipe's features pass through), and vkGetBufferDeviceAddress
 *                  (and its KHR/EXT aliases) resolve to NULL: the field report's driver.
 *   create-device  the same Mali disguise; vkCreateDevice writes through a NULL pointer (SIGSEGV).
 *   enumerate      the same disguise; vkEnumeratePhysicalDevices writes through NULL once a device exists.
 *   slow           lavapipe as it is, but each vkCreateComputePipelines first keeps a CPU busy for
 *                  EDGEPILOT_LYING_SPIN_S seconds (default 30, across all calls of the process): a driver
 *                  compiling its pipelines on a cold shader cache or a loaded machine.
 *   off            lavapipe as it is (the layer only passes calls on).
 *
 * Load it as an explicit layer: VK_LAYER_PATH=<dir of the manifest> VK_INSTANCE_LAYERS=VK_LAYER_EDGEPILOT_lying.
 */
#include <pthread.h>
#include <stdint.h>
#include <time.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vulkan/vk_layer.h>
#include <vulkan/vulkan.h>

#define EXPORT __attribute__((visibility("default")))
#define MAX_OBJECTS 64

enum mode { MODE_OFF, MODE_BDA, MODE_CREATE_DEVICE, MODE_ENUMERATE, MODE_SLOW };

static enum mode current_mode(void) {
    const char *m = getenv("EDGEPILOT_LYING_MODE");
    if (m == NULL || *m == '\0' || strcmp(m, "bda") == 0) return MODE_BDA;
    if (strcmp(m, "create-device") == 0) return MODE_CREATE_DEVICE;
    if (strcmp(m, "enumerate") == 0) return MODE_ENUMERATE;
    if (strcmp(m, "slow") == 0) return MODE_SLOW;
    return MODE_OFF;
}

/* A real store through address 0, as a broken driver does (volatile: the compiler may not turn it into a trap). */
static int *volatile null_target = NULL;
static void crash_like_a_driver(void) { *null_target = 0x6d616c69; }

struct instance_entry {
    VkInstance instance;
    PFN_vkGetInstanceProcAddr gipa;
    PFN_vkDestroyInstance destroy;
    PFN_vkEnumeratePhysicalDevices enumerate;
    PFN_vkGetPhysicalDeviceProperties props;
    PFN_vkGetPhysicalDeviceProperties2 props2;
    PFN_vkGetPhysicalDeviceProperties2 props2khr;
};

struct device_entry {
    VkDevice device;
    PFN_vkGetDeviceProcAddr gdpa;
    PFN_vkDestroyDevice destroy;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct instance_entry instances[MAX_OBJECTS];
static struct device_entry devices[MAX_OBJECTS];
static struct {
    VkPhysicalDevice gpu;
    int instance;
} gpus[MAX_OBJECTS];

static int find_instance(VkInstance instance) {
    for (int i = 0; i < MAX_OBJECTS; i++)
        if (instances[i].instance == instance && instance != VK_NULL_HANDLE) return i;
    return -1;
}

/* The instance a physical device came from (the last instance created when it is not known). */
static struct instance_entry *instance_of_gpu(VkPhysicalDevice gpu) {
    struct instance_entry *found = NULL;
    pthread_mutex_lock(&lock);
    for (int i = 0; i < MAX_OBJECTS && found == NULL; i++)
        if (gpus[i].gpu == gpu && gpu != VK_NULL_HANDLE) found = &instances[gpus[i].instance];
    for (int i = MAX_OBJECTS - 1; i >= 0 && found == NULL; i--)
        if (instances[i].instance != VK_NULL_HANDLE) found = &instances[i];
    pthread_mutex_unlock(&lock);
    return found;
}

static struct device_entry *find_device(VkDevice device) {
    struct device_entry *found = NULL;
    pthread_mutex_lock(&lock);
    for (int i = 0; i < MAX_OBJECTS && found == NULL; i++)
        if (devices[i].device == device) found = &devices[i];
    pthread_mutex_unlock(&lock);
    return found;
}

static int is_bda_function(const char *name) {
    return strcmp(name, "vkGetBufferDeviceAddress") == 0 || strcmp(name, "vkGetBufferDeviceAddressKHR") == 0 ||
           strcmp(name, "vkGetBufferDeviceAddressEXT") == 0;
}

/* ---- the disguise: an old Mali on ARM's proprietary driver ------------------------------------------------ */

#define MALI_VENDOR_ID 0x13B5u
#define MALI_DEVICE_ID 0x90800011u
#define MALI_API_VERSION VK_MAKE_API_VERSION(0, 1, 1, 177)
#define MALI_DRIVER_VERSION 0x80400000u /* r32p1 as ARM's driver encodes it (the major part) */

/* Whether the device wears the Mali disguise (slow and off: lavapipe as it is). */
static int disguised(void) {
    enum mode m = current_mode();
    return m != MODE_OFF && m != MODE_SLOW;
}

static void disguise(VkPhysicalDeviceProperties *p) {
    p->apiVersion = MALI_API_VERSION;
    p->driverVersion = MALI_DRIVER_VERSION;
    p->vendorID = MALI_VENDOR_ID;
    p->deviceID = MALI_DEVICE_ID;
    p->deviceType = VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU;
    snprintf(p->deviceName, sizeof p->deviceName, "%s", "Mali-G77 MC9");
}

static void disguise_driver(VkDriverId *id, char *name, char *info) {
    *id = VK_DRIVER_ID_ARM_PROPRIETARY;
    snprintf(name, VK_MAX_DRIVER_NAME_SIZE, "%s", "Mali-G77 r32p1");
    snprintf(info, VK_MAX_DRIVER_INFO_SIZE, "%s", "v1.r32p1-01eac0.2819c5c2ad4d30e8c4e6a4e1a4da1c7b");
}

static void disguise2(VkPhysicalDeviceProperties2 *p) {
    disguise(&p->properties);
    for (VkBaseOutStructure *s = (VkBaseOutStructure *)p->pNext; s != NULL; s = s->pNext) {
        if (s->sType == VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES) {
            VkPhysicalDeviceDriverProperties *d = (VkPhysicalDeviceDriverProperties *)s;
            disguise_driver(&d->driverID, d->driverName, d->driverInfo);
        } else if (s->sType == VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_PROPERTIES) {
            VkPhysicalDeviceVulkan12Properties *d = (VkPhysicalDeviceVulkan12Properties *)s;
            disguise_driver(&d->driverID, d->driverName, d->driverInfo);
        }
    }
}

/* ---- a slow compiler: busy in pipeline creation ------------------------------------------------------------ */

static double spin_left = -1.0; /* seconds still to burn in this process (-1: not read yet) */
static volatile uint64_t spin_sink;  /* what the busy loop computes, so the compiler keeps the loop */

static double now_seconds(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* Keep this thread busy on the CPU (not asleep: a compiler works) for the process's budget of wall time. */
static void compile_slowly(void) {
    pthread_mutex_lock(&lock);
    if (spin_left < 0) {
        const char *s = getenv("EDGEPILOT_LYING_SPIN_S");
        spin_left = s != NULL && *s != '\0' ? atof(s) : 30.0;
    }
    double budget = spin_left;
    spin_left = 0.0;
    pthread_mutex_unlock(&lock);
    double start = now_seconds();
    while (now_seconds() - start < budget)
        for (int i = 0; i < 100000; i++) spin_sink += (uint64_t)i * 2654435761u;
}

/* ---- instance level ------------------------------------------------------------------------------------- */

static VKAPI_ATTR void VKAPI_CALL layer_GetPhysicalDeviceProperties(VkPhysicalDevice gpu,
                                                                    VkPhysicalDeviceProperties *p) {
    instance_of_gpu(gpu)->props(gpu, p);
    if (disguised()) disguise(p);
}

static VKAPI_ATTR void VKAPI_CALL layer_GetPhysicalDeviceProperties2(VkPhysicalDevice gpu,
                                                                     VkPhysicalDeviceProperties2 *p) {
    struct instance_entry *inst = instance_of_gpu(gpu);
    (inst->props2 ? inst->props2 : inst->props2khr)(gpu, p);
    if (disguised()) disguise2(p);
}

static VKAPI_ATTR void VKAPI_CALL layer_GetPhysicalDeviceProperties2KHR(VkPhysicalDevice gpu,
                                                                        VkPhysicalDeviceProperties2 *p) {
    struct instance_entry *inst = instance_of_gpu(gpu);
    (inst->props2khr ? inst->props2khr : inst->props2)(gpu, p);
    if (disguised()) disguise2(p);
}

static VKAPI_ATTR VkResult VKAPI_CALL layer_EnumeratePhysicalDevices(VkInstance instance, uint32_t *count,
                                                                     VkPhysicalDevice *out) {
    pthread_mutex_lock(&lock);
    int i = find_instance(instance);
    pthread_mutex_unlock(&lock);
    if (i < 0) return VK_ERROR_INITIALIZATION_FAILED;
    VkResult r = instances[i].enumerate(instance, count, out);
    if (current_mode() == MODE_ENUMERATE && *count > 0) crash_like_a_driver();
    if (out != NULL && (r == VK_SUCCESS || r == VK_INCOMPLETE)) {
        pthread_mutex_lock(&lock);
        for (uint32_t k = 0; k < *count; k++) {
            int slot = -1;
            for (int j = 0; j < MAX_OBJECTS; j++)
                if (gpus[j].gpu == out[k] || (slot < 0 && gpus[j].gpu == VK_NULL_HANDLE)) slot = j;
            if (slot >= 0) {
                gpus[slot].gpu = out[k];
                gpus[slot].instance = i;
            }
        }
        pthread_mutex_unlock(&lock);
    }
    return r;
}

static VKAPI_ATTR VkResult VKAPI_CALL layer_CreateInstance(const VkInstanceCreateInfo *info,
                                                           const VkAllocationCallbacks *alloc,
                                                           VkInstance *instance) {
    VkLayerInstanceCreateInfo *link = (VkLayerInstanceCreateInfo *)info->pNext;
    while (link != NULL && !(link->sType == VK_STRUCTURE_TYPE_LOADER_INSTANCE_CREATE_INFO &&
                             link->function == VK_LAYER_LINK_INFO))
        link = (VkLayerInstanceCreateInfo *)link->pNext;
    if (link == NULL) return VK_ERROR_INITIALIZATION_FAILED;
    PFN_vkGetInstanceProcAddr gipa = link->u.pLayerInfo->pfnNextGetInstanceProcAddr;
    link->u.pLayerInfo = link->u.pLayerInfo->pNext;
    PFN_vkCreateInstance create = (PFN_vkCreateInstance)gipa(VK_NULL_HANDLE, "vkCreateInstance");
    VkResult r = create(info, alloc, instance);
    if (r != VK_SUCCESS) return r;
    pthread_mutex_lock(&lock);
    int slot = -1;
    for (int i = 0; i < MAX_OBJECTS && slot < 0; i++)
        if (instances[i].instance == VK_NULL_HANDLE) slot = i;
    if (slot >= 0) {
        struct instance_entry *e = &instances[slot];
        e->instance = *instance;
        e->gipa = gipa;
        e->destroy = (PFN_vkDestroyInstance)gipa(*instance, "vkDestroyInstance");
        e->enumerate = (PFN_vkEnumeratePhysicalDevices)gipa(*instance, "vkEnumeratePhysicalDevices");
        e->props = (PFN_vkGetPhysicalDeviceProperties)gipa(*instance, "vkGetPhysicalDeviceProperties");
        e->props2 = (PFN_vkGetPhysicalDeviceProperties2)gipa(*instance, "vkGetPhysicalDeviceProperties2");
        e->props2khr = (PFN_vkGetPhysicalDeviceProperties2)gipa(*instance, "vkGetPhysicalDeviceProperties2KHR");
    }
    pthread_mutex_unlock(&lock);
    return slot >= 0 ? VK_SUCCESS : VK_ERROR_OUT_OF_HOST_MEMORY;
}

static VKAPI_ATTR void VKAPI_CALL layer_DestroyInstance(VkInstance instance, const VkAllocationCallbacks *alloc) {
    pthread_mutex_lock(&lock);
    int i = find_instance(instance);
    PFN_vkDestroyInstance destroy = i >= 0 ? instances[i].destroy : NULL;
    if (i >= 0) {
        memset(&instances[i], 0, sizeof instances[i]);
        for (int j = 0; j < MAX_OBJECTS; j++)
            if (gpus[j].instance == i) gpus[j].gpu = VK_NULL_HANDLE;
    }
    pthread_mutex_unlock(&lock);
    if (destroy != NULL) destroy(instance, alloc);
}

/* ---- device level --------------------------------------------------------------------------------------- */

static VKAPI_ATTR VkResult VKAPI_CALL layer_CreateDevice(VkPhysicalDevice gpu, const VkDeviceCreateInfo *info,
                                                         const VkAllocationCallbacks *alloc, VkDevice *device) {
    if (current_mode() == MODE_CREATE_DEVICE) crash_like_a_driver();
    VkLayerDeviceCreateInfo *link = (VkLayerDeviceCreateInfo *)info->pNext;
    while (link != NULL &&
           !(link->sType == VK_STRUCTURE_TYPE_LOADER_DEVICE_CREATE_INFO && link->function == VK_LAYER_LINK_INFO))
        link = (VkLayerDeviceCreateInfo *)link->pNext;
    if (link == NULL) return VK_ERROR_INITIALIZATION_FAILED;
    PFN_vkGetInstanceProcAddr gipa = link->u.pLayerInfo->pfnNextGetInstanceProcAddr;
    PFN_vkGetDeviceProcAddr gdpa = link->u.pLayerInfo->pfnNextGetDeviceProcAddr;
    link->u.pLayerInfo = link->u.pLayerInfo->pNext;
    struct instance_entry *inst = instance_of_gpu(gpu);
    PFN_vkCreateDevice create = (PFN_vkCreateDevice)gipa(inst ? inst->instance : VK_NULL_HANDLE, "vkCreateDevice");
    VkResult r = create(gpu, info, alloc, device);
    if (r != VK_SUCCESS) return r;
    pthread_mutex_lock(&lock);
    int slot = -1;
    for (int i = 0; i < MAX_OBJECTS && slot < 0; i++)
        if (devices[i].device == VK_NULL_HANDLE) slot = i;
    if (slot >= 0) {
        devices[slot].device = *device;
        devices[slot].gdpa = gdpa;
        devices[slot].destroy = (PFN_vkDestroyDevice)gdpa(*device, "vkDestroyDevice");
    }
    pthread_mutex_unlock(&lock);
    return slot >= 0 ? VK_SUCCESS : VK_ERROR_OUT_OF_HOST_MEMORY;
}

static VKAPI_ATTR void VKAPI_CALL layer_DestroyDevice(VkDevice device, const VkAllocationCallbacks *alloc) {
    struct device_entry *e = find_device(device);
    if (e == NULL) return;
    PFN_vkDestroyDevice destroy = e->destroy;
    pthread_mutex_lock(&lock);
    memset(e, 0, sizeof *e);
    pthread_mutex_unlock(&lock);
    destroy(device, alloc);
}

static VKAPI_ATTR VkResult VKAPI_CALL layer_CreateComputePipelines(VkDevice device, VkPipelineCache cache,
                                                                   uint32_t count,
                                                                   const VkComputePipelineCreateInfo *infos,
                                                                   const VkAllocationCallbacks *alloc,
                                                                   VkPipeline *out) {
    struct device_entry *e = find_device(device);
    if (e == NULL) return VK_ERROR_INITIALIZATION_FAILED;
    if (current_mode() == MODE_SLOW) compile_slowly();
    PFN_vkCreateComputePipelines next = (PFN_vkCreateComputePipelines)e->gdpa(device, "vkCreateComputePipelines");
    return next(device, cache, count, infos, alloc, out);
}

/* ---- dispatch ------------------------------------------------------------------------------------------- */

EXPORT VKAPI_ATTR PFN_vkVoidFunction VKAPI_CALL layer_GetDeviceProcAddr(VkDevice device, const char *name);

#define HOOK(fn)                                                                                                   \
    if (strcmp(name, "vk" #fn) == 0) return (PFN_vkVoidFunction)layer_##fn

static PFN_vkVoidFunction device_hook(const char *name) {
    HOOK(GetDeviceProcAddr);
    HOOK(DestroyDevice);
    HOOK(CreateComputePipelines);
    return NULL;
}

EXPORT VKAPI_ATTR PFN_vkVoidFunction VKAPI_CALL layer_GetDeviceProcAddr(VkDevice device, const char *name) {
    if (current_mode() == MODE_BDA && is_bda_function(name)) return NULL; /* the lie */
    PFN_vkVoidFunction hook = device_hook(name);
    if (hook != NULL) return hook;
    struct device_entry *e = find_device(device);
    return e != NULL ? e->gdpa(device, name) : NULL;
}

EXPORT VKAPI_ATTR PFN_vkVoidFunction VKAPI_CALL layer_GetInstanceProcAddr(VkInstance instance, const char *name) {
    if (current_mode() == MODE_BDA && is_bda_function(name)) return NULL;
    HOOK(GetInstanceProcAddr);
    HOOK(CreateInstance);
    HOOK(DestroyInstance);
    HOOK(EnumeratePhysicalDevices);
    HOOK(GetPhysicalDeviceProperties);
    HOOK(GetPhysicalDeviceProperties2);
    HOOK(GetPhysicalDeviceProperties2KHR);
    HOOK(CreateDevice);
    PFN_vkVoidFunction hook = device_hook(name);
    if (hook != NULL) return hook;
    pthread_mutex_lock(&lock);
    int i = find_instance(instance);
    PFN_vkGetInstanceProcAddr gipa = i >= 0 ? instances[i].gipa : NULL;
    pthread_mutex_unlock(&lock);
    return gipa != NULL ? gipa(instance, name) : NULL;
}

EXPORT VKAPI_ATTR VkResult VKAPI_CALL vkNegotiateLoaderLayerInterfaceVersion(VkNegotiateLayerInterface *v) {
    if (v == NULL || v->sType != LAYER_NEGOTIATE_INTERFACE_STRUCT) return VK_ERROR_INITIALIZATION_FAILED;
    if (v->loaderLayerInterfaceVersion > 2) v->loaderLayerInterfaceVersion = 2;
    v->pfnGetInstanceProcAddr = layer_GetInstanceProcAddr;
    v->pfnGetDeviceProcAddr = layer_GetDeviceProcAddr;
    v->pfnGetPhysicalDeviceProcAddr = NULL;
    return VK_SUCCESS;
}
