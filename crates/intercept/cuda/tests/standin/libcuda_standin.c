/* A stand-in for the CUDA driver (libcuda.so.1) for the interposer's
 * tests: two devices, contexts, "kernels" that busy-wait gridDimX
 * microseconds, host-memory allocations under an optional total limit
 * (STANDIN_MEMORY_LIMIT, bytes: the driver's own out-of-memory), the
 * per-thread-default-stream variants (_ptsz, _ptds) of the calls the
 * tests make, which count their calls, and counters the tests read. Built with -Wl,-Bsymbolic so that the
 * addresses it hands out are its own functions, not the interposer's. */
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef struct ctx { int dev; } *CUcontext;
typedef void *CUstream, *CUevent, *CUfunction, *CUgraphExec, *CUmemoryPool;
typedef struct { unsigned gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, sharedMemBytes; } CUlaunchConfig;

#define NDEV 2
static struct ctx contexts[NDEV] = {{0}, {1}};
static __thread CUcontext stack[16];
static __thread int depth;
static atomic_long launches[NDEV], copies, syncs, in_use, per_thread;

/* Allocations: address -> size, for frees and the limit. */
#define MAXA 4096
static struct { void *p; size_t n; } allocs[MAXA];

long standin_launches(int dev) { return dev >= 0 && dev < NDEV ? launches[dev] : -1; }
long standin_copies(void) { return copies; }
long standin_syncs(void) { return syncs; }
long standin_bytes_in_use(void) { return in_use; }
long standin_per_thread_calls(void) { return per_thread; }

static CUcontext cur(void) { return depth ? stack[depth - 1] : 0; }

static void spin_us(unsigned us) {
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    do clock_gettime(CLOCK_MONOTONIC, &b);
    while ((b.tv_sec - a.tv_sec) * 1000000L + (b.tv_nsec - a.tv_nsec) / 1000 < (long)us);
}

CUresult cuInit(unsigned flags) { (void)flags; return 0; }
CUresult cuDeviceGetCount(int *n) { *n = NDEV; return 0; }
CUresult cuDeviceGet(CUdevice *d, int ordinal) {
    if (ordinal < 0 || ordinal >= NDEV) return 101;
    *d = ordinal;
    return 0;
}
CUresult cuCtxCreate_v2(CUcontext *c, unsigned flags, CUdevice d) {
    (void)flags;
    if (d < 0 || d >= NDEV) return 101;
    *c = &contexts[d];
    if (depth < 16) stack[depth++] = *c; else stack[15] = *c;
    return 0;
}
CUresult cuCtxSetCurrent(CUcontext c) {
    if (depth == 0) depth = 1;
    stack[depth - 1] = c;
    return 0;
}
CUresult cuCtxGetCurrent(CUcontext *c) { *c = cur(); return 0; }
CUresult cuCtxGetDevice(CUdevice *d) {
    if (!cur()) return 201; /* CUDA_ERROR_INVALID_CONTEXT */
    *d = cur()->dev;
    return 0;
}
CUresult cuCtxPushCurrent_v2(CUcontext c) {
    if (depth >= 16) return 1;
    stack[depth++] = c;
    return 0;
}
CUresult cuCtxPopCurrent_v2(CUcontext *c) {
    if (!depth) return 201;
    depth--;
    if (c) *c = stack[depth];
    return 0;
}
CUresult cuCtxPushCurrent(CUcontext c) { return cuCtxPushCurrent_v2(c); }
CUresult cuCtxPopCurrent(CUcontext *c) { return cuCtxPopCurrent_v2(c); }
CUresult cuCtxSynchronize(void) { if (!cur()) return 201; syncs++; return 0; }
CUresult cuStreamSynchronize(CUstream s) { (void)s; syncs++; return 0; }
CUresult cuEventSynchronize(CUevent e) { (void)e; syncs++; return 0; }

static CUresult run(unsigned us) {
    if (!cur()) return 201;
    spin_us(us);
    launches[cur()->dev]++;
    return 0;
}
CUresult cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                        unsigned by, unsigned bz, unsigned sh, CUstream s, void **p, void **e) {
    (void)f; (void)gy; (void)gz; (void)bx; (void)by; (void)bz; (void)sh; (void)s; (void)p; (void)e;
    return run(gx);
}
CUresult cuLaunchKernelEx(const CUlaunchConfig *c, CUfunction f, void **p, void **e) {
    (void)f; (void)p; (void)e;
    return run(c->gridDimX);
}
CUresult cuLaunchCooperativeKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                                   unsigned by, unsigned bz, unsigned sh, CUstream s, void **p) {
    (void)f; (void)gy; (void)gz; (void)bx; (void)by; (void)bz; (void)sh; (void)s; (void)p;
    return run(gx);
}
CUresult cuGraphLaunch(CUgraphExec g, CUstream s) { (void)g; (void)s; return run(0); }

static CUresult alloc(CUdeviceptr *d, size_t n) {
    const char *lim = getenv("STANDIN_MEMORY_LIMIT");
    if (!cur()) return 201;
    if (lim && in_use + (long)n > atol(lim)) return 2;
    void *p = malloc(n ? n : 1);
    if (!p) return 2;
    for (int i = 0; i < MAXA; i++)
        if (!allocs[i].p) { allocs[i].p = p; allocs[i].n = n; in_use += n; *d = (CUdeviceptr)(uintptr_t)p; return 0; }
    free(p);
    return 2;
}
CUresult cuMemAlloc_v2(CUdeviceptr *d, size_t n) { return alloc(d, n); }
CUresult cuMemAllocManaged(CUdeviceptr *d, size_t n, unsigned flags) { (void)flags; return alloc(d, n); }
CUresult cuMemAllocAsync(CUdeviceptr *d, size_t n, CUstream s) { (void)s; return alloc(d, n); }
CUresult cuMemAllocPitch_v2(CUdeviceptr *d, size_t *pitch, size_t w, size_t h, unsigned e) {
    (void)e;
    *pitch = (w + 511) / 512 * 512;
    return alloc(d, *pitch * h);
}
CUresult cuMemFree_v2(CUdeviceptr d) {
    for (int i = 0; i < MAXA; i++)
        if (allocs[i].p && (CUdeviceptr)(uintptr_t)allocs[i].p == d) {
            free(allocs[i].p); in_use -= allocs[i].n; allocs[i].p = 0; return 0;
        }
    return 1;
}
CUresult cuMemFreeAsync(CUdeviceptr d, CUstream s) { (void)s; return cuMemFree_v2(d); }
CUresult cuMemcpyHtoD_v2(CUdeviceptr d, const void *s, size_t n) { memcpy((void *)(uintptr_t)d, s, n); copies++; return 0; }
CUresult cuMemcpyDtoH_v2(void *d, CUdeviceptr s, size_t n) { memcpy(d, (void *)(uintptr_t)s, n); copies++; return 0; }

/* Per-thread-default-stream variants: the same, counted. */
#define PT(call) (per_thread++, (call))
CUresult cuStreamSynchronize_ptsz(CUstream s) { return PT(cuStreamSynchronize(s)); }
CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                             unsigned by, unsigned bz, unsigned sh, CUstream s, void **p, void **e) {
    return PT(cuLaunchKernel(f, gx, gy, gz, bx, by, bz, sh, s, p, e));
}
CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig *c, CUfunction f, void **p, void **e) {
    return PT(cuLaunchKernelEx(c, f, p, e));
}
CUresult cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                                        unsigned by, unsigned bz, unsigned sh, CUstream s, void **p) {
    return PT(cuLaunchCooperativeKernel(f, gx, gy, gz, bx, by, bz, sh, s, p));
}
CUresult cuGraphLaunch_ptsz(CUgraphExec g, CUstream s) { return PT(cuGraphLaunch(g, s)); }
CUresult cuMemAllocAsync_ptsz(CUdeviceptr *d, size_t n, CUstream s) { return PT(cuMemAllocAsync(d, n, s)); }
CUresult cuMemFreeAsync_ptsz(CUdeviceptr d, CUstream s) { return PT(cuMemFreeAsync(d, s)); }
CUresult cuMemcpyHtoD_v2_ptds(CUdeviceptr d, const void *s, size_t n) { return PT(cuMemcpyHtoD_v2(d, s, n)); }
CUresult cuMemcpyDtoH_v2_ptds(void *d, CUdeviceptr s, size_t n) { return PT(cuMemcpyDtoH_v2(d, s, n)); }

static const struct { const char *name; int since; void *fn; } table[] = {
    {"cuInit", 2000, (void *)cuInit},
    {"cuDeviceGet", 2000, (void *)cuDeviceGet},
    {"cuDeviceGetCount", 2000, (void *)cuDeviceGetCount},
    {"cuCtxCreate", 3020, (void *)cuCtxCreate_v2},
    {"cuCtxGetCurrent", 4000, (void *)cuCtxGetCurrent},
    {"cuCtxGetDevice", 2000, (void *)cuCtxGetDevice},
    {"cuCtxPushCurrent", 4000, (void *)cuCtxPushCurrent_v2},
    {"cuCtxPopCurrent", 4000, (void *)cuCtxPopCurrent_v2},
    {"cuCtxSynchronize", 2000, (void *)cuCtxSynchronize},
    {"cuStreamSynchronize", 2000, (void *)cuStreamSynchronize},
    {"cuEventSynchronize", 2000, (void *)cuEventSynchronize},
    {"cuLaunchKernel", 4000, (void *)cuLaunchKernel},
    {"cuLaunchKernelEx", 11060, (void *)cuLaunchKernelEx},
    {"cuLaunchCooperativeKernel", 9000, (void *)cuLaunchCooperativeKernel},
    {"cuGraphLaunch", 10000, (void *)cuGraphLaunch},
    {"cuMemAlloc", 3020, (void *)cuMemAlloc_v2},
    {"cuMemAllocPitch", 3020, (void *)cuMemAllocPitch_v2},
    {"cuMemAllocManaged", 6000, (void *)cuMemAllocManaged},
    {"cuMemAllocAsync", 11020, (void *)cuMemAllocAsync},
    {"cuMemFree", 3020, (void *)cuMemFree_v2},
    {"cuMemFreeAsync", 11020, (void *)cuMemFreeAsync},
    {"cuMemcpyHtoD", 3020, (void *)cuMemcpyHtoD_v2},
    {"cuMemcpyDtoH", 3020, (void *)cuMemcpyDtoH_v2},
};

/* What CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM asks for instead. */
static const struct { const char *name; void *fn; } per_thread_table[] = {
    {"cuStreamSynchronize", (void *)cuStreamSynchronize_ptsz},
    {"cuLaunchKernel", (void *)cuLaunchKernel_ptsz},
    {"cuLaunchKernelEx", (void *)cuLaunchKernelEx_ptsz},
    {"cuLaunchCooperativeKernel", (void *)cuLaunchCooperativeKernel_ptsz},
    {"cuGraphLaunch", (void *)cuGraphLaunch_ptsz},
    {"cuMemAllocAsync", (void *)cuMemAllocAsync_ptsz},
    {"cuMemFreeAsync", (void *)cuMemFreeAsync_ptsz},
    {"cuMemcpyHtoD", (void *)cuMemcpyHtoD_v2_ptds},
    {"cuMemcpyDtoH", (void *)cuMemcpyDtoH_v2_ptds},
};
#define PER_THREAD_DEFAULT_STREAM 2ULL

CUresult cuGetProcAddress(const char *sym, void **pfn, int version, unsigned long long flags);
CUresult cuGetProcAddress_v2(const char *sym, void **pfn, int version, unsigned long long flags, int *status) {
    *pfn = 0;
    if (!strcmp(sym, "cuGetProcAddress")) {
        *pfn = version >= 12000 ? (void *)cuGetProcAddress_v2 : (void *)cuGetProcAddress;
    } else {
        for (size_t i = 0; i < sizeof table / sizeof *table; i++)
            if (!strcmp(sym, table[i].name) && version >= table[i].since) { *pfn = table[i].fn; break; }
        if (*pfn && (flags & PER_THREAD_DEFAULT_STREAM))
            for (size_t i = 0; i < sizeof per_thread_table / sizeof *per_thread_table; i++)
                if (!strcmp(sym, per_thread_table[i].name)) { *pfn = per_thread_table[i].fn; break; }
    }
    if (status) *status = *pfn ? 0 : 1;
    return *pfn ? 0 : 500; /* CUDA_ERROR_NOT_FOUND */
}
CUresult cuGetProcAddress(const char *sym, void **pfn, int version, unsigned long long flags) {
    return cuGetProcAddress_v2(sym, pfn, version, flags, 0);
}
