/* A CPU that faults inside llama.cpp's matrix multiply, as a native build's AMX kernels fault on a VM that
 * lists AMX without granting its tiles, or an ARM build's i8mm GEMM on a core without i8mm.
 *
 * Loaded with LD_PRELOAD, this library takes the place of ggml's Q4_K 8x8 GEMM (the repacked kernel that
 * CPU_REPACK buffers use on prompt batches of more than a few rows; decoding one token uses the GEMV) and
 * executes an illegal instruction there (x86 ud2: SIGILL, trap code ILL_ILLOPN). ggml calls it through the
 * PLT, so the fault comes from inside ggml's mul_mat, on the thread that multiplies.
 *
 * EP_SIGILL_MODE=everywhere also takes the place of the non-repacked Q4_K dot product, so that running
 * without repacking faults too. EP_SIGILL_ONLY=NAME faults only in processes whose name contains NAME
 * (python: the in-process engine; llama: llama.cpp's programs); elsewhere the real kernels run.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

static int faults_here(void) {
    const char *only = getenv("EP_SIGILL_ONLY");
    return only == NULL || strstr(program_invocation_short_name, only) != NULL;
}

/* ggml's own definition. dlsym(RTLD_NEXT) does not see it when the library was opened RTLD_LOCAL (ctypes, as
 * llama-cpp-python does), so the loaded libggml-cpu is found by name and asked directly. */
static int find_ggml_cpu(struct dl_phdr_info *info, size_t size, void *data) {
    (void)size;
    if (info->dlpi_name != NULL && strstr(info->dlpi_name, "libggml-cpu") != NULL) {
        *(const char **)data = info->dlpi_name;
        return 1;
    }
    return 0;
}

static void *real(const char *name) {
    const char *path = NULL;
    dl_iterate_phdr(find_ggml_cpu, &path);
    void *handle = path != NULL ? dlopen(path, RTLD_LAZY | RTLD_NOLOAD) : NULL;
    void *fn = handle != NULL ? dlsym(handle, name) : NULL;
    if (fn == NULL) {
        abort();
    }
    return fn;
}

typedef void (*gemm_fn)(int, float *, size_t, const void *, const void *, int, int);
typedef void (*dot_fn)(int, float *, size_t, const void *, size_t, const void *, size_t, int);

void ggml_gemm_q4_K_8x8_q8_K(int n, float *s, size_t bs, const void *vx, const void *vy, int nr, int nc) {
    if (faults_here()) {
        __builtin_trap();
    }
    ((gemm_fn)real("ggml_gemm_q4_K_8x8_q8_K"))(n, s, bs, vx, vy, nr, nc);
}

void ggml_vec_dot_q4_K_q8_K(int n, float *s, size_t bs, const void *vx, size_t bx, const void *vy, size_t by,
                            int nrc) {
    const char *mode = getenv("EP_SIGILL_MODE");
    if (mode != NULL && strcmp(mode, "everywhere") == 0 && faults_here()) {
        __builtin_trap();
    }
    ((dot_fn)real("ggml_vec_dot_q4_K_q8_K"))(n, s, bs, vx, bx, vy, by, nrc);
}
