/// The CUDA C++ of ``CUDABackend``'s own kernels, compiled by NVRTC once per GPU architecture (and kept as a cubin
/// in the user's cache). Compiled with `--fmad=false`: a product and a sum are two roundings, as in the CPU's
/// Swift and C, so that fp32 on the GPU differs from the CPU only by summation order (the GEMMs, cuBLAS's).
///
/// Every kernel strides over its elements (`LK_LOOP`), so any grid covers any size. Maps are channel-major
/// (`channels × height × width`), as ``FeatureMap`` keeps them.
public enum CUDAKernels {
    public static let names = [
        "lk_bias_act", "lk_im2col", "lk_gemm", "lk_depthwise", "lk_transposed2x2", "lk_max_pool", "lk_upsample2",
        "lk_add", "lk_affine", "lk_gather", "lk_weighted_sum", "lk_max_sigmoid", "lk_scale_heads", "lk_head_decode",
        "lk_scale", "lk_softmax_rows", "lk_add_rows", "lk_nms_rank", "lk_nms_arrange", "lk_nms_mask", "lk_nms_keep",
        "lk_layer_norm",
        "lk_sequence_attention", "lk_attention_block", "lk_attention_64", "lk_bias_rows", "lk_bias_rows_4",
        "lk_bias_residual", "lk_bias_residual_4", "lk_sum", "lk_attention_mma_64", "lk_attention_mma_128",
        "lk_bias_rows_16", "lk_bias_residual_norm",
        "lk_add_repeating", "lk_gather_rows", "lk_patches", "lk_patches_8",
        "lk_letterbox",
        "lk_activate", "lk_fill", "lk_to_16", "lk_im2col_16", "lk_gemm_16", "lk_conv_16",
        "lk_conv_16_wide", "lk_split_sum", "lk_restack",
    ]

    public static let source = """
        #define LK_LOOP(i, n) \\
            for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < (long long)(n); \\
                 i += (long long)blockDim.x * gridDim.x)

        #define LK_INFINITY __int_as_float(0x7f800000)

        __device__ __forceinline__ float lk_min(float x, float y) { return y < x ? y : x; }
        __device__ __forceinline__ float lk_max(float x, float y) { return y >= x ? y : x; }
        __device__ __forceinline__ float lk_silu_of(float x) { return x / (1.0f + expf(-x)); }
        __device__ __forceinline__ float lk_sigmoid_of(float x) { return 1.0f / (1.0f + expf(-x)); }
        // A convolution's sum with its bias added, then SiLU where `act`: every convolution kernel's epilogue.
        __device__ __forceinline__ float lk_bias_silu(float sum, float bias, int act) {
            float v = sum + bias;
            return act ? lk_silu_of(v) : v;
        }

        // 16-bit operands (``GPUArithmetic``): type 1 fp16 (IEEE half), 2 bf16; both rounded to nearest, ties to
        // even. Written without cuda_fp16.h (PTX's conversions, bf16 by its bits) so that NVRTC needs no headers.
        __device__ __forceinline__ unsigned short lk_to_16_of(float v, int type) {
            if (type == 2) {
                unsigned int bits = __float_as_uint(v);
                if ((bits & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((bits >> 16) | 0x40u);
                bits += 0x7fffu + ((bits >> 16) & 1u);
                return (unsigned short)(bits >> 16);
            }
            unsigned short h;
            asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(v));
            return h;
        }
        __device__ __forceinline__ float lk_from_16(unsigned short h, int type) {
            if (type == 2) return __uint_as_float(((unsigned int)h) << 16);
            float f;
            asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
            return f;
        }

        // Rows of a map (channels on the grid's y, the plane's pixels on its x): 32-bit indices, no division by a
        // 64-bit size per value.
        #define LK_ROWS(row, rows, p, plane) \\
            for (int row = blockIdx.y; row < (rows); row += gridDim.y) \\
                for (int p = blockIdx.x * blockDim.x + threadIdx.x; p < (plane); p += blockDim.x * gridDim.x)

        // A value of an fp32 or 16-bit operand (``GPUArithmetic``'s type), and a value stored as one.
        __device__ __forceinline__ float lk_load(const float *p, long long i, int) { return p[i]; }
        __device__ __forceinline__ float lk_load(const unsigned short *p, long long i, int type) {
            return lk_from_16(p[i], type);
        }
        __device__ __forceinline__ void lk_store(float *p, long long i, float v, int) { p[i] = v; }
        __device__ __forceinline__ void lk_store(unsigned short *p, long long i, float v, int type) {
            p[i] = lk_to_16_of(v, type);
        }

        // Four values stored at p[i..i+3]: one 16- or 8-byte store where `aligned` (i a multiple of 4, the
        // buffer's rows too), else one by one.
        __device__ __forceinline__ void lk_store4(float *p, long long i, const float *v, int, bool aligned) {
            if (aligned) *(float4 *)(p + i) = make_float4(v[0], v[1], v[2], v[3]);
            else for (int j = 0; j < 4; j++) p[i + j] = v[j];
        }
        __device__ __forceinline__ void lk_store4(unsigned short *p, long long i, const float *v, int type,
                                                  bool aligned) {
            unsigned short h[4];
            for (int j = 0; j < 4; j++) h[j] = lk_to_16_of(v[j], type);
            if (aligned) *(uint2 *)(p + i) = make_uint2(h[0] | ((unsigned)h[1] << 16), h[2] | ((unsigned)h[3] << 16));
            else for (int j = 0; j < 4; j++) p[i + j] = h[j];
        }

        // The convolution's lowered input: row (c·k + ky)·k + kx, column oy·OW + ox; zero outside the map. Of N
        // images stacked as one tall map (each channel the images' H×W planes in turn), each image's own
        // neighbourhoods: column p is output pixel p mod OH·OW of image p / (OH·OW). Each thread writes four
        // columns (their position divided out once, then stepped), in one store where the rows allow. Grid
        // (column quads, rows).
        template <typename T>
        __device__ void lk_lower(const float *x, T *col, int C, int H, int W, int k, int s, int OH, int OW, int N,
                                 int type) {
            int P = OH * OW, half = k / 2;
            long long NP = (long long)N * P;
            long long quads = (NP + 3) / 4;
            bool rowsAligned = NP % 4 == 0;
            for (int row = blockIdx.y; row < C * k * k; row += gridDim.y) {
                int kx = row % k, ky = (row / k) % k, c = row / (k * k);
                const float *channel = x + (long long)c * N * H * W;
                for (long long g = (long long)blockIdx.x * blockDim.x + threadIdx.x; g < quads;
                     g += (long long)blockDim.x * gridDim.x) {
                    long long p = 4 * g;
                    int n = (int)(p / P), q = (int)(p - (long long)n * P);
                    int oy = q / OW, ox = q - oy * OW;
                    float v[4];
                    for (int j = 0; j < 4; j++) {
                        int iy = oy * s + ky - half, ix = ox * s + kx - half;
                        v[j] = (p + j < NP && iy >= 0 && iy < H && ix >= 0 && ix < W)
                                   ? channel[((long long)n * H + iy) * W + ix] : 0.0f;
                        if (++ox == OW) {
                            ox = 0;
                            if (++oy == OH) {
                                oy = 0;
                                n++;
                            }
                        }
                    }
                    long long at = (long long)row * NP + p;
                    if (p + 4 <= NP) {
                        lk_store4(col, at, v, type, rowsAligned);
                    } else {
                        for (int j = 0; p + j < NP; j++) lk_store(col, at + j, v[j], type);
                    }
                }
            }
        }

        // C[i, j] = Σ_k A(i, k)·B(k, j) (+ beta·C) in fp32 over 16×16 tiles through shared memory.
        template <typename T>
        __device__ void lk_gemm_tiles(int M, int N, int K, const T *a, long long sam, long long sak, const T *b,
                                      long long sbk, long long sbn, float *c, long long ldc, float beta, int type) {
            __shared__ float As[16][17];
            __shared__ float Bs[16][17];
            int tx = threadIdx.x, ty = threadIdx.y;
            int row = blockIdx.y * 16 + ty, column = blockIdx.x * 16 + tx;
            float sum = 0.0f;
            for (int k0 = 0; k0 < K; k0 += 16) {
                As[ty][tx] = (row < M && k0 + tx < K) ? lk_load(a, row * sam + (k0 + tx) * sak, type) : 0.0f;
                Bs[ty][tx] = (k0 + ty < K && column < N) ? lk_load(b, (k0 + ty) * sbk + column * sbn, type) : 0.0f;
                __syncthreads();
                for (int kk = 0; kk < 16; kk++) sum += As[ty][kk] * Bs[kk][tx];
                __syncthreads();
            }
            if (row < M && column < N) {
                float *target = c + row * ldc + column;
                *target = beta == 0.0f ? sum : sum + beta * *target;
            }
        }

        // One m16n8k16 product on the tensor cores, fp32 sums: d += a·b, a 16×16 (row-major) and b 16×8 (by
        // columns) of fp16 (TYPE 1) or bf16 (TYPE 2) in PTX's fragment layout. Ampere (8.0) and later.
        template <int TYPE>
        __device__ __forceinline__ void lk_mma_16(float *d, const unsigned int *a, const unsigned int *b) {
        #if __CUDA_ARCH__ >= 800
            if (TYPE == 2)
                asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
                             "{%8,%9}, {%0,%1,%2,%3};"
                             : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                             : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
            else
                asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
                             "{%8,%9}, {%0,%1,%2,%3};"
                             : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                             : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
        #endif
        }

        // A convolution in 16-bit products without its lowered input in memory: out[o, p] = act(bias[o] +
        // Σ_r w[o, r]·lowered(r, p)), lowered(r, p) read from the map as lk_lower reads it (row r = (c·k + ky)·k +
        // kx, zero outside) and rounded to 16 bits as it is loaded; the weights already 16-bit (outputs × depth).
        // The map's channels may lie in up to four buffers (stacked parts): channel c is in x3 from s3 on, x2 from
        // s2, x1 from s1, else x0, each pointing at its first channel. Tiles of 64 outputs × 64 pixels × 32 rows
        // in shared memory, four warps of 32 × 32 on the tensor cores, the next tile's values fetched into
        // registers while this one is multiplied. KS: the kernel size when 1 or 3 (divisions by constants), 0 any.
        template <int TYPE, int KS, int BM>
        __device__ __forceinline__ void lk_conv_tiles(
            unsigned short (*As)[40], unsigned short (*Bs)[40], const unsigned short *w, int M, int K,
            const float *x0, const float *x1, const float *x2, const float *x3, int s1, int s2, int s3, int H, int W,
            int kernel, int stride, int OH, int OW, const float *bias, int act, float *out, int tilesPerSplit,
            float *partial) {
            const int k = KS > 0 ? KS : kernel;
            int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, t = lane & 3;
            int P = OH * OW, half = k / 2, kk = k * k;
            long long HW = (long long)H * W;
            int m0 = blockIdx.y * BM, n0 = blockIdx.x * 64;
            // The pixel (column) whose rows this thread fetches, and the weights' row and half-tile it fetches.
            int nl = tid & 63, kb = tid >> 6, p = n0 + nl;
            bool pixel = p < P;
            int oy = pixel ? p / OW : 0, ox = pixel ? p - oy * OW : 0;
            int iy0 = oy * stride - half, ix0 = ox * stride - half;
            int arow = tid >> 1, aseg = (tid & 1) * 16;
            bool rowIn = m0 + arow < M;
            const unsigned short *wrow = w + (long long)(rowIn ? m0 + arow : 0) * K;
            // Each thread fetches 16 weights and 1024 / BM lowered values a tile (every BM / 32-th row of its pixel).
            const int NB = 1024 / BM, RS = BM / 32;
            unsigned short an[16], bn[NB];
            float acc[2][4][4];
            #pragma unroll
            for (int i = 0; i < 2; i++)
                #pragma unroll
                for (int j = 0; j < 4; j++)
                    #pragma unroll
                    for (int r = 0; r < 4; r++) acc[i][j][r] = 0.0f;
            int wm = (warp >> 1) * 32, wn = (warp & 1) * 32;
            // The 32 rows from k0 on of this thread's weights row and pixel, into registers.
            auto fetch = [&](int k0) {
                #pragma unroll
                for (int j = 0; j < 16; j++) {
                    int r = k0 + aseg + j;
                    an[j] = (rowIn && r < K) ? wrow[r] : (unsigned short)0;
                }
                #pragma unroll
                for (int j = 0; j < NB; j++) {
                    int r = k0 + kb + RS * j;
                    float v = 0.0f;
                    if (pixel && r < K) {
                        int c = r, ky = 0, kx = 0;
                        if (KS != 1) {
                            c = r / kk;
                            int rest = r - c * kk;
                            ky = rest / k;
                            kx = rest - ky * k;
                        }
                        int iy = iy0 + ky, ix = ix0 + kx;
                        if (iy >= 0 && iy < H && ix >= 0 && ix < W) {
                            const float *plane = c < s1   ? x0 + c * HW
                                                 : c < s2 ? x1 + (c - s1) * HW
                                                 : c < s3 ? x2 + (c - s2) * HW
                                                          : x3 + (c - s3) * HW;
                            v = plane[iy * W + ix];
                        }
                    }
                    bn[j] = lk_to_16_of(v, TYPE);
                }
            };
            auto store = [&]() {
                #pragma unroll
                for (int j = 0; j < 16; j++) As[arow][aseg + j] = an[j];
                #pragma unroll
                for (int j = 0; j < NB; j++) Bs[nl][kb + RS * j] = bn[j];
            };
            // This block's share of the rows (split K: blockIdx.z's tiles), its sums to `partial` when split.
            int first = blockIdx.z * tilesPerSplit, tiles = min((K + 31) / 32, first + tilesPerSplit);
            fetch(first * 32);
            store();
            __syncthreads();
            for (int tile = first; tile < tiles; tile++) {
                if (tile + 1 < tiles) fetch((tile + 1) * 32);
                // The tile in shared memory, in two steps of 16 rows.
                #pragma unroll
                for (int ks = 0; ks < 32; ks += 16) {
                    unsigned int a[2][4], b[4][2];
                    #pragma unroll
                    for (int mi = 0; mi < 2; mi++) {
                        int r0 = wm + mi * 16 + g;
                        a[mi][0] = *(const unsigned int *)&As[r0][ks + 2 * t];
                        a[mi][1] = *(const unsigned int *)&As[r0 + 8][ks + 2 * t];
                        a[mi][2] = *(const unsigned int *)&As[r0][ks + 2 * t + 8];
                        a[mi][3] = *(const unsigned int *)&As[r0 + 8][ks + 2 * t + 8];
                    }
                    #pragma unroll
                    for (int ni = 0; ni < 4; ni++) {
                        int c0 = wn + ni * 8 + g;
                        b[ni][0] = *(const unsigned int *)&Bs[c0][ks + 2 * t];
                        b[ni][1] = *(const unsigned int *)&Bs[c0][ks + 2 * t + 8];
                    }
                    #pragma unroll
                    for (int mi = 0; mi < 2; mi++)
                        #pragma unroll
                        for (int ni = 0; ni < 4; ni++) lk_mma_16<TYPE>(acc[mi][ni], a[mi], b[ni]);
                }
                __syncthreads();
                if (tile + 1 < tiles) {
                    store();
                    __syncthreads();
                }
            }
            // Bias and SiLU as every convolution adds and applies them.
            #pragma unroll
            for (int mi = 0; mi < 2; mi++)
                #pragma unroll
                for (int ni = 0; ni < 4; ni++)
                    #pragma unroll
                    for (int r = 0; r < 4; r++) {
                        int m = m0 + wm + mi * 16 + g + (r >= 2 ? 8 : 0);
                        int n = n0 + wn + ni * 8 + 2 * t + (r & 1);
                        if (m < M && n < P) {
                            if (partial) {
                                partial[((long long)blockIdx.z * M + m) * P + n] = acc[mi][ni][r];
                                continue;
                            }
                            out[(long long)m * P + n] = lk_bias_silu(acc[mi][ni][r], bias[m], act);
                        }
                    }
        }

        // lk_conv_tiles for the kernel size and 16-bit type given, tiles of BM outputs.
        template <int BM>
        __device__ __forceinline__ void lk_conv_any(
            unsigned short (*As)[40], unsigned short (*Bs)[40], const unsigned short *w, int M, int K,
            const float *x0, const float *x1, const float *x2, const float *x3, int s1, int s2, int s3, int H, int W,
            int kernel, int stride, int OH, int OW, const float *bias, int act, float *out, int type,
            int tilesPerSplit, float *partial) {
        #define LK_CONV(TYPE, KS) \\
            lk_conv_tiles<TYPE, KS, BM>(As, Bs, w, M, K, x0, x1, x2, x3, s1, s2, s3, H, W, kernel, stride, OH, OW, \\
                                        bias, act, out, tilesPerSplit, partial)
            if (type == 2) {
                if (kernel == 1) LK_CONV(2, 1);
                else if (kernel == 3) LK_CONV(2, 3);
                else LK_CONV(2, 0);
            } else {
                if (kernel == 1) LK_CONV(1, 1);
                else if (kernel == 3) LK_CONV(1, 3);
                else LK_CONV(1, 0);
            }
        #undef LK_CONV
        }

        // Two 16-bit values (the lower first) from two floats.
        template <int TYPE>
        __device__ __forceinline__ unsigned int lk_pack_16(float lower, float upper) {
            return (unsigned int)lk_to_16_of(lower, TYPE) | ((unsigned int)lk_to_16_of(upper, TYPE) << 16);
        }

        // Two 16-bit values with their biases b[0], b[1] added (in fp32) and rounded to 16 bits again; as they are
        // where b is null.
        template <int TYPE>
        __device__ __forceinline__ unsigned int lk_pair_plus(unsigned int pair, const float *b) {
            if (!b) return pair;
            return lk_pack_16<TYPE>(lk_from_16((unsigned short)(pair & 0xffffu), TYPE) + b[0],
                                    lk_from_16((unsigned short)(pair >> 16), TYPE) + b[1]);
        }

        // The shared-memory address of a generic pointer into shared memory.
        __device__ __forceinline__ unsigned int lk_shared_address(const void *p) {
            unsigned int address;
            asm("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(address) : "l"(p));
            return address;
        }

        // Four 8×8 matrices of 16-bit values from shared memory, transposed (ldmatrix .trans): lane l gives the
        // address of row l % 8 of matrix l / 8 (16-byte aligned); r[i] gets matrix i's fragment. 7.5 and later.
        __device__ __forceinline__ void lk_load_matrices_transposed(unsigned int *r, unsigned int address) {
        #if __CUDA_ARCH__ >= 750
            asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
                         : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                         : "r"(address));
        #endif
        }

        // Eight 16-bit values (one 16-byte load) with their biases b[0…7] added, as lk_pair_plus.
        template <int TYPE>
        __device__ __forceinline__ uint4 lk_eight_plus(uint4 v, const float *b) {
            if (!b) return v;
            v.x = lk_pair_plus<TYPE>(v.x, b);
            v.y = lk_pair_plus<TYPE>(v.y, b + 2);
            v.z = lk_pair_plus<TYPE>(v.z, b + 4);
            v.w = lk_pair_plus<TYPE>(v.w, b + 6);
            return v;
        }

        // Multi-head attention in heads of 64 on the tensor cores, of a 16-bit qkv matrix (a linear layer's
        // products without their bias: rows × 3·width), the bias (3·width floats, or null) added as the values are
        // read: one block per (sequence, head) of at most KEYS (64 or 128) rows, a warp per 16 query rows. Keys and
        // values in shared memory in rows of 72 (16-byte loads; zero past the sequence); S = Q·Kᵀ in fp32 sums
        // (m16n8k16), scaled and masked, the softmax's maximum and sum across each row's four lanes in fp32, the
        // exponentials rounded to 16 bits as P, O = P·V in fp32 sums (V's fragments by ldmatrix .trans), then
        // O / sum rounded to 16 bits into `out` (rows × width).
        template <int TYPE, int KEYS>
        __device__ __forceinline__ void lk_attention_mma(const unsigned short *qkv, const float *bias,
                                                         const int *starts, const int *lengths, int sequences,
                                                         int width, int heads, int causal, float scale,
                                                         unsigned short *out) {
            extern __shared__ __align__(16) unsigned short lk_attention_shared[];
            const int KP = 72;
            unsigned short *keys = lk_attention_shared;
            unsigned short *values = keys + KEYS * KP;
            int warps = blockDim.x / 32, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
            int g = lane >> 2, q = lane & 3;
            long long stride = 3LL * width;
            for (int item = blockIdx.x; item < sequences * heads; item += gridDim.x) {
                int s = item / heads, h = item % heads;
                int length = lengths[s];
                long long start = starts[s];
                const float *qb = bias ? bias + h * 64 : 0;
                const float *kb = bias ? bias + width + h * 64 : 0;
                const float *vb = bias ? bias + 2 * width + h * 64 : 0;
                __syncthreads();
                for (int i = threadIdx.x; i < KEYS * 8; i += blockDim.x) {
                    int j = i / 8, d = (i % 8) * 8;
                    uint4 k = make_uint4(0u, 0u, 0u, 0u), v = k;
                    if (j < length) {
                        const unsigned short *row = qkv + (start + j) * stride + h * 64 + d;
                        k = lk_eight_plus<TYPE>(*(const uint4 *)(row + width), kb ? kb + d : 0);
                        v = lk_eight_plus<TYPE>(*(const uint4 *)(row + 2 * width), vb ? vb + d : 0);
                    }
                    *(uint4 *)(keys + j * KP + d) = k;
                    *(uint4 *)(values + j * KP + d) = v;
                }
                __syncthreads();
                for (int r0 = warp * 16; r0 < length; r0 += warps * 16) {
                    int row0 = r0 + g, row1 = r0 + g + 8;
                    // The queries' fragments: four steps of 16 dimensions.
                    unsigned int a[4][4];
                    #pragma unroll
                    for (int t = 0; t < 4; t++) {
                        #pragma unroll
                        for (int upper = 0; upper < 2; upper++) {
                            int d = t * 16 + upper * 8 + 2 * q;
                            const float *b = qb ? qb + d : 0;
                            a[t][2 * upper] =
                                row0 < length
                                    ? lk_pair_plus<TYPE>(*(const unsigned int *)(qkv + (start + row0) * stride + h * 64 + d), b)
                                    : 0u;
                            a[t][2 * upper + 1] =
                                row1 < length
                                    ? lk_pair_plus<TYPE>(*(const unsigned int *)(qkv + (start + row1) * stride + h * 64 + d), b)
                                    : 0u;
                        }
                    }
                    float S[KEYS / 8][4];
                    #pragma unroll
                    for (int n = 0; n < KEYS / 8; n++) {
                        S[n][0] = S[n][1] = S[n][2] = S[n][3] = 0.0f;
                        #pragma unroll
                        for (int t = 0; t < 4; t++) {
                            const unsigned short *k = keys + (n * 8 + g) * KP + t * 16 + 2 * q;
                            unsigned int b[2] = {*(const unsigned int *)k, *(const unsigned int *)(k + 8)};
                            lk_mma_16<TYPE>(S[n], a[t], b);
                        }
                    }
                    int last0 = causal ? row0 : length - 1, last1 = causal ? row1 : length - 1;
                    float m0 = -LK_INFINITY, m1 = -LK_INFINITY;
                    #pragma unroll
                    for (int n = 0; n < KEYS / 8; n++) {
                        #pragma unroll
                        for (int e = 0; e < 2; e++) {
                            int j = n * 8 + 2 * q + e;
                            S[n][e] = j <= last0 ? S[n][e] * scale : -LK_INFINITY;
                            S[n][2 + e] = j <= last1 ? S[n][2 + e] * scale : -LK_INFINITY;
                            m0 = fmaxf(m0, S[n][e]);
                            m1 = fmaxf(m1, S[n][2 + e]);
                        }
                    }
                    for (int o = 1; o < 4; o <<= 1) {
                        m0 = fmaxf(m0, __shfl_xor_sync(0xffffffffu, m0, o));
                        m1 = fmaxf(m1, __shfl_xor_sync(0xffffffffu, m1, o));
                    }
                    if (m0 == -LK_INFINITY) m0 = 0.0f;
                    if (m1 == -LK_INFINITY) m1 = 0.0f;
                    float l0 = 0.0f, l1 = 0.0f;
                    #pragma unroll
                    for (int n = 0; n < KEYS / 8; n++) {
                        #pragma unroll
                        for (int e = 0; e < 2; e++) {
                            S[n][e] = expf(S[n][e] - m0);
                            S[n][2 + e] = expf(S[n][2 + e] - m1);
                            l0 += S[n][e];
                            l1 += S[n][2 + e];
                        }
                    }
                    for (int o = 1; o < 4; o <<= 1) {
                        l0 += __shfl_xor_sync(0xffffffffu, l0, o);
                        l1 += __shfl_xor_sync(0xffffffffu, l1, o);
                    }
                    float O[8][4];
                    #pragma unroll
                    for (int n = 0; n < 8; n++) O[n][0] = O[n][1] = O[n][2] = O[n][3] = 0.0f;
                    #pragma unroll
                    for (int t = 0; t < KEYS / 16; t++) {
                        // S's accumulators for keys 16t…16t + 15 are P's fragment for that step.
                        unsigned int p[4] = {lk_pack_16<TYPE>(S[2 * t][0], S[2 * t][1]),
                                             lk_pack_16<TYPE>(S[2 * t][2], S[2 * t][3]),
                                             lk_pack_16<TYPE>(S[2 * t + 1][0], S[2 * t + 1][1]),
                                             lk_pack_16<TYPE>(S[2 * t + 1][2], S[2 * t + 1][3])};
                        // Matrices: keys 16t…+7 and 16t + 8…+15 of dimensions 8n…+7, then of 8n + 8…+15.
                        int m = lane / 8;
                        const unsigned short *v = values + (t * 16 + (m & 1) * 8 + lane % 8) * KP + (m >> 1) * 8;
                        #pragma unroll
                        for (int n = 0; n < 8; n += 2) {
                            unsigned int b[4];
                            lk_load_matrices_transposed(b, lk_shared_address(v + n * 8));
                            lk_mma_16<TYPE>(O[n], p, b);
                            lk_mma_16<TYPE>(O[n + 1], p, b + 2);
                        }
                    }
                    #pragma unroll
                    for (int n = 0; n < 8; n++) {
                        int d = h * 64 + n * 8 + 2 * q;
                        if (row0 < length)
                            *(unsigned int *)(out + (start + row0) * width + d) =
                                lk_pack_16<TYPE>(O[n][0] / l0, O[n][1] / l0);
                        if (row1 < length)
                            *(unsigned int *)(out + (start + row1) * width + d) =
                                lk_pack_16<TYPE>(O[n][2] / l1, O[n][3] / l1);
                    }
                }
            }
        }

        extern "C" {

        // Grid (⌈pixels/64⌉, ⌈outputs/64⌉, splits), 128 threads: tiles of 64 outputs.
        __global__ void __launch_bounds__(128, 4) lk_conv_16(
            const unsigned short *w, int M, int K, const float *x0, const float *x1, const float *x2, const float *x3,
            int s1, int s2, int s3, int H, int W, int kernel, int stride, int OH, int OW, const float *bias, int act,
            float *out, int type, int tilesPerSplit, float *partial) {
            __shared__ __align__(16) unsigned short As[64][40];
            __shared__ __align__(16) unsigned short Bs[64][40];
            lk_conv_any<64>(As, Bs, w, M, K, x0, x1, x2, x3, s1, s2, s3, H, W, kernel, stride, OH, OW, bias, act, out,
                            type, tilesPerSplit, partial);
        }

        // Grid (⌈pixels/64⌉, ⌈outputs/128⌉, splits), 256 threads: tiles of 128 outputs (each lowered value
        // fetched once for twice the outputs).
        __global__ void __launch_bounds__(256, 2) lk_conv_16_wide(
            const unsigned short *w, int M, int K, const float *x0, const float *x1, const float *x2, const float *x3,
            int s1, int s2, int s3, int H, int W, int kernel, int stride, int OH, int OW, const float *bias, int act,
            float *out, int type, int tilesPerSplit, float *partial) {
            __shared__ __align__(16) unsigned short As[128][40];
            __shared__ __align__(16) unsigned short Bs[64][40];
            lk_conv_any<128>(As, Bs, w, M, K, x0, x1, x2, x3, s1, s2, s3, H, W, kernel, stride, OH, OW, bias, act,
                             out, type, tilesPerSplit, partial);
        }

        // A split lk_conv_16's sums added in split order, then bias and SiLU.
        __global__ void lk_split_sum(const float *partial, int splits, int M, int P, const float *bias, int act,
                                     float *out) {
            LK_ROWS(m, M, p, P) {
                float v = 0.0f;
                for (int split = 0; split < splits; split++) v += partial[((long long)split * M + m) * P + p];
                out[(long long)m * P + p] = lk_bias_silu(v, bias[m], act);
            }
        }

        // y[o, p] = y[o, p] + bias[o], then SiLU where `act`. Grid (pixels, outputs).
        __global__ void lk_bias_act(float *y, const float *bias, int plane, int outputs, int act) {
            LK_ROWS(o, outputs, p, plane) {
                float *at = y + (long long)o * plane + p;
                *at = lk_bias_silu(*at, bias[o], act);
            }
        }

        // The convolution's lowered input (lk_lower).
        __global__ void lk_im2col(const float *x, float *col, int C, int H, int W, int k, int s, int OH, int OW,
                                  int N) {
            lk_lower(x, col, C, H, W, k, s, OH, OW, N, 0);
        }

        // C[i, j] = Σ_k A(i, k)·B(k, j) (+ beta·C), A(i, k) = a[i·sam + k·sak], B(k, j) = b[k·sbk + j·sbn]: the
        // GEMM where cuBLAS is absent (lk_gemm_tiles). Grid (⌈N/16⌉, ⌈M/16⌉), block 16×16.
        __global__ void lk_gemm(int M, int N, int K, const float *a, long long sam, long long sak, const float *b,
                                long long sbk, long long sbn, float *c, long long ldc, float beta) {
            lk_gemm_tiles(M, N, K, a, sam, sak, b, sbk, sbn, c, ldc, beta, 0);
        }

        // One k×k filter per channel, stride 1, padding k/2, bias, SiLU where `act`.
        // N images stacked as one tall map: each image's plane on its own.
        __global__ void lk_depthwise(const float *x, const float *w, const float *bias, float *y, int C, int H,
                                     int W, int k, int act, int N) {
            int half = k / 2;
            LK_LOOP(i, (long long)C * N * H * W) {
                int xx = (int)(i % W), yy = (int)((i / W) % H);
                long long image = i / ((long long)H * W);
                int c = (int)(image / N);
                const float *plane = x + image * H * W;
                const float *filter = w + (long long)c * k * k;
                float sum = 0.0f;
                for (int ky = 0; ky < k; ky++) {
                    int iy = yy + ky - half;
                    if (iy < 0 || iy >= H) continue;
                    for (int kx = 0; kx < k; kx++) {
                        int ix = xx + kx - half;
                        if (ix < 0 || ix >= W) continue;
                        sum += plane[iy * W + ix] * filter[ky * k + kx];
                    }
                }
                y[i] = lk_bias_silu(sum, bias[c], act);
            }
        }

        // ConvTranspose2d(k=2, s=2): taps 4 × O × I (tap dy·2 + dx), bias.
        __global__ void lk_transposed2x2(const float *x, const float *taps, const float *bias, float *y, int I,
                                         int O, int H, int W) {
            LK_LOOP(i, (long long)O * 4 * H * W) {
                int ox = (int)(i % (2 * W)), oy = (int)((i / (2 * W)) % (2 * H)), o = (int)(i / (4LL * H * W));
                int tap = (oy % 2) * 2 + (ox % 2);
                const float *w = taps + ((long long)tap * O + o) * I;
                long long at = (long long)(oy / 2) * W + ox / 2;
                float sum = 0.0f;
                for (int c = 0; c < I; c++) sum += w[c] * x[(long long)c * H * W + at];
                y[i] = sum + bias[o];
            }
        }

        // Max over a (2r+1)² window, stride 1; the padding never wins.
        __global__ void lk_max_pool(const float *x, float *y, int C, int H, int W, int r) {
            LK_LOOP(i, (long long)C * H * W) {
                int xx = (int)(i % W), yy = (int)((i / W) % H);
                const float *plane = x + (i / ((long long)H * W)) * H * W;
                float best = -LK_INFINITY;
                for (int iy = max(0, yy - r); iy <= min(H - 1, yy + r); iy++)
                    for (int ix = max(0, xx - r); ix <= min(W - 1, xx + r); ix++) best = fmaxf(best, plane[iy * W + ix]);
                y[i] = best;
            }
        }

        __global__ void lk_upsample2(const float *x, float *y, int C, int H, int W) {
            LK_LOOP(i, (long long)C * 4 * H * W) {
                int ox = (int)(i % (2 * W)), oy = (int)((i / (2 * W)) % (2 * H));
                long long c = i / (4LL * H * W);
                y[i] = x[(c * H + oy / 2) * W + ox / 2];
            }
        }

        __global__ void lk_add(float *x, const float *y, long long n) {
            LK_LOOP(i, n) x[i] += y[i];
        }

        // x[c, p] = shift[c] + x[c, p]·scale[c], one rounding (as the CPU's fma).
        __global__ void lk_affine(float *x, const float *scale, const float *shift, int plane, long long n) {
            LK_LOOP(i, n) {
                long long c = i / plane;
                x[i] = fmaf(x[i], scale[c], shift[c]);
            }
        }

        __global__ void lk_gather(const float *x, const int *columns, float *out, int C, int plane, int n) {
            LK_LOOP(i, (long long)C * n) {
                long long c = i / n;
                out[i] = x[c * plane + columns[i % n]];
            }
        }

        // Σ_c w[c]·x[c, p], summed in channel order.
        __global__ void lk_weighted_sum(const float *x, const float *w, float *out, int C, int plane) {
            LK_LOOP(p, plane) {
                float sum = 0.0f;
                for (int c = 0; c < C; c++) sum += w[c] * x[(long long)c * plane + p];
                out[p] = sum;
            }
        }

        // YOLO-World's max-sigmoid attention: per head m and pixel p,
        // sigmoid(max_k Σ_j x[m·hc + j, p]·g[k, m·hc + j] / divisor + bias[m]).
        __global__ void lk_max_sigmoid(const float *x, const float *g, const float *bias, float *out, int channels,
                                       int classes, int heads, int plane, float divisor) {
            int hc = channels / heads;
            LK_LOOP(i, (long long)heads * plane) {
                int p = (int)(i % plane), m = (int)(i / plane);
                float best = -LK_INFINITY;
                for (int k = 0; k < classes; k++) {
                    const float *guide = g + (long long)k * channels + m * hc;
                    float sum = 0.0f;
                    for (int j = 0; j < hc; j++) sum += x[(long long)(m * hc + j) * plane + p] * guide[j];
                    best = fmaxf(best, sum);
                }
                out[i] = lk_sigmoid_of(best / divisor + bias[m]);
            }
        }

        // Each channel times its head's weight at each pixel (weights heads × plane).
        __global__ void lk_scale_heads(const float *x, const float *w, float *y, int channels, int hc, int plane) {
            LK_LOOP(i, (long long)channels * plane) {
                long long c = i / plane, p = i % plane;
                y[i] = x[i] * w[(c / hc) * plane + p];
            }
        }

        // The head's level: per anchor p the DFL expectation of each side's bins (softmax over the bins, Σ b·p_b;
        // the channel itself with one bin), the box (centre x, centre y, width, height) in input pixels, and the
        // sigmoid class scores from `logits` (classes × plane). Into out, (4 + classes) × plane.
        // The head's level: DFL boxes (centre, size) and sigmoid class scores of each anchor p, into row r of
        // `out` at out[r·ld + offset + p] (the whole output's rows, where the level's anchors start). Of images
        // stacked as one tall map, an anchor's row is its row in its image (`rows` an image).
        __global__ void lk_head_decode(const float *box, const float *logits, const float *constants, float scale,
                                       float bias, int plane, int width, int rows, int bins, int classes,
                                       float stride, float *whole, long long ld, long long offset) {
            LK_LOOP(p, plane) {
                float *out = whole + offset;
                float d[4];
                for (int side = 0; side < 4; side++) {
                    const float *rows = box + (long long)side * bins * plane + p;
                    if (bins == 1) {
                        d[side] = rows[0];
                        continue;
                    }
                    float maximum = -LK_INFINITY;
                    for (int b = 0; b < bins; b++) maximum = fmaxf(maximum, rows[(long long)b * plane]);
                    float total = 0.0f, weighted = 0.0f;
                    for (int b = 0; b < bins; b++) {
                        float v = expf(rows[(long long)b * plane] - maximum);
                        total += v;
                        weighted += (float)b * v;
                    }
                    d[side] = weighted / total;
                }
                float ax = (float)(p % width) + 0.5f, ay = (float)((p / width) % rows) + 0.5f;
                float x1 = ax - d[0], y1 = ay - d[1], x2 = ax + d[2], y2 = ay + d[3];
                out[p] = (x1 + x2) / 2.0f * stride;
                out[ld + p] = (y1 + y2) / 2.0f * stride;
                out[2LL * ld + p] = (x2 - x1) * stride;
                out[3LL * ld + p] = (y2 - y1) * stride;
                for (int k = 0; k < classes; k++)
                    out[(4LL + k) * ld + p] = lk_sigmoid_of((logits[(long long)k * plane + p] + constants[k]) * scale + bias);
            }
        }

        // Image `index` of N stacked as one tall map (each channel the images' planes in turn): `stack` copies a
        // map of its own (C × plane) into the tall one, else the other way.
        __global__ void lk_restack(const float *x, float *y, int C, long long plane, int N, int index, int stack) {
            LK_LOOP(i, (long long)C * plane) {
                long long c = i / plane, p = i - c * plane;
                long long tall = (c * N + index) * plane + p;
                if (stack) y[tall] = x[i]; else y[i] = x[tall];
            }
        }

        __global__ void lk_scale(const float *x, float *y, float s, long long n) {
            LK_LOOP(i, n) y[i] = x[i] * s;
        }

        // Softmax of each row (subtracting its maximum).
        __global__ void lk_softmax_rows(float *x, int rows, int length) {
            LK_LOOP(r, rows) {
                float *row = x + r * length;
                float maximum = -LK_INFINITY;
                for (int j = 0; j < length; j++) maximum = fmaxf(maximum, row[j]);
                float total = 0.0f;
                for (int j = 0; j < length; j++) {
                    row[j] = expf(row[j] - maximum);
                    total += row[j];
                }
                for (int j = 0; j < length; j++) row[j] /= total;
            }
        }

        // NMS's candidates in descending score order, index order among equal scores (−0 equal to +0): one
        // integer a candidate, the score's order inverted in the high 32 bits and the index in the low, as the
        // host's sort keys them. Each thread counts the keys below its own (the keys read by tiles of 256 into
        // shared memory): its rank, where it writes its index if among the first `kept`.
        __device__ __forceinline__ unsigned long long lk_score_key(float score, int index) {
            unsigned int bits = __float_as_uint(score == 0.0f ? 0.0f : score);
            unsigned int ascending = (bits & 0x80000000u) ? ~bits : (bits | 0x80000000u);
            return ((unsigned long long)(~ascending) << 32) | (unsigned int)index;
        }
        __global__ void lk_nms_rank(const float *scores, int n, int kept, int *order) {
            __shared__ unsigned long long tile[256];
            int i = blockIdx.x * blockDim.x + threadIdx.x;
            unsigned long long mine = i < n ? lk_score_key(scores[i], i) : 0ULL;
            int rank = 0;
            for (int first = 0; first < n; first += 256) {
                int j = first + threadIdx.x;
                tile[threadIdx.x] = j < n ? lk_score_key(scores[j], j) : ~0ULL;
                __syncthreads();
                int end = min(256, n - first);
                for (int b = 0; b < end; b++) rank += tile[b] < mine ? 1 : 0;
                __syncthreads();
            }
            if (i < n && rank < kept) order[rank] = i;
        }

        // The first m candidates in that order, their corners moved by their offsets (their query's), and their
        // areas, as the host arranges them.
        __global__ void lk_nms_arrange(const float *corners, const float *offsets, const int *order, int m,
                                       float *boxes, float *areas) {
            LK_LOOP(r, m) {
                int i = order[r];
                float offset = offsets[i];
                float x1 = corners[4LL * i] + offset, y1 = corners[4LL * i + 1] + offset;
                float x2 = corners[4LL * i + 2] + offset, y2 = corners[4LL * i + 3] + offset;
                boxes[4 * r] = x1;
                boxes[4 * r + 1] = y1;
                boxes[4 * r + 2] = x2;
                boxes[4 * r + 3] = y2;
                areas[r] = (x2 - x1) * (y2 - y1);
            }
        }

        // NMS's overlaps: boxes (n × 4 corners, descending score order) and their areas; bit j % 64 of word
        // i·words + j/64 set when j > i and IoU > threshold, the IoU computed as the host computes it. A block of 64
        // threads per (row, column) tile of 64 × 64 boxes: the column's boxes read once into shared memory, each
        // thread one row's word; tiles left of the diagonal are zero.
        __global__ void lk_nms_mask(const float *boxes, const float *areas, int n, int words, double threshold,
                                    unsigned long long *mask) {
            __shared__ float tile[64 * 5];
            int row = blockIdx.y, column = blockIdx.x, i = row * 64 + threadIdx.x, first = column * 64;
            if (column < row) {
                if (i < n) mask[(long long)i * words + column] = 0ULL;
                return;
            }
            if (first + threadIdx.x < n) {
                for (int side = 0; side < 4; side++)
                    tile[threadIdx.x * 5 + side] = boxes[4LL * (first + threadIdx.x) + side];
                tile[threadIdx.x * 5 + 4] = areas[first + threadIdx.x];
            }
            __syncthreads();
            if (i >= n) return;
            const float *a = boxes + 4LL * i;
            float a0 = a[0], a1 = a[1], a2 = a[2], a3 = a[3], area = areas[i];
            unsigned long long bits = 0;
            int count = min(64, n - first);
            for (int bit = 0; bit < count; bit++) {
                if (first + bit <= i) continue;
                const float *b = tile + bit * 5;
                // Swift's min and max (a NaN passes through as the host's does, where fminf would drop it).
                float width = lk_max(lk_min(a2, b[2]) - lk_max(a0, b[0]), 0.0f);
                float height = lk_max(lk_min(a3, b[3]) - lk_max(a1, b[1]), 0.0f);
                float intersection = width * height;
                if (!(intersection > 0.0f)) continue;
                float iou = intersection / (area + b[4] - intersection);
                if ((double)iou > threshold) bits |= 1ULL << bit;
            }
            mask[(long long)i * words + column] = bits;
        }

        // NMS's greedy pass over lk_nms_mask's overlaps, in one block: box i is kept unless a kept box before it
        // overlaps it, at most `maximum`. Chunk by chunk of 64 boxes: thread 0 walks the chunk's boxes in order
        // against the chunk's word of what is suppressed (the diagonal block of the mask, loaded side by side),
        // then every thread ORs the kept boxes' rows into the later words. out[0] = kept, out[1...] = the kept
        // boxes' candidates (order[position]).
        __global__ void lk_nms_keep(const unsigned long long *mask, int n, int words, int maximum, const int *order,
                                    int *out) {
            __shared__ unsigned long long removed[512];
            __shared__ unsigned long long diagonal[64];
            __shared__ int keptHere[64];
            __shared__ int keptCount, chunkKept;
            for (int w = threadIdx.x; w < words; w += blockDim.x) removed[w] = 0ULL;
            if (threadIdx.x == 0) keptCount = 0;
            __syncthreads();
            for (int chunk = 0; chunk < words; chunk++) {
                int first = chunk * 64, end = min(64, n - chunk * 64);
                if (threadIdx.x < end) diagonal[threadIdx.x] = mask[(long long)(first + threadIdx.x) * words + chunk];
                __syncthreads();
                if (threadIdx.x == 0) {
                    unsigned long long gone = removed[chunk];
                    int total = keptCount, count = 0;
                    for (int b = 0; b < end && total < maximum; b++) {
                        if ((gone >> b) & 1ULL) continue;
                        out[1 + total] = order[first + b];
                        total++;
                        keptHere[count++] = first + b;
                        gone |= diagonal[b];
                    }
                    keptCount = total;
                    chunkKept = count;
                }
                __syncthreads();
                if (keptCount >= maximum) break;
                int count = chunkKept;
                for (int w = chunk + 1 + threadIdx.x; w < words; w += blockDim.x) {
                    unsigned long long bits = removed[w];
                    for (int k = 0; k < count; k++) bits |= mask[(long long)keptHere[k] * words + w];
                    removed[w] = bits;
                }
                __syncthreads();
            }
            if (threadIdx.x == 0) out[0] = keptCount;
        }

        // The letterboxed network input from 8-bit pixels (`channels` per pixel, BGR first), as the host's C
        // computes it: outside the photo pad/255; inside, the byte (resize 0) or OpenCV's fixed-point bilinear
        // resize — horizontal sums in int32 with 11-bit weights (the border rule from column xmax on), then
        // ((r0 >> 4)·β0 >> 16) + ((r1 >> 4)·β1 >> 16) + 2 >> 2, clamped — channel c from byte 2 − c, / 255.
        // `tables`: source column, α0, α1 (rw each), then top row, bottom row, β0, β1 (rh each).
        __device__ __forceinline__ int lk_resized_row(const unsigned char *line, int channels, int byte,
                                                      const int *tables, int rw, int xmax, int dx) {
            const unsigned char *s = line + (long long)tables[dx] * channels + byte;
            if (dx >= xmax) return (int)s[0] * 2048;
            return (int)s[0] * tables[rw + dx] + (int)s[channels] * tables[2 * rw + dx];
        }

        __global__ void lk_letterbox(const unsigned char *pixels, int width, int channels, int resize, int rw,
                                     int rh, const int *tables, int xmax, int padTop, int padLeft, int outWidth,
                                     int outHeight, float padded, float *out) {
            long long plane = (long long)outWidth * outHeight;
            LK_LOOP(i, plane) {
                int y = (int)(i / outWidth), x = (int)(i % outWidth);
                int dy = y - padTop, dx = x - padLeft;
                if (dy < 0 || dy >= rh || dx < 0 || dx >= rw) {
                    for (int c = 0; c < 3; c++) out[c * plane + i] = padded;
                    continue;
                }
                for (int c = 0; c < 3; c++) {
                    int byte = 2 - c, value;
                    if (!resize) {
                        value = pixels[((long long)dy * width + dx) * channels + byte];
                    } else {
                        const int *rows = tables + 3 * rw;
                        const unsigned char *line0 = pixels + (long long)rows[dy] * width * channels;
                        const unsigned char *line1 = pixels + (long long)rows[rh + dy] * width * channels;
                        int r0 = lk_resized_row(line0, channels, byte, tables, rw, xmax, dx);
                        int r1 = lk_resized_row(line1, channels, byte, tables, rw, xmax, dx);
                        value = (((r0 >> 4) * rows[2 * rh + dy]) >> 16) + (((r1 >> 4) * rows[3 * rh + dy]) >> 16) + 2;
                        value >>= 2;
                        value = value < 0 ? 0 : value > 255 ? 255 : value;
                    }
                    out[c * plane + i] = (float)value / 255.0f;
                }
            }
        }

        // LayerNorm of each row, as the CPU computes it: mean and variance summed in double, then
        // (x·rstd − rstd·mean)·γ + β in float. One warp a row (its lanes' double sums added in a fixed tree).
        // Where `half` is not null, each value is also written there rounded to 16 bits (`type`): the next
        // linear layer's operand; where `y` is null, only there. Rows of a multiple of 128 values, up to 1024 (the
        // towers'), are held in registers as float4s (lk_norm_quads); others are read in each pass.
        #define LK_QUADS 8
        __device__ __forceinline__ bool lk_quads_fit(int width) { return width % 128 == 0 && width <= 128 * LK_QUADS; }

        // A warp's row held as float4s (lane l: quads l, l + 32, …; `count` of them) normalised: mean and variance
        // summed in double in that order, then across the warp; each value written to y (if not null) and, rounded
        // to 16 bits, to half (if not null), at the row's start.
        __device__ __forceinline__ void lk_norm_quads(const float4 *v, int count, int width, const float *gamma,
                                                      const float *beta, float epsilon, float *y,
                                                      unsigned short *half, int type, int lane) {
            double sum = 0.0;
            #pragma unroll
            for (int c = 0; c < LK_QUADS; c++)
                if (c < count) sum += ((double)v[c].x + (double)v[c].y) + ((double)v[c].z + (double)v[c].w);
            for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
            double mean = sum / (double)width;
            double squares = 0.0;
            #pragma unroll
            for (int c = 0; c < LK_QUADS; c++) {
                if (c >= count) continue;
                double a = (double)v[c].x - mean, b = (double)v[c].y - mean;
                double e = (double)v[c].z - mean, f = (double)v[c].w - mean;
                squares += (a * a + b * b) + (e * e + f * f);
            }
            for (int o = 16; o > 0; o >>= 1) squares += __shfl_xor_sync(0xffffffffu, squares, o);
            float variance = (float)(squares / (double)width);
            float rstd = 1.0f / sqrtf(variance + epsilon);
            float shift = -rstd * (float)mean;
            #pragma unroll
            for (int c = 0; c < LK_QUADS; c++) {
                if (c >= count) continue;
                int q = lane + 32 * c;
                float4 g = ((const float4 *)gamma)[q], b = ((const float4 *)beta)[q];
                float4 n = make_float4((v[c].x * rstd + shift) * g.x + b.x, (v[c].y * rstd + shift) * g.y + b.y,
                                       (v[c].z * rstd + shift) * g.z + b.z, (v[c].w * rstd + shift) * g.w + b.w);
                if (y) ((float4 *)y)[q] = n;
                if (half) {
                    uint2 packed;
                    packed.x = (unsigned int)lk_to_16_of(n.x, type) | ((unsigned int)lk_to_16_of(n.y, type) << 16);
                    packed.y = (unsigned int)lk_to_16_of(n.z, type) | ((unsigned int)lk_to_16_of(n.w, type) << 16);
                    ((uint2 *)half)[q] = packed;
                }
            }
        }

        // The same of a row read from memory in each pass (any width).
        __device__ __forceinline__ void lk_norm_row(const float *input, int width, const float *gamma,
                                                    const float *beta, float epsilon, float *y, unsigned short *half,
                                                    int type, int lane) {
            double sum = 0.0;
            for (int i = lane; i < width; i += 32) sum += (double)input[i];
            for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
            double mean = sum / (double)width;
            double squares = 0.0;
            for (int i = lane; i < width; i += 32) {
                double centered = (double)input[i] - mean;
                squares += centered * centered;
            }
            for (int o = 16; o > 0; o >>= 1) squares += __shfl_xor_sync(0xffffffffu, squares, o);
            float variance = (float)(squares / (double)width);
            float rstd = 1.0f / sqrtf(variance + epsilon);
            float shift = -rstd * (float)mean;
            for (int i = lane; i < width; i += 32) {
                float v = (input[i] * rstd + shift) * gamma[i] + beta[i];
                if (y) y[i] = v;
                if (half) half[i] = lk_to_16_of(v, type);
            }
        }

        __global__ void lk_layer_norm(const float *x, const float *gamma, const float *beta, float *y, int rows,
                                      int width, float epsilon, unsigned short *half, int type) {
            int lane = threadIdx.x % 32, warps = blockDim.x / 32;
            bool quads = lk_quads_fit(width);
            for (long long r = (long long)blockIdx.x * warps + threadIdx.x / 32; r < rows;
                 r += (long long)gridDim.x * warps) {
                const float *input = x + r * width;
                float *out = y ? y + r * width : 0;
                unsigned short *rounded = half ? half + r * width : 0;
                if (!quads) {
                    lk_norm_row(input, width, gamma, beta, epsilon, out, rounded, type, lane);
                    continue;
                }
                float4 v[LK_QUADS];
                int count = width / 128;
                #pragma unroll
                for (int c = 0; c < LK_QUADS; c++)
                    if (c < count) v[c] = ((const float4 *)input)[lane + 32 * c];
                lk_norm_quads(v, count, width, gamma, beta, epsilon, out, rounded, type, lane);
            }
        }

        // Multi-head attention within each sequence of a qkv matrix (rows × 3·width: queries, keys, values), causal or
        // full: one thread per (sequence, head, row); softmax subtracting the row's maximum. Heads of at most 256.
        __global__ void lk_sequence_attention(const float *qkv, const int *starts, const int *lengths, int sequences,
                                              int longest, int width, int heads, int causal, float scale,
                                              float *out) {
            int size = width / heads;
            LK_LOOP(item, (long long)sequences * heads * longest) {
                int i = (int)(item % longest), h = (int)((item / longest) % heads), s = (int)(item / ((long long)longest * heads));
                int length = lengths[s];
                if (i >= length) continue;
                long long row = starts[s] + i, stride = 3LL * width;
                const float *q = qkv + row * stride + h * size;
                const float *k = qkv + (long long)starts[s] * stride + width + h * size;
                const float *v = qkv + (long long)starts[s] * stride + 2 * width + h * size;
                int last = causal ? i : length - 1;
                float maximum = -LK_INFINITY;
                for (int j = 0; j <= last; j++) {
                    float dot = 0.0f;
                    for (int d = 0; d < size; d++) dot += q[d] * k[j * stride + d];
                    maximum = fmaxf(maximum, dot * scale);
                }
                float sums[256];
                for (int d = 0; d < size; d++) sums[d] = 0.0f;
                float total = 0.0f;
                for (int j = 0; j <= last; j++) {
                    float dot = 0.0f;
                    for (int d = 0; d < size; d++) dot += q[d] * k[j * stride + d];
                    float e = expf(dot * scale - maximum);
                    total += e;
                    for (int d = 0; d < size; d++) sums[d] += e * v[j * stride + d];
                }
                float *target = out + row * width + h * size;
                for (int d = 0; d < size; d++) target[d] = sums[d] / total;
            }
        }

        // The softmax of a warp's scores `weights[0…last]` (lane j holding j, j + 32, …, its largest in `maximum`):
        // each exp(score − the warp's maximum) in place, and their sum across the warp, every lane waiting.
        __device__ float lk_warp_softmax(float *weights, int last, int lane, float maximum) {
            for (int o = 16; o > 0; o >>= 1) maximum = fmaxf(maximum, __shfl_xor_sync(0xffffffffu, maximum, o));
            float total = 0.0f;
            for (int j = lane; j <= last; j += 32) {
                float e = expf(weights[j] - maximum);
                weights[j] = e;
                total += e;
            }
            for (int o = 16; o > 0; o >>= 1) total += __shfl_xor_sync(0xffffffffu, total, o);
            __syncwarp();
            return total;
        }

        // The same attention, one block per (sequence, head): the head's keys (rows padded to size + 1 floats, so
        // that lanes reading different keys use different banks) and values in shared memory; each warp takes a
        // query row at a time: its lanes score keys j, j + 32, ..., the softmax's maximum and sum go across the
        // warp, then each lane sums its dimensions' values. Shared memory: 4·(longest·(2·size + 1) +
        // warps·(size + longest)) bytes, given at launch.
        __global__ void lk_attention_block(const float *qkv, const int *starts, const int *lengths, int sequences,
                                           int longest, int width, int heads, int causal, float scale, float *out,
                                           unsigned short *half, int type) {
            extern __shared__ float shared[];
            int size = width / heads, pitch = size + 1;
            int warps = blockDim.x / 32, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
            float *keys = shared;
            float *values = keys + longest * pitch;
            float *query = values + longest * size + warp * (size + longest);
            float *weights = query + size;
            for (int item = blockIdx.x; item < sequences * heads; item += gridDim.x) {
                int s = item / heads, h = item % heads;
                int length = lengths[s];
                long long stride = 3LL * width, start = starts[s];
                __syncthreads();
                for (int i = threadIdx.x; i < length * size; i += blockDim.x) {
                    int j = i / size, d = i % size;
                    const float *row = qkv + (start + j) * stride + h * size;
                    keys[j * pitch + d] = row[width + d];
                    values[j * size + d] = row[2 * width + d];
                }
                __syncthreads();
                for (int i = warp; i < length; i += warps) {
                    const float *q = qkv + (start + i) * stride + h * size;
                    for (int d = lane; d < size; d += 32) query[d] = q[d];
                    __syncwarp();
                    int last = causal ? i : length - 1;
                    float maximum = -LK_INFINITY;
                    for (int j = lane; j <= last; j += 32) {
                        const float *k = keys + j * pitch;
                        float dot = 0.0f;
                        for (int d = 0; d < size; d++) dot += query[d] * k[d];
                        dot *= scale;
                        weights[j] = dot;
                        maximum = fmaxf(maximum, dot);
                    }
                    float total = lk_warp_softmax(weights, last, lane, maximum);
                    float *target = out + (start + i) * width + h * size;
                    for (int d = lane; d < size; d += 32) {
                        float sum = 0.0f;
                        for (int j = 0; j <= last; j++) sum += weights[j] * values[j * size + d];
                        target[d] = sum / total;
                        if (half) half[(start + i) * width + h * size + d] = lk_to_16_of(sum / total, type);
                    }
                    __syncwarp();
                }
            }
        }

        // lk_attention_block for heads of 64 (every CLIP tower's) where the width is a multiple of 4: keys read as
        // float4 (rows padded to 68 floats: 16-byte aligned, and lanes reading different keys use different banks)
        // against the warp's query row (broadcast float4 reads), then each lane sums two dimensions of the values;
        // the same sums in the same order. Shared memory: 4·(longest·132 + warps·(64 + ⌈longest/4⌉·4)) bytes.
        __global__ void lk_attention_64(const float *qkv, const int *starts, const int *lengths, int sequences,
                                        int longest, int width, int heads, int causal, float scale, float *out,
                                        unsigned short *half, int type) {
            extern __shared__ float4 shared4[];
            float *keys = (float *)shared4;
            float *values = keys + longest * 68;
            int warps = blockDim.x / 32, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
            int room = 64 + (longest + 3) / 4 * 4;
            float *query = values + longest * 64 + warp * room;
            float *weights = query + 64;
            for (int item = blockIdx.x; item < sequences * heads; item += gridDim.x) {
                int s = item / heads, h = item % heads;
                int length = lengths[s];
                long long stride = 3LL * width, start = starts[s];
                __syncthreads();
                for (int i = threadIdx.x; i < length * 16; i += blockDim.x) {
                    int j = i / 16, d = (i % 16) * 4;
                    const float *row = qkv + (start + j) * stride + h * 64;
                    *(float4 *)(keys + j * 68 + d) = *(const float4 *)(row + width + d);
                    *(float4 *)(values + j * 64 + d) = *(const float4 *)(row + 2 * width + d);
                }
                __syncthreads();
                for (int i = warp; i < length; i += warps) {
                    if (lane < 16)
                        ((float4 *)query)[lane] = *(const float4 *)(qkv + (start + i) * stride + h * 64 + 4 * lane);
                    __syncwarp();
                    const float4 *q = (const float4 *)query;
                    int last = causal ? i : length - 1;
                    float maximum = -LK_INFINITY;
                    for (int j = lane; j <= last; j += 32) {
                        const float4 *k = (const float4 *)(keys + j * 68);
                        float dot = 0.0f;
                        #pragma unroll
                        for (int d = 0; d < 16; d++) {
                            float4 a = q[d], b = k[d];
                            dot += a.x * b.x;
                            dot += a.y * b.y;
                            dot += a.z * b.z;
                            dot += a.w * b.w;
                        }
                        dot *= scale;
                        weights[j] = dot;
                        maximum = fmaxf(maximum, dot);
                    }
                    float total = lk_warp_softmax(weights, last, lane, maximum);
                    float first = 0.0f, second = 0.0f;
                    #pragma unroll 4
                    for (int j = 0; j <= last; j++) {
                        float2 v = ((const float2 *)(values + j * 64))[lane];
                        float w = weights[j];
                        first += w * v.x;
                        second += w * v.y;
                    }
                    long long at = (start + i) * width + h * 64 + 2 * lane;
                    out[at] = first / total;
                    out[at + 1] = second / total;
                    if (half) {
                        half[at] = lk_to_16_of(first / total, type);
                        half[at + 1] = lk_to_16_of(second / total, type);
                    }
                    __syncwarp();
                }
            }
        }

        // out = a + b.
        __global__ void lk_sum(const float *a, const float *b, float *out, long long n) {
            LK_LOOP(i, n) out[i] = a[i] + b[i];
        }

        // out[i] = x[i] + table[i mod span]: a table of rows added to every sequence.
        __global__ void lk_add_repeating(const float *x, const float *table, float *out, long long span, long long n) {
            LK_LOOP(i, n) out[i] = x[i] + table[i % span];
        }

        // out's row r = x's row rows[r].
        __global__ void lk_gather_rows(const float *x, const int *rows, float *out, int width, long long n) {
            LK_LOOP(i, n) out[i] = x[(long long)rows[i / width] * width + i % width];
        }

        // Each image (channels × side × side, images one after another) cut into patch × patch squares, one row
        // each (channel, row, column flattened), row-major over the grid, after a row of zeros per image (where its
        // class token goes): images × (grid² + 1) rows of channels·patch² values.
        // Where value i of the patch rows comes from: its image, channel and pixel (row · side + column); false for
        // the zero row where an image's class token goes.
        __device__ __forceinline__ bool lk_patch_source(long long i, int channels, int side, int patch, int grid,
                                                        long long *image, int *c, long long *pixel) {
            int inputs = channels * patch * patch, tokens = grid * grid + 1;
            long long row = i / inputs;
            int within = (int)(i % inputs), t = (int)(row % tokens);
            if (t == 0) return false;
            *image = row / tokens;
            *c = within / (patch * patch);
            int y = (within / patch) % patch, x = within % patch;
            int gy = (t - 1) / grid, gx = (t - 1) % grid;
            *pixel = (long long)(gy * patch + y) * side + gx * patch + x;
            return true;
        }

        __global__ void lk_patches(const float *images, float *out, int channels, int side, int patch, int grid,
                                   long long n) {
            LK_LOOP(i, n) {
                long long image, pixel;
                int c;
                out[i] = lk_patch_source(i, channels, side, patch, grid, &image, &c, &pixel)
                             ? images[(image * channels + c) * side * side + pixel]
                             : 0.0f;
            }
        }

        __global__ void lk_fill(float *x, float value, long long n) {
            LK_LOOP(i, n) x[i] = value;
        }

        // lk_patches of 8-bit RGB images (side × side × 3, interleaved), each value normalised as the CPU does:
        // (v / 255 − mean[c]) / std[c].
        __global__ void lk_patches_8(const unsigned char *pixels, float *out, float m0, float m1, float m2, float s0,
                                     float s1, float s2, int side, int patch, int grid, long long n) {
            LK_LOOP(i, n) {
                long long image, pixel;
                int c;
                if (!lk_patch_source(i, 3, side, patch, grid, &image, &c, &pixel)) {
                    out[i] = 0.0f;
                    continue;
                }
                float v = (float)pixels[(image * side * side + pixel) * 3 + c];
                float mean = c == 0 ? m0 : c == 1 ? m1 : m2, std = c == 0 ? s0 : c == 1 ? s1 : s2;
                out[i] = __fdiv_rn(__fsub_rn(__fdiv_rn(v, 255.0f), mean), std);
            }
        }

        // The towers' activations (``SequenceActivation``): 0 none, 1 QuickGELU, 2 GELU, 3 GELU's tanh form.
        __device__ __forceinline__ float lk_activation(float v, int act) {
            switch (act) {
            case 1: return v * (1.0f / (1.0f + expf(-1.702f * v)));
            case 2: return 0.5f * v * (1.0f + erff(v * 0.70710678118654752f));
            case 3: return 0.5f * v * (1.0f + tanhf(0.7978845608028654f * (v + 0.044715f * (v * v * v))));
            default: return v;
            }
        }

        // y = f(x).
        __global__ void lk_activate(const float *x, float *y, long long n, int act) {
            LK_LOOP(i, n) y[i] = lk_activation(x[i], act);
        }

        // A linear layer's epilogue, by rows (LK_ROWS): y = f(y + b) (b may be null: no bias); where `half` is not
        // null, also rounded to 16 bits there (the next linear layer's operand).
        __global__ void lk_bias_rows(float *y, const float *b, unsigned short *half, int rows, int outputs, int act,
                                     int type) {
            LK_ROWS(r, rows, o, outputs) {
                long long i = (long long)r * outputs + o;
                float v = lk_activation(b ? y[i] + b[o] : y[i], act);
                y[i] = v;
                if (half) half[i] = lk_to_16_of(v, type);
            }
        }

        // lk_bias_rows four values a thread, where the row's length is a multiple of 4 (`quarters` = outputs / 4):
        // float4 loads and stores, the 16-bit values as one 8-byte store; the same values.
        __global__ void lk_bias_rows_4(float *y, const float *b, unsigned short *half, int rows, int quarters, int act,
                                       int type) {
            LK_ROWS(r, rows, q, quarters) {
                long long i = (long long)r * quarters + q;
                float4 v = ((float4 *)y)[i];
                if (b) {
                    float4 c = ((const float4 *)b)[q];
                    v.x = v.x + c.x, v.y = v.y + c.y, v.z = v.z + c.z, v.w = v.w + c.w;
                }
                v.x = lk_activation(v.x, act), v.y = lk_activation(v.y, act);
                v.z = lk_activation(v.z, act), v.w = lk_activation(v.w, act);
                ((float4 *)y)[i] = v;
                if (half) {
                    uint2 packed;
                    packed.x = (unsigned int)lk_to_16_of(v.x, type) | ((unsigned int)lk_to_16_of(v.y, type) << 16);
                    packed.y = (unsigned int)lk_to_16_of(v.z, type) | ((unsigned int)lk_to_16_of(v.w, type) << 16);
                    ((uint2 *)half)[i] = packed;
                }
            }
        }

        // A residual branch's last linear layer's epilogue: out = x + (y + b), by rows.
        __global__ void lk_bias_residual(const float *x, const float *y, const float *b, float *out, int rows,
                                         int outputs) {
            LK_ROWS(r, rows, o, outputs) {
                long long i = (long long)r * outputs + o;
                out[i] = x[i] + (y[i] + b[o]);
            }
        }

        // lk_bias_residual four values a thread (rows of a multiple of 4): the same values.
        __global__ void lk_bias_residual_4(const float *x, const float *y, const float *b, float *out, int rows,
                                           int quarters) {
            LK_ROWS(r, rows, q, quarters) {
                long long i = (long long)r * quarters + q;
                float4 a = ((const float4 *)x)[i], v = ((const float4 *)y)[i], c = ((const float4 *)b)[q];
                ((float4 *)out)[i] = make_float4(a.x + (v.x + c.x), a.y + (v.y + c.y), a.z + (v.z + c.z),
                                                 a.w + (v.w + c.w));
            }
        }

        // lk_attention_mma for sequences of at most 64 rows (4 warps) and of at most 128 (8 warps); shared memory
        // 2·2·KEYS·72 bytes, given at launch.
        __global__ void __launch_bounds__(128) lk_attention_mma_64(const unsigned short *qkv, const float *bias,
                                                                   const int *starts, const int *lengths,
                                                                   int sequences, int width, int heads, int causal,
                                                                   float scale, unsigned short *out, int type) {
            if (type == 2)
                lk_attention_mma<2, 64>(qkv, bias, starts, lengths, sequences, width, heads, causal, scale, out);
            else
                lk_attention_mma<1, 64>(qkv, bias, starts, lengths, sequences, width, heads, causal, scale, out);
        }
        __global__ void __launch_bounds__(256) lk_attention_mma_128(const unsigned short *qkv, const float *bias,
                                                                    const int *starts, const int *lengths,
                                                                    int sequences, int width, int heads, int causal,
                                                                    float scale, unsigned short *out, int type) {
            if (type == 2)
                lk_attention_mma<2, 128>(qkv, bias, starts, lengths, sequences, width, heads, causal, scale, out);
            else
                lk_attention_mma<1, 128>(qkv, bias, starts, lengths, sequences, width, heads, causal, scale, out);
        }

        // A 16-bit linear layer's products (rows × outputs, four a thread: `quarters` = outputs / 4) in place:
        // f(y + b) in fp32 (b may be null), rounded to 16 bits again.
        __global__ void lk_bias_rows_16(unsigned short *y, const float *b, int rows, int quarters, int act,
                                        int type) {
            LK_ROWS(r, rows, c, quarters) {
                long long i = (long long)r * quarters + c;
                uint2 packed = ((uint2 *)y)[i];
                float4 add = b ? ((const float4 *)b)[c] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
                float v0 = lk_activation(lk_from_16((unsigned short)(packed.x & 0xffffu), type) + add.x, act);
                float v1 = lk_activation(lk_from_16((unsigned short)(packed.x >> 16), type) + add.y, act);
                float v2 = lk_activation(lk_from_16((unsigned short)(packed.y & 0xffffu), type) + add.z, act);
                float v3 = lk_activation(lk_from_16((unsigned short)(packed.y >> 16), type) + add.w, act);
                packed.x = (unsigned int)lk_to_16_of(v0, type) | ((unsigned int)lk_to_16_of(v1, type) << 16);
                packed.y = (unsigned int)lk_to_16_of(v2, type) | ((unsigned int)lk_to_16_of(v3, type) << 16);
                ((uint2 *)y)[i] = packed;
            }
        }

        // lk_bias_residual and the next sublayer's LayerNorm, a warp a row: out = x + (y + b), then that row of out
        // normalised as lk_layer_norm does it (the same sums in the same order, so the same values) and rounded to
        // 16 bits into `half`.
        __global__ void lk_bias_residual_norm(const float *x, const float *y, const float *b, float *out,
                                              const float *gamma, const float *beta, int rows, int width,
                                              float epsilon, unsigned short *half, int type) {
            int lane = threadIdx.x % 32, warps = blockDim.x / 32;
            bool quads = lk_quads_fit(width);
            for (long long r = (long long)blockIdx.x * warps + threadIdx.x / 32; r < rows;
                 r += (long long)gridDim.x * warps) {
                const float *xr = x + r * width, *yr = y + r * width;
                float *o = out + r * width;
                if (!quads) {
                    for (int i = lane; i < width; i += 32) o[i] = xr[i] + (yr[i] + b[i]);
                    __syncwarp();
                    lk_norm_row(o, width, gamma, beta, epsilon, 0, half + r * width, type, lane);
                    continue;
                }
                float4 v[LK_QUADS];
                int count = width / 128;
                #pragma unroll
                for (int c = 0; c < LK_QUADS; c++) {
                    if (c >= count) continue;
                    int q = lane + 32 * c;
                    float4 a = ((const float4 *)xr)[q], p = ((const float4 *)yr)[q], e = ((const float4 *)b)[q];
                    v[c] = make_float4(a.x + (p.x + e.x), a.y + (p.y + e.y), a.z + (p.z + e.z), a.w + (p.w + e.w));
                    ((float4 *)o)[q] = v[c];
                }
                lk_norm_quads(v, count, width, gamma, beta, epsilon, 0, half + r * width, type, lane);
            }
        }

        // y = x rounded to 16 bits.
        __global__ void lk_to_16(const float *x, unsigned short *y, long long n, int type) {
            LK_LOOP(i, n) y[i] = lk_to_16_of(x[i], type);
        }

        // lk_im2col with its rows rounded to 16 bits.
        __global__ void lk_im2col_16(const float *x, unsigned short *col, int C, int H, int W, int k, int s, int OH,
                                     int OW, int N, int type) {
            lk_lower(x, col, C, H, W, k, s, OH, OW, N, type);
        }

        // lk_gemm of 16-bit operands, summed in fp32 (where cuBLAS is absent).
        __global__ void lk_gemm_16(int M, int N, int K, const unsigned short *a, long long sam, long long sak,
                                   const unsigned short *b, long long sbk, long long sbn, float *c, long long ldc,
                                   float beta, int type) {
            lk_gemm_tiles(M, N, K, a, sam, sak, b, sbk, sbn, c, ldc, beta, type);
        }

        // y[r, o] += b[o].
        __global__ void lk_add_rows(float *y, const float *b, int outputs, long long n) {
            LK_LOOP(i, n) y[i] += b[i % outputs];
        }

        }
        """
}
