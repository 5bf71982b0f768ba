/* A CUDA driver-API program for the interposer's tests. It finds the
 * driver's functions one of five ways (argv[1]):
 *   linked    - calls them by name (built with -DLINKED -lcuda);
 *   dlopen    - dlopen("libcuda.so.1") and dlsym on that handle;
 *   procaddr  - cuGetProcAddress_v2 (itself from dlsym on the handle),
 *               base names, cudaVersion 12000, as the CUDA runtime does;
 *   procaddr1 - the linked cuGetProcAddress (v1), cudaVersion 11080;
 *   procaddr-pt - as procaddr, asking for the per-thread default stream
 *               (CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM), as a
 *               program built with --default-stream per-thread does.
 * then runs the operations in argv[2..] and prints one line for each:
 *   D<dev>  make a context on device <dev> current
 *   L<n>x<us> n kernels of <us> microseconds    E<us> K<us> G  other launches
 *   A<bytes> M<bytes> S<bytes>  cuMemAlloc, ...Managed, ...Async
 *   P<w>x<h> cuMemAllocPitch    F<i>  free the i-th allocation
 *   C  copy to allocation 0 and back      Y  cuCtxSynchronize
 *   N  0 if dlsym(RTLD_NEXT, "cuLaunchKernel") is what a global lookup finds
 *   H<ms>  print "holding" and sleep    W  print "waiting", read a line */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef int CUresult;
typedef unsigned long long CUdeviceptr;
typedef struct { unsigned gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, sharedMemBytes; void *s; void *a; unsigned n; } CUlaunchConfig;

static struct {
    CUresult (*init)(unsigned);
    CUresult (*deviceGet)(int *, int);
    CUresult (*ctxCreate)(void **, unsigned, int);
    CUresult (*ctxSync)(void);
    CUresult (*launch)(void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, void *, void **, void **);
    CUresult (*launchEx)(const CUlaunchConfig *, void *, void **, void **);
    CUresult (*coop)(void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, void *, void **);
    CUresult (*graph)(void *, void *);
    CUresult (*alloc)(CUdeviceptr *, size_t);
    CUresult (*allocManaged)(CUdeviceptr *, size_t, unsigned);
    CUresult (*allocAsync)(CUdeviceptr *, size_t, void *);
    CUresult (*allocPitch)(CUdeviceptr *, size_t *, size_t, size_t, unsigned);
    CUresult (*free)(CUdeviceptr);
    CUresult (*htod)(CUdeviceptr, const void *, size_t);
    CUresult (*dtoh)(void *, CUdeviceptr, size_t);
} cu;

typedef CUresult (*gpa2_t)(const char *, void **, int, unsigned long long, int *);
typedef CUresult (*gpa1_t)(const char *, void **, int, unsigned long long);

#define EXPORTS(X) X(init, "cuInit") X(deviceGet, "cuDeviceGet") X(ctxCreate, "cuCtxCreate_v2") \
    X(ctxSync, "cuCtxSynchronize") X(launch, "cuLaunchKernel") X(launchEx, "cuLaunchKernelEx") \
    X(coop, "cuLaunchCooperativeKernel") X(graph, "cuGraphLaunch") X(alloc, "cuMemAlloc_v2") \
    X(allocManaged, "cuMemAllocManaged") X(allocAsync, "cuMemAllocAsync") \
    X(allocPitch, "cuMemAllocPitch_v2") X(free, "cuMemFree_v2") X(htod, "cuMemcpyHtoD_v2") \
    X(dtoh, "cuMemcpyDtoH_v2")
/* The base names the runtime asks cuGetProcAddress for. */
#define BASES(X) X(init, "cuInit") X(deviceGet, "cuDeviceGet") X(ctxCreate, "cuCtxCreate") \
    X(ctxSync, "cuCtxSynchronize") X(launch, "cuLaunchKernel") X(launchEx, "cuLaunchKernelEx") \
    X(coop, "cuLaunchCooperativeKernel") X(graph, "cuGraphLaunch") X(alloc, "cuMemAlloc") \
    X(allocManaged, "cuMemAllocManaged") X(allocAsync, "cuMemAllocAsync") \
    X(allocPitch, "cuMemAllocPitch") X(free, "cuMemFree") X(htod, "cuMemcpyHtoD") \
    X(dtoh, "cuMemcpyDtoH")

#ifdef LINKED
CUresult cuGetProcAddress(const char *, void **, int, unsigned long long);
/* Each export under a C name of its own, bound to the driver's symbol. */
#define DECL(f, n) extern void linked_##f(void) __asm__(n);
EXPORTS(DECL)
#endif

static void *must(void *p, const char *what) {
    if (!p) { printf("missing %s\n", what); exit(3); }
    return p;
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "dlopen";
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) { printf("no driver: %s\n", dlerror()); return 2; }
    if (!strcmp(mode, "dlopen")) {
#define SYM(f, n) *(void **)&cu.f = must(dlsym(h, n), n);
        EXPORTS(SYM)
    } else if (!strcmp(mode, "procaddr")) {
        gpa2_t gpa = (gpa2_t)must(dlsym(h, "cuGetProcAddress_v2"), "cuGetProcAddress_v2");
        int st;
#define GPA2(f, n) if (gpa(n, (void **)&cu.f, 12000, 0, &st)) must(0, n);
        BASES(GPA2)
    } else if (!strcmp(mode, "procaddr-pt")) {
        gpa2_t gpa = (gpa2_t)must(dlsym(h, "cuGetProcAddress_v2"), "cuGetProcAddress_v2");
        int st;
#define GPA2PT(f, n) if (gpa(n, (void **)&cu.f, 12000, 2, &st)) must(0, n);
        BASES(GPA2PT)
#ifdef LINKED
    } else if (!strcmp(mode, "procaddr1")) {
#define GPA1(f, n) if (cuGetProcAddress(n, (void **)&cu.f, 11080, 0)) must(0, n);
        BASES(GPA1)
    } else if (!strcmp(mode, "linked")) {
#define LNK(f, n) *(void **)&cu.f = (void *)linked_##f;
        EXPORTS(LNK)
#endif
    } else {
        printf("unknown mode %s\n", mode);
        return 2;
    }
    CUdeviceptr ptrs[64] = {0};
    int nptr = 0;
    void *ctx;
    int dev;
    if (cu.init(0) || cu.deviceGet(&dev, 0) || cu.ctxCreate(&ctx, 0, dev)) { printf("no context\n"); return 2; }
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i];
        long x = atol(a + 1), y = strchr(a, 'x') ? atol(strchr(a, 'x') + 1) : 0;
        CUresult r = 0;
        switch (a[0]) {
        case 'D': r = cu.deviceGet(&dev, (int)x) || cu.ctxCreate(&ctx, 0, dev); break;
        case 'L': for (long k = 0; k < x && !r; k++) r = cu.launch(0, (unsigned)y, 1, 1, 1, 1, 1, 0, 0, 0, 0); break;
        case 'E': { CUlaunchConfig c = {(unsigned)x, 1, 1, 1, 1, 1, 0, 0, 0, 0}; r = cu.launchEx(&c, 0, 0, 0); } break;
        case 'K': r = cu.coop(0, (unsigned)x, 1, 1, 1, 1, 1, 0, 0, 0); break;
        case 'G': r = cu.graph(0, 0); break;
        case 'A': r = cu.alloc(&ptrs[nptr++], (size_t)x); break;
        case 'M': r = cu.allocManaged(&ptrs[nptr++], (size_t)x, 1); break;
        case 'S': r = cu.allocAsync(&ptrs[nptr++], (size_t)x, 0); break;
        case 'P': { size_t pitch; r = cu.allocPitch(&ptrs[nptr++], &pitch, (size_t)x, (size_t)y, 4); } break;
        case 'F': r = cu.free(ptrs[x]); break;
        case 'C': {
            char out[16] = "hetsched-cuda-1", back[16] = {0};
            r = cu.htod(ptrs[0], out, 16) || cu.dtoh(back, ptrs[0], 16) || memcmp(out, back, 16) != 0;
        } break;
        case 'Y': r = cu.ctxSync(); break;
        case 'N': /* dlsym(RTLD_NEXT) must search after this program, not after a wrapper */
            r = dlsym(RTLD_NEXT, "cuLaunchKernel") != dlsym(RTLD_DEFAULT, "cuLaunchKernel");
            break;
        case 'H': {
            printf("holding\n");
            fflush(stdout);
            struct timespec t = {x / 1000, (x % 1000) * 1000000L};
            nanosleep(&t, 0);
        } break;
        case 'W': {
            char line[8];
            printf("waiting\n");
            fflush(stdout);
            if (!fgets(line, sizeof line, stdin)) r = -1;
        } break;
        default: printf("unknown op %s\n", a); return 2;
        }
        printf("%s=%d\n", a, r);
    }
    long (*launches)(int) = (long (*)(int))must(dlsym(h, "standin_launches"), "standin_launches");
    long (*in_use)(void) = (long (*)(void))must(dlsym(h, "standin_bytes_in_use"), "standin_bytes_in_use");
    long (*pt)(void) = (long (*)(void))must(dlsym(h, "standin_per_thread_calls"), "standin_per_thread_calls");
    printf("launches0=%ld launches1=%ld in_use=%ld per_thread=%ld\n", launches(0), launches(1), in_use(), pt());
    return 0;
}
