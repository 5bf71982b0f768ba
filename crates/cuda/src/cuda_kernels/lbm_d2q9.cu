// One step of a D2Q9 lattice-Boltzmann fluid (BGK collision, periodic
// boundaries), one thread per cell, pull scheme: each cell gathers the
// populations streaming into it, then relaxes them toward equilibrium.
//
// The arithmetic is written in the same order as the CPU reference
// (`reference::lbm_step`) and the program is built with --fmad=false, so no
// multiply-add is fused: every float operation rounds as on the CPU and the
// two agree bit for bit.
//
// Layout: structure of arrays, population q of cell (x, y) at
// f[q * nx * ny + y * nx + x].

__constant__ int EX[9] = {0, 1, 0, -1, 0, 1, -1, -1, 1};
__constant__ int EY[9] = {0, 0, 1, 0, -1, 1, 1, -1, -1};
__constant__ float W[9] = {4.0f / 9.0f, 1.0f / 9.0f, 1.0f / 9.0f, 1.0f / 9.0f, 1.0f / 9.0f,
                           1.0f / 36.0f, 1.0f / 36.0f, 1.0f / 36.0f, 1.0f / 36.0f};

extern "C" __global__ void lbm_d2q9_step(
    const float* __restrict__ src,
    float* __restrict__ dst,
    int nx, int ny, float omega)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= nx || y >= ny) return;
    long long cells = (long long)nx * ny;

    float f[9];
    for (int q = 0; q < 9; ++q) {
        int sx = x - EX[q];
        int sy = y - EY[q];
        sx = sx < 0 ? sx + nx : (sx >= nx ? sx - nx : sx);
        sy = sy < 0 ? sy + ny : (sy >= ny ? sy - ny : sy);
        f[q] = src[q * cells + (long long)sy * nx + sx];
    }

    float rho = 0.0f;
    float mx = 0.0f;
    float my = 0.0f;
    for (int q = 0; q < 9; ++q) {
        rho = rho + f[q];
        mx = mx + (float)EX[q] * f[q];
        my = my + (float)EY[q] * f[q];
    }
    float ux = mx / rho;
    float uy = my / rho;
    float usq = ux * ux + uy * uy;
    for (int q = 0; q < 9; ++q) {
        float cu = (float)EX[q] * ux + (float)EY[q] * uy;
        float feq = W[q] * rho * (1.0f + 3.0f * cu + 4.5f * cu * cu - 1.5f * usq);
        dst[q * cells + (long long)y * nx + x] = f[q] + omega * (feq - f[q]);
    }
}
