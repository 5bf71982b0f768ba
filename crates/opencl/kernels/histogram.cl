// 256-bin byte histogram.
//
// Each work-group counts into its own bins in local memory, where atomics are
// cheap and contention stays inside the group, then adds its non-zero bins to
// the global counts once. Work-items walk the input with a stride of the
// whole grid, so neighbouring items read neighbouring bytes (coalesced on
// GPUs) and any grid size covers any input length, including 0.
//
// `counts` must hold 256 zeroed uints before the launch.

__kernel void histogram256(__global const uchar *data,
                           ulong len,
                           __global uint *counts)
{
    __local uint bins[256];
    const uint lid = get_local_id(0);
    const uint lsize = get_local_size(0);

    for (uint b = lid; b < 256; b += lsize) {
        bins[b] = 0;
    }
    barrier(CLK_LOCAL_MEM_FENCE);

    const ulong stride = get_global_size(0);
    for (ulong i = get_global_id(0); i < len; i += stride) {
        atomic_inc(&bins[data[i]]);
    }
    barrier(CLK_LOCAL_MEM_FENCE);

    for (uint b = lid; b < 256; b += lsize) {
        const uint n = bins[b];
        if (n != 0) {
            atomic_add(&counts[b], n);
        }
    }
}
