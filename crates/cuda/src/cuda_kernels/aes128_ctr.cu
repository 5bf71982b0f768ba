// AES-128 in counter mode (NIST SP 800-38A), one 16-byte block per thread.
//
// Every block derives the S-box (FIPS-197 5.1.1: the GF(2^8) inverse and the
// affine map) and expands the key into shared memory before counting. That
// costs a few hundred operations per block once and spares the host from
// shipping tables, so the kernel's only inputs are the key, the IV and the
// data. The CPU reference is an independent implementation (the `aes`
// crate), so the two check each other.

__device__ __forceinline__ unsigned char xtime(unsigned char a) {
    return (unsigned char)((a << 1) ^ ((a & 0x80) ? 0x1b : 0));
}

__device__ unsigned char gf_mul(unsigned char a, unsigned char b) {
    unsigned char p = 0;
    while (b) {
        if (b & 1) p ^= a;
        a = xtime(a);
        b >>= 1;
    }
    return p;
}

__device__ __forceinline__ unsigned char rotl8(unsigned char b, int n) {
    return (unsigned char)((b << n) | (b >> (8 - n)));
}

extern "C" __global__ void aes128_ctr(
    const unsigned char* __restrict__ input,
    unsigned char* __restrict__ output,
    unsigned long long len,
    unsigned long long key_hi, unsigned long long key_lo,
    unsigned long long iv_hi, unsigned long long iv_lo)
{
    __shared__ unsigned char sbox[256];
    __shared__ unsigned char rk[176];

    // S-box: entry i is the affine map of i^254 (= i^-1, and 0 for 0).
    for (int i = threadIdx.x; i < 256; i += blockDim.x) {
        unsigned char base = (unsigned char)i, inv = 1;
        int e = 254;
        while (e) {
            if (e & 1) inv = gf_mul(inv, base);
            base = gf_mul(base, base);
            e >>= 1;
        }
        sbox[i] = inv ^ rotl8(inv, 1) ^ rotl8(inv, 2) ^ rotl8(inv, 3) ^ rotl8(inv, 4) ^ 0x63;
    }
    __syncthreads();

    // Key schedule (FIPS-197 5.2), by one thread: 40 words.
    if (threadIdx.x == 0) {
        for (int j = 0; j < 8; ++j) {
            rk[j] = (unsigned char)(key_hi >> (56 - 8 * j));
            rk[8 + j] = (unsigned char)(key_lo >> (56 - 8 * j));
        }
        unsigned char rcon = 1;
        for (int w = 4; w < 44; ++w) {
            unsigned char t0 = rk[4 * w - 4], t1 = rk[4 * w - 3], t2 = rk[4 * w - 2], t3 = rk[4 * w - 1];
            if (w % 4 == 0) {
                unsigned char r0 = sbox[t1] ^ rcon, r1 = sbox[t2], r2 = sbox[t3], r3 = sbox[t0];
                t0 = r0; t1 = r1; t2 = r2; t3 = r3;
                rcon = xtime(rcon);
            }
            rk[4 * w + 0] = rk[4 * w - 16] ^ t0;
            rk[4 * w + 1] = rk[4 * w - 15] ^ t1;
            rk[4 * w + 2] = rk[4 * w - 14] ^ t2;
            rk[4 * w + 3] = rk[4 * w - 13] ^ t3;
        }
    }
    __syncthreads();

    unsigned long long blocks = (len + 15) / 16;
    for (unsigned long long blk = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
         blk < blocks;
         blk += (unsigned long long)gridDim.x * blockDim.x) {
        // Counter = IV + blk as one big-endian 128-bit number (wrapping).
        unsigned long long lo = iv_lo + blk;
        unsigned long long hi = iv_hi + (lo < iv_lo ? 1ULL : 0ULL);
        unsigned char s[16];
        for (int j = 0; j < 8; ++j) {
            s[j] = (unsigned char)(hi >> (56 - 8 * j));
            s[8 + j] = (unsigned char)(lo >> (56 - 8 * j));
        }
        for (int j = 0; j < 16; ++j) s[j] ^= rk[j];
        for (int round = 1; round <= 10; ++round) {
            unsigned char t[16];
            // SubBytes and ShiftRows together: byte (row r, column c) of the
            // state is s[r + 4c]; row r moves left by r columns.
            for (int c = 0; c < 4; ++c)
                for (int r = 0; r < 4; ++r)
                    t[r + 4 * c] = sbox[s[r + 4 * ((c + r) & 3)]];
            if (round != 10) {
                for (int c = 0; c < 4; ++c) {
                    unsigned char a0 = t[4 * c], a1 = t[4 * c + 1], a2 = t[4 * c + 2], a3 = t[4 * c + 3];
                    unsigned char all = a0 ^ a1 ^ a2 ^ a3;
                    // 2a_r ^ 3a_{r+1} ^ a_{r+2} ^ a_{r+3} = a_r ^ all ^ 2(a_r ^ a_{r+1}).
                    t[4 * c]     = a0 ^ all ^ xtime(a0 ^ a1);
                    t[4 * c + 1] = a1 ^ all ^ xtime(a1 ^ a2);
                    t[4 * c + 2] = a2 ^ all ^ xtime(a2 ^ a3);
                    t[4 * c + 3] = a3 ^ all ^ xtime(a3 ^ a0);
                }
            }
            for (int j = 0; j < 16; ++j) s[j] = t[j] ^ rk[16 * round + j];
        }
        unsigned long long base = blk * 16;
        for (int j = 0; j < 16 && base + j < len; ++j)
            output[base + j] = input[base + j] ^ s[j];
    }
}
