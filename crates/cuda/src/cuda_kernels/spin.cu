// Every thread runs `iterations` rounds of an integer mix from a seed and
// its index; the length of a call is set by `iterations`. The host checks
// the result against the same rounds (hetsched_cuda::reference::spin).
extern "C" __global__ void spin(unsigned int *out, unsigned int n, unsigned int iterations,
                                unsigned int seed) {
    unsigned int id = blockIdx.x * blockDim.x + threadIdx.x;
    if (id >= n) {
        return;
    }
    unsigned int x = seed ^ (id * 2654435761u);
    for (unsigned int i = 0; i < iterations; i++) {
        x = x * 1664525u + 1013904223u;
        x ^= x >> 13;
    }
    out[id] = x;
}
