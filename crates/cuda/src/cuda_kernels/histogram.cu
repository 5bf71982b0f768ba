// 256-bin byte histogram. Each block counts into shared memory (cheap
// shared atomics) and adds its 256 totals to the global counts once, so
// global atomic traffic is 256 per block instead of one per byte. Counts
// are 32-bit and wrap like the CPU reference's `wrapping_add`.

extern "C" __global__ void histogram256(
    const unsigned char* __restrict__ data,
    unsigned long long len,
    unsigned int* __restrict__ counts)
{
    __shared__ unsigned int local[256];
    for (int i = threadIdx.x; i < 256; i += blockDim.x) local[i] = 0;
    __syncthreads();

    unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
    // Four bytes per load where the data allows: the bulk of the input is
    // read as aligned 32-bit words, the tail byte by byte.
    unsigned long long words = len / 4;
    const unsigned int* w = (const unsigned int*)data;
    for (unsigned long long k = i; k < words; k += stride) {
        unsigned int v = w[k];
        atomicAdd(&local[v & 0xff], 1u);
        atomicAdd(&local[(v >> 8) & 0xff], 1u);
        atomicAdd(&local[(v >> 16) & 0xff], 1u);
        atomicAdd(&local[v >> 24], 1u);
    }
    for (unsigned long long k = words * 4 + i; k < len; k += stride)
        atomicAdd(&local[data[k]], 1u);
    __syncthreads();

    for (int b = threadIdx.x; b < 256; b += blockDim.x)
        if (local[b]) atomicAdd(&counts[b], local[b]);
}
