// AES-128 in counter mode (NIST SP 800-38A): work-item i encrypts the
// counter block iv + i and XORs it into bytes 16i..16i+16 of the input.
//
// Byte-oriented so it runs on any OpenCL 1.2 device and matches
// `reference::aes128_ctr` exactly. The host supplies the S-box and the
// expanded key; each work-group first stages them in local memory, where the
// data-dependent S-box lookups are cheapest on GPUs. Items past the end still
// take part in staging (they must reach the barrier) and only then return.

#define XTIME(x) ((uchar)(((x) << 1) ^ ((((x) >> 7) & 1) * 0x1b)))

__kernel void aes128_ctr(__global const uchar *input,
                         __global uchar *output,
                         ulong len,
                         ulong iv_hi,
                         ulong iv_lo,
                         __constant uchar *sbox_in,
                         __constant uchar *round_keys_in)
{
    __local uchar sbox[256];
    __local uchar rk[176];
    for (uint i = get_local_id(0); i < 256; i += get_local_size(0)) {
        sbox[i] = sbox_in[i];
        if (i < 176) {
            rk[i] = round_keys_in[i];
        }
    }
    barrier(CLK_LOCAL_MEM_FENCE);

    const ulong block = get_global_id(0);
    const ulong offset = block * 16;
    if (offset >= len) {
        return;
    }

    // The IV is one big-endian 128-bit counter, split in two halves; the low
    // half's overflow carries into the high half and the whole wraps.
    const ulong lo = iv_lo + block;
    const ulong hi = iv_hi + (lo < iv_lo ? 1 : 0);
    uchar s[16];
    for (int i = 0; i < 8; i++) {
        s[i] = (uchar)(hi >> (56 - 8 * i));
        s[8 + i] = (uchar)(lo >> (56 - 8 * i));
    }

    for (int i = 0; i < 16; i++) {
        s[i] ^= rk[i];
    }
    for (int round = 1; round <= 10; round++) {
        // SubBytes and ShiftRows at once: row r of column c comes from
        // column c + r (state is column-major, byte r + 4c).
        uchar t[16];
        for (int c = 0; c < 4; c++) {
            for (int r = 0; r < 4; r++) {
                t[4 * c + r] = sbox[s[4 * ((c + r) & 3) + r]];
            }
        }
        if (round < 10) {
            // MixColumns as a ^ (sum of the column) ^ 2(a ^ next), which is
            // the matrix product with {2,3,1,1} written with one XTIME per byte.
            for (int c = 0; c < 4; c++) {
                const uchar a0 = t[4 * c], a1 = t[4 * c + 1];
                const uchar a2 = t[4 * c + 2], a3 = t[4 * c + 3];
                const uchar sum = a0 ^ a1 ^ a2 ^ a3;
                s[4 * c] = a0 ^ sum ^ XTIME(a0 ^ a1);
                s[4 * c + 1] = a1 ^ sum ^ XTIME(a1 ^ a2);
                s[4 * c + 2] = a2 ^ sum ^ XTIME(a2 ^ a3);
                s[4 * c + 3] = a3 ^ sum ^ XTIME(a3 ^ a0);
            }
        } else {
            for (int i = 0; i < 16; i++) {
                s[i] = t[i];
            }
        }
        for (int i = 0; i < 16; i++) {
            s[i] ^= rk[16 * round + i];
        }
    }

    const ulong n = min(len - offset, (ulong)16);
    for (ulong i = 0; i < n; i++) {
        output[offset + i] = input[offset + i] ^ s[i];
    }
}
