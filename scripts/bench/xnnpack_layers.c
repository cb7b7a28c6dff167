/* XNNPACK (Debian's libxnnpack-dev, 2022-02 snapshot) on the s model's convolutions at 640x640: the same shapes
   and counts as `lookout-benchmarks layers` and onednn_layers.c, 2 threads (pthreadpool), f32, bias fused.
   XNNPACK computes in NHWC only and cannot fuse SiLU (its convolutions clamp), so these times are for the
   convolution with bias alone, on maps already in NHWC: a lower bound for what it would cost behind Lookout's
   NCHW interface. Median milliseconds of `runs` runs (GFLOP/s counted as direct convolution).

     gcc -O2 scripts/bench/xnnpack_layers.c -o /tmp/xnnpack_layers -lXNNPACK -lpthreadpool && /tmp/xnnpack_layers
*/
#include <math.h>
#include <pthreadpool.h>
#include <stdio.h>
#include <stdlib.h>
#include <xnnpack.h>

#include "layer_shapes.h"

static float *random_floats(size_t count) {
    float *values = malloc(sizeof(float) * (count + 16));
    for (size_t i = 0; i < count + 16; i++) values[i] = (float)((i * 2654435761u) % 2001) / 1000.0f - 1.0f;
    return values;
}

int main(int argc, char **argv) {
    int runs = argc > 1 ? atoi(argv[1]) : 15;
    if (runs < 1 || runs > 64) runs = 15;
    if (xnn_initialize(NULL) != xnn_status_success) {
        fprintf(stderr, "xnn_initialize failed\n");
        return 1;
    }
    pthreadpool_t pool = pthreadpool_create(2);
    printf("XNNPACK (NHWC, bias, no SiLU), 2 threads, median of %d runs\n\n", runs);
    printf("| layer | per detection | XNNPACK |\n|---|---|---|\n");
    double total = 0;
    for (size_t i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++) {
        const int *s = shapes[i];
        int ic = s[0], oc = s[1], k = s[2], st = s[3], h = s[4], w = s[5], pad = k / 2;
        int oh = (h + 2 * pad - k) / st + 1, ow = (w + 2 * pad - k) / st + 1;
        float *kernel = random_floats((size_t)oc * k * k * ic), *bias = random_floats(oc);
        float *input = random_floats((size_t)h * w * ic), *output = malloc(sizeof(float) * ((size_t)oh * ow * oc + 16));
        xnn_operator_t op = NULL;
        if (xnn_create_convolution2d_nhwc_f32(pad, pad, pad, pad, k, k, st, st, 1, 1, 1, ic, oc, ic, oc, kernel, bias,
                                              -INFINITY, INFINITY, 0, &op) != xnn_status_success ||
            xnn_setup_convolution2d_nhwc_f32(op, 1, h, w, input, output, pool) != xnn_status_success) {
            printf("| %d→%d k%d s%d %d×%d | %d | — |\n", ic, oc, k, st, h, w, s[6]);
            continue;
        }
        double samples[64];
        for (int r = -1; r < runs; r++) {
            double start = now();
            xnn_run_operator(op, pool);
            if (r >= 0) samples[r] = now() - start;
        }
            double ms = median(samples, runs) * 1000, flops = 2.0 * ic * oc * k * k * oh * ow;
        total += ms * s[6];
        printf("| %d→%d k%d s%d %d×%d | %d | %.3f ms (%d) |\n", ic, oc, k, st, h, w, s[6], ms, (int)(flops / ms / 1e6));
        xnn_delete_operator(op);
        free(kernel);
        free(bias);
        free(input);
        free(output);
    }
    printf("| all convolutions of a detection | | %.1f ms |\n", total);
    pthreadpool_destroy(pool);
    return 0;
}
