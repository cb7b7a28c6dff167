/* oneDNN (Debian's libdnnl-dev 2.6) on the s model's convolutions at 640x640: the same shapes and counts as
   `lookout-benchmarks layers`, 2 OpenMP threads, f32, bias and SiLU (swish) fused as post-ops, weights in
   oneDNN's own layout (prepared once, like Lookout's `prepare`). Three ways per layer:
     nchw      source and result in Lookout's layout (what a drop-in kernel would see);
     blocked   source and result in the layout oneDNN picks (nChw8c/16c), reorders not counted;
     winograd  oneDNN's Winograd (3x3 stride 1; AVX-512 only), blocked, where it has an implementation.
   Prints a Markdown table: median milliseconds of `runs` runs (GFLOP/s counted as direct convolution).

     gcc -O2 scripts/bench/onednn_layers.c -o /tmp/onednn_layers -ldnnl && OMP_NUM_THREADS=2 /tmp/onednn_layers
*/
#include <dnnl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(call)                                                                                                \
    do {                                                                                                           \
        dnnl_status_t status_ = (call);                                                                            \
        if (status_ != dnnl_success) {                                                                             \
            fprintf(stderr, "%s failed: %d\n", #call, (int)status_);                                               \
            exit(1);                                                                                               \
        }                                                                                                          \
    } while (0)

#include "layer_shapes.h"

static dnnl_memory_t filled(const dnnl_memory_desc_t *md, dnnl_engine_t engine) {
    dnnl_memory_t memory;
    CHECK(dnnl_memory_create(&memory, md, engine, DNNL_MEMORY_ALLOCATE));
    void *data;
    CHECK(dnnl_memory_get_data_handle(memory, &data));
    size_t bytes = dnnl_memory_desc_get_size(md);
    for (size_t i = 0; i < bytes / 4; i++) ((float *)data)[i] = (float)((i * 2654435761u) % 2001) / 1000.0f - 1.0f;
    return memory;
}

/* Median milliseconds, or a negative value when oneDNN has no implementation; `impl` gets its name. */
static double measure(dnnl_engine_t engine, dnnl_stream_t stream, const int *s, int blocked, int winograd, int runs,
                      const char **impl) {
    int ic = s[0], oc = s[1], k = s[2], st = s[3], h = s[4], w = s[5];
    int pad = k / 2, oh = (h + 2 * pad - k) / st + 1, ow = (w + 2 * pad - k) / st + 1;
    dnnl_dims_t src_dims = {1, ic, h, w}, w_dims = {oc, ic, k, k}, b_dims = {oc}, dst_dims = {1, oc, oh, ow};
    dnnl_dims_t strides = {st, st}, padding = {pad, pad};
    dnnl_memory_desc_t src_md, w_md, b_md, dst_md;
    dnnl_format_tag_t layout = blocked ? dnnl_format_tag_any : dnnl_nchw;
    CHECK(dnnl_memory_desc_init_by_tag(&src_md, 4, src_dims, dnnl_f32, layout));
    CHECK(dnnl_memory_desc_init_by_tag(&w_md, 4, w_dims, dnnl_f32, dnnl_format_tag_any));
    CHECK(dnnl_memory_desc_init_by_tag(&b_md, 1, b_dims, dnnl_f32, dnnl_x));
    CHECK(dnnl_memory_desc_init_by_tag(&dst_md, 4, dst_dims, dnnl_f32, layout));
    dnnl_convolution_desc_t desc;
    CHECK(dnnl_convolution_forward_desc_init(&desc, dnnl_forward_inference,
                                             winograd ? dnnl_convolution_winograd : dnnl_convolution_direct, &src_md,
                                             &w_md, &b_md, &dst_md, strides, padding, padding));
    dnnl_post_ops_t ops;
    CHECK(dnnl_post_ops_create(&ops));
    CHECK(dnnl_post_ops_append_eltwise(ops, 1.0f, dnnl_eltwise_swish, 1.0f, 0.0f));
    dnnl_primitive_attr_t attr;
    CHECK(dnnl_primitive_attr_create(&attr));
    CHECK(dnnl_primitive_attr_set_post_ops(attr, ops));
    dnnl_primitive_desc_t pd;
    if (dnnl_primitive_desc_create(&pd, &desc, attr, engine, NULL) != dnnl_success) {
        *impl = "-";
        return -1;
    }
    CHECK(dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, impl));
    dnnl_memory_t src = filled(dnnl_primitive_desc_query_md(pd, dnnl_query_src_md, 0), engine);
    dnnl_memory_t wei = filled(dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0), engine);
    dnnl_memory_t bias = filled(dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 1), engine);
    dnnl_memory_t dst = filled(dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0), engine);
    dnnl_primitive_t conv;
    CHECK(dnnl_primitive_create(&conv, pd));
    dnnl_exec_arg_t args[4] = {
        {DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, wei}, {DNNL_ARG_BIAS, bias}, {DNNL_ARG_DST, dst}};
    double samples[64];
    for (int r = -1; r < runs; r++) {
        double start = now();
        CHECK(dnnl_primitive_execute(conv, stream, 4, args));
        CHECK(dnnl_stream_wait(stream));
        if (r >= 0) samples[r] = now() - start;
    }
    dnnl_primitive_destroy(conv);
    dnnl_memory_destroy(src);
    dnnl_memory_destroy(wei);
    dnnl_memory_destroy(bias);
    dnnl_memory_destroy(dst);
    dnnl_primitive_desc_destroy(pd);
    dnnl_primitive_attr_destroy(attr);
    dnnl_post_ops_destroy(ops);
    return median(samples, runs) * 1000;
}

int main(int argc, char **argv) {
    int runs = argc > 1 ? atoi(argv[1]) : 15;
    if (runs < 1 || runs > 64) runs = 15;
    dnnl_engine_t engine;
    dnnl_stream_t stream;
    CHECK(dnnl_engine_create(&engine, dnnl_cpu, 0));
    CHECK(dnnl_stream_create(&stream, engine, dnnl_stream_default_flags));
    const dnnl_version_t *version = dnnl_version();
    printf("oneDNN %d.%d.%d, median of %d runs\n\n", version->major, version->minor, version->patch, runs);
    printf("| layer | per detection | nchw | blocked | winograd |\n|---|---|---|---|---|\n");
    double totals[3] = {0, 0, 0};
    for (size_t i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++) {
        const int *s = shapes[i];
        int oh = (s[4] + 2 * (s[2] / 2) - s[2]) / s[3] + 1, ow = (s[5] + 2 * (s[2] / 2) - s[2]) / s[3] + 1;
        double flops = 2.0 * s[0] * s[1] * s[2] * s[2] * oh * ow;
        printf("| %d→%d k%d s%d %d×%d | %d |", s[0], s[1], s[2], s[3], s[4], s[5], s[6]);
        for (int way = 0; way < 3; way++) {
            const char *impl = "";
            double ms = -1;
            if (way < 2 || (s[2] == 3 && s[3] == 1)) ms = measure(engine, stream, s, way >= 1, way == 2, runs, &impl);
            if (ms < 0) {
                printf(" — |");
                if (way < 2) totals[way] = -1e30;
                continue;
            }
            printf(" %.3f ms (%d, %s) |", ms, (int)(flops / ms / 1e6), impl);
            if (way < 2) totals[way] += ms * s[6];
        }
        printf("\n");
    }
    printf("| all convolutions of a detection | | %.1f ms | %.1f ms | |\n", totals[0], totals[1]);
    dnnl_stream_destroy(stream);
    dnnl_engine_destroy(engine);
    return 0;
}
